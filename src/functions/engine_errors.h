// Errors of the engine protocol that are not S-codes
// (docs/architecture.md#transports-and-their-limits/docs/api.md#enginefunctionsinfo), as values. An
// EngineFault is what a transport sends as {"code","message"}: an unknown function id ("function_not_found"),
// or a rejected engine::functions::info request ("INVALID_ARGUMENTS" | "NOT_FOUND"). The wire codes and their
// HTTP statuses live here and nowhere else, with the iii wrapper of an S-code error ("invocation_failed").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace skiff {

class EngineFault {
 public:
  enum class Kind {
    kFunctionNotFound,  // "function_not_found", HTTP 404
    kInvalidArguments,  // "INVALID_ARGUMENTS", HTTP 400
    kNotFound,          // "NOT_FOUND", HTTP 404
  };

  EngineFault(Kind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  // "function '<id>' is not provided by skiff".
  static EngineFault FunctionNotFound(std::string_view function_id);
  static EngineFault InvalidArguments(std::string message) {
    return EngineFault(Kind::kInvalidArguments, std::move(message));
  }
  static EngineFault NotFound(std::string message) {
    return EngineFault(Kind::kNotFound, std::move(message));
  }

  Kind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // The wire code: "function_not_found", "INVALID_ARGUMENTS", "NOT_FOUND".
  std::string_view code() const;
  int http_status() const;
  // {"code","message"}: the WS invocationresult `error`, the HTTP body.
  nlohmann::json ToJson() const;

 private:
  Kind kind_;
  std::string message_;
};

// The iii invocationresult `error` for an S-code error, given the compact
// JSON of its docs/errors.md wire object:
// {"code":"invocation_failed","message":"handler error: <compact_error>"}.
nlohmann::json InvocationFailed(std::string_view compact_error);

}  // namespace skiff
