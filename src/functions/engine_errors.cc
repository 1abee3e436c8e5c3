#include "functions/engine_errors.h"

namespace skiff {
namespace {

struct KindInfo {
  std::string_view code;
  int http;
};

KindInfo InfoFor(EngineFault::Kind k) {
  switch (k) {
    case EngineFault::Kind::kFunctionNotFound:
      return {"function_not_found", 404};
    case EngineFault::Kind::kInvalidArguments:
      return {"INVALID_ARGUMENTS", 400};
    case EngineFault::Kind::kNotFound:
      return {"NOT_FOUND", 404};
  }
  return {"NOT_FOUND", 404};
}

}  // namespace

EngineFault EngineFault::FunctionNotFound(std::string_view function_id) {
  return EngineFault(Kind::kFunctionNotFound,
                     "function '" + std::string(function_id) + "' is not provided by skiff");
}

std::string_view EngineFault::code() const { return InfoFor(kind_).code; }

int EngineFault::http_status() const { return InfoFor(kind_).http; }

nlohmann::json EngineFault::ToJson() const { return {{"code", std::string(code())}, {"message", message_}}; }

nlohmann::json InvocationFailed(std::string_view compact_error) {
  return {{"code", "invocation_failed"}, {"message", "handler error: " + std::string(compact_error)}};
}

}  // namespace skiff
