// skiff's version (the project's version in CMake), for every component
// that reports it: the daemon, the agent, the API description, the engine
// link. Defined once, in version.cc, so a new version rebuilds one file.
#pragma once

namespace skiff {

const char* SkiffVersion();

}  // namespace skiff
