#include "e2b/connect_envelope.h"

namespace skiff::e2b {

std::string Envelope(uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out.push_back(static_cast<char>(flags));
  auto n = static_cast<uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(payload);
  return out;
}

std::string EndStream(const std::optional<std::pair<std::string, std::string>>& error) {
  nlohmann::json end = nlohmann::json::object();
  if (error) end["error"] = {{"code", error->first}, {"message", error->second}};
  return Envelope(kEnvelopeEndStream, end.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::string> SingleMessage(std::string_view body) {
  if (body.size() < 5) return InvalidRequest("connect: the request body is not an enveloped message");
  auto flags = static_cast<uint8_t>(body[0]);
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<uint8_t>(body[i]);
  if (flags & kEnvelopeCompressed) return InvalidRequest("connect: compressed messages are not accepted");
  if (flags != kEnvelopeMessage) return InvalidRequest("connect: unexpected envelope flags in the request");
  if (n > kMaxRequestMessage) return InvalidRequest("connect: request message too large");
  if (body.size() - 5 != n) return InvalidRequest("connect: the request must be exactly one message");
  return std::string(body.substr(5));
}

std::string_view ConnectCodeName(ConnectCode c) {
  switch (c) {
    case ConnectCode::kCanceled:
      return "canceled";
    case ConnectCode::kUnknown:
      return "unknown";
    case ConnectCode::kInvalidArgument:
      return "invalid_argument";
    case ConnectCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ConnectCode::kNotFound:
      return "not_found";
    case ConnectCode::kAlreadyExists:
      return "already_exists";
    case ConnectCode::kPermissionDenied:
      return "permission_denied";
    case ConnectCode::kResourceExhausted:
      return "resource_exhausted";
    case ConnectCode::kFailedPrecondition:
      return "failed_precondition";
    case ConnectCode::kUnimplemented:
      return "unimplemented";
    case ConnectCode::kInternal:
      return "internal";
    case ConnectCode::kUnavailable:
      return "unavailable";
    case ConnectCode::kUnauthenticated:
      return "unauthenticated";
  }
  return "unknown";
}

int ConnectHttpStatus(ConnectCode c) {
  switch (c) {
    case ConnectCode::kCanceled:
      return 499;
    case ConnectCode::kUnknown:
      return 500;
    case ConnectCode::kInvalidArgument:
      return 400;
    case ConnectCode::kDeadlineExceeded:
      return 504;
    case ConnectCode::kNotFound:
      return 404;
    case ConnectCode::kAlreadyExists:
      return 409;
    case ConnectCode::kPermissionDenied:
      return 403;
    case ConnectCode::kResourceExhausted:
      return 429;
    case ConnectCode::kFailedPrecondition:
      return 400;
    case ConnectCode::kUnimplemented:
      return 501;
    case ConnectCode::kInternal:
      return 500;
    case ConnectCode::kUnavailable:
      return 503;
    case ConnectCode::kUnauthenticated:
      return 401;
  }
  return 500;
}

ConnectCode ConnectCodeOf(const Error& e) {
  switch (e.code()) {
    case Code::kS001:
    case Code::kS210:
    case Code::kS212:  // wrong type: a file where a directory is needed
    case Code::kS217:
      return ConnectCode::kInvalidArgument;
    case Code::kS002:
    case Code::kS211:
    case Code::kS220:
      return ConnectCode::kNotFound;
    case Code::kS213:
      return ConnectCode::kAlreadyExists;
    case Code::kS215:
      return ConnectCode::kPermissionDenied;
    case Code::kS003:
    case Code::kS400:
      return ConnectCode::kResourceExhausted;
    case Code::kS004:
    case Code::kS005:
      return ConnectCode::kUnavailable;
    case Code::kS200:
      return ConnectCode::kDeadlineExceeded;
    case Code::kS214:
    case Code::kS221:
      return ConnectCode::kFailedPrecondition;
    case Code::kS219:
      return ConnectCode::kUnimplemented;
    default:
      return ConnectCode::kUnknown;
  }
}

nlohmann::json ConnectErrorBody(ConnectCode c, std::string_view message) {
  return {{"code", std::string(ConnectCodeName(c))}, {"message", std::string(message)}};
}

}  // namespace skiff::e2b
