// The function registry: each sandbox::* / engine::* function declares its
// id, description, request and response JSON Schemas (draft-07) and handler
// exactly once. Transports, generated docs and tests all read this table.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "sandbox/service.h"

namespace skiff {

// Data channels (spec §8.4) are a transport facility; handlers reach them
// through this interface, implemented by the API layer (or by a test double).
class ChannelBroker {
 public:
  virtual ~ChannelBroker() = default;
  // fs::read: a channel whose reader gets the bytes `producer` writes to the
  // sink it is given (called when a reader attaches; lazily for big files).
  // Returns the reader reference {"channel_id","access_key","direction":"read"}.
  using Producer = std::function<Status(const ByteSink& sink)>;
  virtual Result<nlohmann::json> CreateReadChannel(Producer producer) = 0;
  // fs::write with a channel reference as `content`: attach as the reader
  // and return a source of its bytes (S218 on a 5 s stall or abort).
  virtual Result<ByteSource> AttachReader(const nlohmann::json& ref) = 0;
  // engine::channels::create.
  virtual Result<nlohmann::json> CreateChannelPair(uint32_t buffer_size) = 0;
};

struct CallContext {
  SandboxService& manager;
  ChannelBroker* channels = nullptr;  // null: channel features answer S001/S216
};

struct FunctionDef {
  std::string id;           // "sandbox::exec"
  std::string description;  // one line
  nlohmann::json request_schema;
  nlohmann::json response_schema;
  bool internal = false;    // engine::* (listed only with include_internal)
  std::string worker_name;  // "iii-sandbox" | "iii-engine-functions"
  // Runs the function: validates `payload` (spec §1, §1.3 check order) and
  // returns the result object or an Error with its S-code.
  std::function<Result<nlohmann::json>(const nlohmann::json& payload, CallContext& ctx)> handler;
  // The S-codes the function can return (docs/api.md lists them).
  std::vector<Code> errors;
};

// Errors of the engine::* functions that are not S-codes (spec §8.2/§8.3):
// engine::functions::info throws EngineError("INVALID_ARGUMENTS" | "NOT_FOUND",
// message) from its handler. Transports send it as {"code","message"} (WS:
// the invocationresult `error`; HTTP: status 400 / 404 with that body).
// Invoke() below catches it for them.
class EngineError : public std::runtime_error {
 public:
  EngineError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }
  nlohmann::json ToJson() const { return {{"code", code_}, {"message", what()}}; }

 private:
  std::string code_;
};

// One call as a transport sees it. Exactly one of the three is set:
// `result`; `error` (an S-code error, send ErrorToWire); `engine_error`
// ({"code","message"}: "function_not_found", "INVALID_ARGUMENTS", "NOT_FOUND").
struct Invocation {
  std::optional<nlohmann::json> result;
  std::optional<Error> error;
  std::optional<nlohmann::json> engine_error;
  int http_status() const;  // 200, the S-code's status, or 404/400 for engine errors
};
// Looks the id up, reads a null/absent payload as {}, runs the handler and
// catches EngineError. An unknown id gives engine_error function_not_found
// "function '<id>' is not provided by skiff".
Invocation Invoke(std::string_view id, const nlohmann::json& payload, CallContext& ctx);

const std::vector<FunctionDef>& Functions();
const FunctionDef* FindFunction(std::string_view id);

// The spec §5.1 wire object of an error (sorted keys), with docs_url built
// from `docs_base`.
nlohmann::json ErrorToWire(const Error& e, std::string_view docs_base);
// HTTP status for an S-code (spec §5.2 / §8.1).
int HttpStatus(Code c);
// The type string ("validation", ...), retryability and default fix_note.
std::string_view ErrorType(Code c);
bool Retryable(Code c);

}  // namespace skiff
