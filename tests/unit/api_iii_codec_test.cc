// The iii engine protocol's message codec, shared by the engine session on
// "/" and by worker mode.
#include <gtest/gtest.h>

#include "api/http_util.h"
#include "api/iii_codec.h"

namespace skiff::api::iii {
namespace {

using json = nlohmann::json;

json Parse(const std::string& s) { return json::parse(s); }

TEST(ApiIiiCodecTest, MessageType) {
  EXPECT_EQ(MessageType(Parse(R"({"type":"ping"})")), "ping");
  EXPECT_EQ(MessageType(Parse(R"({"type":7})")), "");
  EXPECT_EQ(MessageType(Parse(R"({})")), "");
  EXPECT_EQ(MessageType(Parse(R"([1])")), "");
}

TEST(ApiIiiCodecTest, StringFieldNeverThrowsOnAPeersFrame) {
  // workerregistered from a hostile engine: a non-string worker_id must not
  // throw out of the event loop (json::value(key, std::string()) would).
  json m = Parse(R"({"type":"workerregistered","worker_id":5,"reattach_token":{"a":1}})");
  EXPECT_EQ(StringField(m, "worker_id"), "");
  EXPECT_EQ(StringField(m, "reattach_token"), "");
  EXPECT_EQ(StringField(m, "absent"), "");
  EXPECT_EQ(StringField(Parse(R"({"worker_id":"w-1"})"), "worker_id"), "w-1");
  EXPECT_EQ(StringField(Parse("[1,2]"), "worker_id"), "");
  EXPECT_EQ(StringField(Parse("null"), "worker_id"), "");
}

TEST(ApiIiiCodecTest, TelemetryFramesAreBinaryWithAKnownPrefix) {
  EXPECT_TRUE(IsTelemetryFrame("OTLPxyz", true));
  EXPECT_TRUE(IsTelemetryFrame("MTRC", true));
  EXPECT_TRUE(IsTelemetryFrame("LOGS{}", true));
  EXPECT_FALSE(IsTelemetryFrame("OTLPxyz", false));
  EXPECT_FALSE(IsTelemetryFrame("OTL", true));
  EXPECT_FALSE(IsTelemetryFrame(R"({"type":"ping"})", true));
}

TEST(ApiIiiCodecTest, DecodeInvokeDefaults) {
  json m = Parse(R"({"type":"invokefunction","function_id":"sandbox::list"})");
  auto r = DecodeInvoke(m);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->function_id, "sandbox::list");
  EXPECT_TRUE(r->invocation_id.is_null());
  EXPECT_EQ(r->action, Action::kNone);
  EXPECT_FALSE(r->foreign_namespace);
  EXPECT_EQ(r->data, json::object());
  EXPECT_FALSE(r->wants_reply());  // null invocation_id
}

TEST(ApiIiiCodecTest, DecodeInvokeFields) {
  json m = Parse(R"({"type":"invokefunction","invocation_id":"i1","function_id":"f",
                     "data":{"a":[1,2]},"action":null,"namespace":"default"})");
  auto r = DecodeInvoke(m);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->invocation_id, json("i1"));
  EXPECT_EQ(r->data, Parse(R"({"a":[1,2]})"));
  EXPECT_EQ(r->action, Action::kNone);
  EXPECT_FALSE(r->foreign_namespace);
  EXPECT_TRUE(r->wants_reply());
}

TEST(ApiIiiCodecTest, DecodeInvokeActions) {
  json v = Parse(R"({"invocation_id":"i","function_id":"f","action":{"type":"void"}})");
  auto rv = DecodeInvoke(v);
  ASSERT_TRUE(rv);
  EXPECT_EQ(rv->action, Action::kVoid);
  EXPECT_FALSE(rv->wants_reply());  // void: never a reply, even with an id

  json e = Parse(R"({"invocation_id":"i","function_id":"f","action":{"type":"enqueue","queue":"q"}})");
  auto re = DecodeInvoke(e);
  ASSERT_TRUE(re);
  EXPECT_EQ(re->action, Action::kEnqueue);
  EXPECT_TRUE(re->wants_reply());

  json o = Parse(R"({"invocation_id":"i","function_id":"f","action":{"type":"other"}})");
  EXPECT_EQ(DecodeInvoke(o)->action, Action::kNone);
  json s = Parse(R"({"invocation_id":"i","function_id":"f","action":"void"})");
  EXPECT_EQ(DecodeInvoke(s)->action, Action::kNone);  // not an object
}

TEST(ApiIiiCodecTest, DecodeInvokeNamespace) {
  json a = Parse(R"({"function_id":"f","namespace":null})");
  EXPECT_FALSE(DecodeInvoke(a)->foreign_namespace);
  json b = Parse(R"({"function_id":"f","namespace":"other"})");
  EXPECT_TRUE(DecodeInvoke(b)->foreign_namespace);
  json c = Parse(R"({"function_id":"f","namespace":3})");
  EXPECT_TRUE(DecodeInvoke(c)->foreign_namespace);
}

TEST(ApiIiiCodecTest, DecodeInvokeNeedsAStringFunctionId) {
  json a = Parse(R"({"type":"invokefunction"})");
  EXPECT_FALSE(DecodeInvoke(a));
  json b = Parse(R"({"function_id":5})");
  EXPECT_FALSE(DecodeInvoke(b));
}

TEST(ApiIiiCodecTest, EncodeResultAndError) {
  EXPECT_EQ(EncodeResult("i", "f", json{{"x", 1}}),
            R"({"function_id":"f","invocation_id":"i","result":{"x":1},"type":"invocationresult"})");
  EXPECT_EQ(EncodeResult(7, "f", nullptr),
            R"({"function_id":"f","invocation_id":7,"result":null,"type":"invocationresult"})");
  EXPECT_EQ(EncodeError("i", "f", EnqueueRefused()),
            R"({"error":{"code":"enqueue_error","message":"queues are not supported by skiff"},)"
            R"("function_id":"f","invocation_id":"i","type":"invocationresult"})");
  EXPECT_EQ(Dump(FunctionNotFound("x::y")),
            R"({"code":"function_not_found","message":"function 'x::y' is not provided by skiff"})");
}

TEST(ApiIiiCodecTest, EncodeInvocation) {
  auto body = [](const Error& e) { return json{{"code", "S001"}, {"m", e.message()}}; };
  Invocation ok;
  ok.result = json{{"a", 1}};
  EXPECT_EQ(Parse(EncodeInvocation("i", "f", ok, body))["result"], json({{"a", 1}}));

  Invocation failed;
  failed.error = InvalidRequest("bad");
  json f = Parse(EncodeInvocation("i", "f", failed, body));
  EXPECT_EQ(f["error"]["code"], "invocation_failed");
  EXPECT_EQ(f["error"]["message"],
            "handler error: " + Dump(json{{"code", "S001"}, {"m", InvalidRequest("bad").message()}}));
  EXPECT_FALSE(f.contains("result"));

  Invocation engine;
  engine.engine_error = EngineFault::NotFound("m");
  EXPECT_EQ(Parse(EncodeInvocation("i", "f", engine, body))["error"],
            json({{"code", "NOT_FOUND"}, {"message", "m"}}));

  Invocation empty;
  json e = Parse(EncodeInvocation("i", "f", empty, body));
  EXPECT_TRUE(e.contains("result"));
  EXPECT_TRUE(e["result"].is_null());
}

TEST(ApiIiiCodecTest, ServerMessages) {
  EXPECT_EQ(Pong(), R"({"type":"pong"})");
  EXPECT_EQ(WorkerRegistered("w", "t"),
            R"({"reattach_token":"t","type":"workerregistered","worker_id":"w"})");
  EXPECT_EQ(TriggerRegistrationResult(Parse(R"({"id":"a","trigger_type":"http","x":1})")),
            R"({"function_id":null,"id":"a","trigger_type":"http","type":"triggerregistrationresult"})");
}

TEST(ApiIiiCodecTest, WorkerMessages) {
  json r = Parse(RegisterWorker("1.2.3", "Linux x86_64", 42));
  EXPECT_EQ(r["type"], "invokefunction");
  EXPECT_TRUE(r["invocation_id"].is_null());
  EXPECT_EQ(r["function_id"], "engine::workers::register");
  EXPECT_EQ(r["action"], json({{"type", "void"}}));
  EXPECT_EQ(r["data"], json({{"runtime", "cpp"},
                             {"version", "1.2.3"},
                             {"name", "iii-sandbox"},
                             {"description", "skiff: sandboxes for untrusted code"},
                             {"os", "Linux x86_64"},
                             {"pid", 42}}));
  FunctionDef f;
  f.id = "sandbox::exec";
  f.description = "d";
  f.request_schema = json{{"type", "object"}};
  f.response_schema = json{{"type", "string"}};
  EXPECT_EQ(RegisterFunction(f),
            R"({"description":"d","id":"sandbox::exec","request_format":{"type":"object"},)"
            R"("response_format":{"type":"string"},"type":"registerfunction"})");
  EXPECT_EQ(Reattach("old", "tok"),
            R"({"previous_worker_id":"old","reattach_token":"tok","type":"reattach"})");
}

// The engine's answer to a connection its auth function did not admit
// (engine/src/engine/mod.rs handle_worker): named, quoted, bounded.
TEST(ApiIiiCodecTest, ConnectionErrorsAreDescribed) {
  std::string auth = DescribeConnectionError(
      Parse(R"({"type":"error","error":{"code":"AUTH_ERROR","message":"bad token"}})"));
  EXPECT_NE(auth.find("AUTH_ERROR: \"bad token\""), std::string::npos) << auth;
  EXPECT_NE(auth.find("engine_token_file"), std::string::npos) << auth;
  std::string other =
      DescribeConnectionError(Parse(R"({"type":"error","error":{"code":"X","message":"m\n"}})"));
  EXPECT_EQ(other, R"(error "X": "m\n")");
  std::string huge = DescribeConnectionError(
      json{{"type", "error"}, {"error", {{"code", "AUTH_ERROR"}, {"message", std::string(5000, 'a')}}}});
  EXPECT_LT(huge.size(), 500u);
  EXPECT_EQ(DescribeConnectionError(Parse(R"({"type":"error","error":7})")), R"(error "": "")");
}

}  // namespace
}  // namespace skiff::api::iii
