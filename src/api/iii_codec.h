// The iii engine WebSocket protocol's messages (docs/architecture.md#transports-and-their-limits): decoding
// what a peer sends and encoding what skiff answers. Shared by the engine
// session skiffd serves on "/" and by worker mode, which speaks the same
// messages over a connection it opens itself. No I/O here.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "functions/function_def.h"
#include "functions/invocation.h"

namespace skiff::api::iii {

// `action.type` of an invokefunction.
enum class Action { kNone, kVoid, kEnqueue };

// A decoded invokefunction.
// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct InvokeRequest {
  std::string function_id;
  nlohmann::json invocation_id;  // null when absent
  Action action = Action::kNone;
  // `namespace` is present, not null and not "default".
  bool foreign_namespace = false;
  nlohmann::json data;  // absent `data` = {}

  // A result goes back only for a non-null invocation_id and a non-void action.
  bool wants_reply() const { return !invocation_id.is_null() && action != Action::kVoid; }
};

// The string member `key` of a message; "" when `m` is not an object or the
// member is absent or not a string (a peer's frame never makes it throw).
std::string StringField(const nlohmann::json& m, const char* key);
// The `type` of a message: StringField(m, "type").
std::string MessageType(const nlohmann::json& m);

// Binary frames that carry telemetry (OTLP, MTRC, LOGS prefixes), discarded.
bool IsTelemetryFrame(std::string_view frame, bool binary);

// Decodes an invokefunction, moving `data` out of `m`. nullopt when
// `function_id` is absent or not a string.
std::optional<InvokeRequest> DecodeInvoke(nlohmann::json& m);

// invocationresult carrying `result` / `error`.
std::string EncodeResult(const nlohmann::json& invocation_id, const std::string& function_id,
                         nlohmann::json result);
std::string EncodeError(const nlohmann::json& invocation_id, const std::string& function_id,
                        nlohmann::json error);
// invocationresult of a finished call. An S-code error becomes
// InvocationFailed (functions/engine_errors.h) of the docs/errors.md object built by
// `error_body`; an engine fault is sent as EngineFault::ToJson().
std::string EncodeInvocation(const nlohmann::json& invocation_id, const std::string& function_id,
                             Invocation inv, const std::function<nlohmann::json(const Error&)>& error_body);

// `error` bodies of docs/architecture.md#transports-and-their-limits.
nlohmann::json EnqueueRefused();
nlohmann::json FunctionNotFound(const std::string& function_id);  // EngineFault::FunctionNotFound

std::string Pong();
std::string WorkerRegistered(const std::string& worker_id, const std::string& reattach_token);
// Answer to a registertrigger (accepted; the trigger never fires).
std::string TriggerRegistrationResult(const nlohmann::json& registertrigger);

// How a call a worker made through the engine ended (WorkerLink::Call).
// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct CallOutcome {
  enum class Kind {
    kResult,    // `body` is the callee's result
    kError,     // `body` is the invocationresult's error ({"code","message"}), verbatim
    kLinkLost,  // the engine link dropped (or was down) before an answer
    kTimeout,   // no answer within the deadline
  };
  Kind kind = Kind::kLinkLost;
  nlohmann::json body;
};

// Worker mode, skiffd -> engine.
// `ns`: the namespace to register in ("" = the engine's default).
std::string RegisterWorker(const std::string& version, const std::string& os, long pid,
                           const std::string& ns = "");
// A person's account of a registrationrejected `m` for a worker in `ns`
// ("" = default): what conflicts with what, and what to change.
std::string DescribeRejection(const nlohmann::json& m, const std::string& ns);
// A person's account of the engine's `{"type":"error","error":{code,message}}`
// sent before it closes a connection it did not admit (its auth function
// refused or failed); the engine's text quoted and cut to 300 bytes.
std::string DescribeConnectionError(const nlohmann::json& m);
std::string RegisterFunction(const FunctionDef& f);
// A call this worker makes through the engine: invokefunction with an
// invocation id, routed to namespace `ns` ("" = default, field left out).
std::string Invoke(const std::string& invocation_id, const std::string& function_id, const std::string& ns,
                   nlohmann::json data);
std::string Reattach(const std::string& previous_worker_id, const std::string& reattach_token);

}  // namespace skiff::api::iii
