// What a function of the registry is (FunctionDef) and what its handler runs
// with (CallContext, and the ChannelBroker the transports implement): the
// types the transports share with the handlers, without the handlers
// themselves (functions/registry.h).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "functions/engine_errors.h"
#include "sandbox/service.h"

namespace skiff {

// Data channels (docs/api.md#enginechannelscreate) are a transport facility; handlers reach them
// through this interface, implemented by the API layer (or by a test double).
class ChannelBroker {
 public:
  virtual ~ChannelBroker() = default;
  // fs::read, a followed process output: a channel whose reader gets the bytes `producer` writes to the
  // sink it is given (called when a reader attaches; lazily for big files).
  // Returns the reader reference {"channel_id","access_key","direction":"read"}.
  // An empty write to the sink sends nothing and answers whether the reader
  // is still there (a producer with nothing to send asks it now and then).
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
  // Set by an engine::* handler that fails with an engine fault rather than
  // an S-code (engine::functions::info); Invoke() sends it instead of the
  // Error the handler returned.
  std::optional<EngineFault> engine_fault;

  // Records `f` and returns the S001 Error a caller reading only the
  // handler's Result sees: `return ctx.Fail(EngineFault::NotFound(...));`.
  Error Fail(EngineFault f) {
    Error e = InvalidRequest(f.message());
    engine_fault = std::move(f);
    return e;
  }
};

// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct FunctionDef {
  std::string id;           // "sandbox::exec"
  std::string description;  // one line
  nlohmann::json request_schema;
  nlohmann::json response_schema;
  bool internal = false;    // engine::* (listed only with include_internal)
  std::string worker_name;  // "iii-sandbox" | "iii-engine-functions"
  // Runs the function: validates `payload` (docs/api.md#conventions, docs/api.md#conventions check order) and
  // returns the result object or an Error with its S-code.
  std::function<Result<nlohmann::json>(const nlohmann::json& payload, CallContext& ctx)> handler;
  // The S-codes the function can return (docs/api.md lists them).
  std::vector<Code> errors;
};

}  // namespace skiff
