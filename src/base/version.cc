#include "base/version.h"

#ifndef SKIFF_VERSION
#error "SKIFF_VERSION is set by src/base/CMakeLists.txt"
#endif

namespace skiff {

const char* SkiffVersion() { return SKIFF_VERSION; }

}  // namespace skiff
