// The host's HELLO frames (stream 0; see frame.h and docs/protocol.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace skiff::proto {

// The host's answer to the agent's HELLO: {"proto":kVersion}.
std::string EncodeHostHello();

// The HELLO a host sends first to a guest restored from a snapshot:
// {"proto":kVersion,"resume":resume}, where `resume` carries the sandbox's
// own state (seed, clock, hostname). The agent applies it and answers with
// its HELLO.
std::string EncodeResumeHello(const nlohmann::json& resume);

}  // namespace skiff::proto
