// What a command started in a sandbox runs with when its caller does not say
// (docs/api.md#sandboxexec): the environment layers (base, image, sandbox,
// call; a later layer wins), the working directory and the image's user.
// Shared by sandbox::exec and the live processes, so both start a program
// the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

// The final "K=V" environment: PATH and HOME, the image's, the sandbox's
// create-time env, then `call_env`; each key once, where its last layer
// put it.
std::vector<std::string> LayeredEnv(const Sandbox& sb, const Env& call_env);

// The working directory: the call's, else the image's WorkingDir, else "/".
std::string CommandCwd(const Sandbox& sb, const std::optional<std::string>& call_cwd);

// The image's User (OCI config) for the agent to resolve inside the sandbox,
// or nullopt when it is root (no switch needed).
std::optional<std::string> ImageUser(const Sandbox& sb);

}  // namespace skiff
