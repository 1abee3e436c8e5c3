// The HELLO frames (stream 0; see frame.h and docs/protocol.md), as types
// like those of messages.h, and their encoders. Every HELLO either side
// sends is built here.
//
//   agent -> host  {"proto", "agent", "ops":[...], "restored"?: true}  AgentHello
//   host -> agent  {"proto"}                                           HostHello
//   host -> agent  {"proto", "resume": {seed, realtime_ns, hostname?}} ResumeHello, first, to a
//                                                                      guest restored from a snapshot
//                                                                      (a template, or a live VM saved
//                                                                      while quiesced: its streams
//                                                                      belong to the source's host and
//                                                                      are dropped, messages.h)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace skiff::proto {

// The agent's HELLO: sent first, and again after a resume (restored).
struct AgentHello {
  uint32_t proto = 0;
  std::string agent;             // "skiff-agent/<version>"
  std::vector<std::string> ops;  // the ops of ops.h it serves
  bool restored = false;         // on the wire only when true

  nlohmann::json ToJson() const;
  // Only "proto" is required (the host needs nothing else to talk); agent,
  // ops and restored are type-checked when present. Errors are S300
  // "platform failure: boot: agent sent a malformed HELLO (...)".
  static Result<AgentHello> FromJson(const nlohmann::json& j);
  bool operator==(const AgentHello&) const = default;
};

// The host's answer to the agent's HELLO.
struct HostHello {
  uint32_t proto = 0;

  nlohmann::json ToJson() const;
  static Result<HostHello> FromJson(const nlohmann::json& j);
  bool operator==(const HostHello&) const = default;
};

// What makes a guest restored from a snapshot this sandbox's own: a fresh
// CRNG seed (lower-case hex, even length), the wall clock, the hostname.
struct Resume {
  std::string seed_hex;
  int64_t realtime_ns = 0;
  std::optional<std::string> hostname;

  nlohmann::json ToJson() const;
  // S001 "invalid request: malformed resume request (...)".
  static Result<Resume> FromJson(const nlohmann::json& j);
  bool operator==(const Resume&) const = default;
};

// HELLO frames, encoded: the host's answer {"proto":kVersion}; the
// resume HELLO {"proto":kVersion,"resume":...}; the agent's HELLO.
std::string EncodeHostHello();
std::string EncodeResumeHello(const Resume& resume);
std::string EncodeAgentHello(const AgentHello& hello);

}  // namespace skiff::proto
