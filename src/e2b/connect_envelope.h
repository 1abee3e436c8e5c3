// The Connect protocol's framing as the E2B SDK speaks it (JSON codec over
// HTTP/1.1; docs/e2b.md#envd): 5-byte envelopes (flags, big-endian length)
// around each message of a streaming call, the end-of-stream envelope, and
// the Connect error codes with the HTTP status each one travels with on a
// unary call. Pure: no I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff::e2b {

inline constexpr uint8_t kEnvelopeMessage = 0x00;
inline constexpr uint8_t kEnvelopeCompressed = 0x01;
inline constexpr uint8_t kEnvelopeEndStream = 0x02;
// The largest request message accepted (a SendInput of terminal bytes, a
// StartRequest with its environment).
inline constexpr size_t kMaxRequestMessage = size_t{4} << 20;

// One envelope around `payload`.
std::string Envelope(uint8_t flags, std::string_view payload);
// The end-of-stream envelope: {} on success, else {"error":{code,message}}.
std::string EndStream(const std::optional<std::pair<std::string, std::string>>& error = std::nullopt);

// The single message of a server-streaming call's request body: one
// uncompressed message envelope, nothing after it. An error (invalid
// argument) says what is wrong.
Result<std::string> SingleMessage(std::string_view body);

// Connect's error codes (lower snake case on the wire).
enum class ConnectCode {
  kCanceled,
  kUnknown,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kUnauthenticated,
};
std::string_view ConnectCodeName(ConnectCode c);
// The HTTP status a unary call's error is sent with.
int ConnectHttpStatus(ConnectCode c);
// The Connect code an S-code error of skiff maps to.
ConnectCode ConnectCodeOf(const Error& e);

// A unary error body: {"code": "...", "message": "..."}.
nlohmann::json ConnectErrorBody(ConnectCode c, std::string_view message);

}  // namespace skiff::e2b
