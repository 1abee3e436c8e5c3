// Pure helpers of the HTTP/WebSocket transports and the data channel queue.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "api/channels.h"
#include "api/http_util.h"

namespace skiff::api {
namespace {

using ::testing::HasSubstr;

TEST(ApiHttpTest, PercentDecode) {
  EXPECT_EQ(*PercentDecode("sandbox%3A%3Aexec"), "sandbox::exec");
  EXPECT_EQ(*PercentDecode("a+b"), "a+b");
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_FALSE(PercentDecode("%"));
  EXPECT_FALSE(PercentDecode("%4"));
  EXPECT_FALSE(PercentDecode("%zz"));
  EXPECT_EQ(*PercentDecode("%00"), std::string(1, '\0'));
  EXPECT_EQ(*PercentDecode(PercentEncode("a b/c?d=é")), "a b/c?d=é");
}

TEST(ApiHttpTest, ParseQueryFirstWins) {
  auto q = ParseQuery("path=%2Ftmp%2Fa%20b&mode=0644&path=/evil&flag");
  ASSERT_TRUE(q);
  EXPECT_EQ((*q)["path"], "/tmp/a b");
  EXPECT_EQ((*q)["mode"], "0644");
  EXPECT_EQ((*q)["flag"], "");
  EXPECT_FALSE(ParseQuery("a=%G1"));
}

TEST(ApiHttpTest, Routes) {
  auto m = [](std::string_view target) {
    auto t = SplitTarget(target);
    EXPECT_TRUE(t) << target;
    return MatchRoute(t ? t->path : "");
  };
  EXPECT_EQ(m("/v1/functions/sandbox::exec").route, Route::kFunctionCall);
  EXPECT_EQ(m("/v1/functions/sandbox::exec").param, "sandbox::exec");
  EXPECT_EQ(m("/v1/functions/sandbox%3A%3Aexec").param, "sandbox::exec");
  EXPECT_EQ(m("/v1/functions").route, Route::kFunctionList);
  EXPECT_EQ(m("/v1/functions?prefix=sandbox").route, Route::kFunctionList);
  EXPECT_EQ(m("/v1/sandboxes/abc/files?path=/x").route, Route::kFiles);
  EXPECT_EQ(m("/v1/sandboxes/abc/files?path=/x").param, "abc");
  EXPECT_EQ(m("/ws/channels/c1?key=k&dir=read").route, Route::kChannel);
  EXPECT_EQ(m("/").route, Route::kEngine);
  EXPECT_EQ(m("/otel").route, Route::kOtel);
  EXPECT_EQ(m("/healthz").route, Route::kHealthz);
  EXPECT_EQ(m("/metrics").route, Route::kMetrics);
  EXPECT_EQ(m("/nope").route, Route::kNotFound);
  EXPECT_EQ(m("/v1/sandboxes/abc/other").route, Route::kNotFound);
  // An encoded slash stays inside its segment and cannot form a new route.
  EXPECT_EQ(m("/v1/sandboxes/x%2Ffiles").route, Route::kNotFound);
  EXPECT_EQ(m("/ws/channels/a%2Fb").param, "a%2Fb");
  EXPECT_FALSE(SplitTarget("nope"));
  EXPECT_FALSE(SplitTarget("/%zz"));
}

TEST(ApiHttpTest, JsonDepthIgnoresBracketsInStrings) {
  EXPECT_EQ(JsonDepth(R"({"a":[1,{"b":"[[[[["}]})", 100), 3u);
  EXPECT_EQ(JsonDepth(R"(["\"[[["])", 100), 1u);
  std::string bomb(10 << 20, '[');
  EXPECT_EQ(JsonDepth(bomb, kMaxJsonDepth), kMaxJsonDepth + 1);
}

TEST(ApiHttpTest, ParsePayload) {
  EXPECT_EQ(*ParsePayload(""), nlohmann::json::object());
  EXPECT_EQ(*ParsePayload("  \n"), nlohmann::json::object());
  EXPECT_EQ((*ParsePayload(R"({"a":1})"))["a"], 1);
  EXPECT_TRUE(ParsePayload("[1,2]")->is_array());  // shape is the handler's business
  auto bad = ParsePayload("{nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kS001);
  EXPECT_THAT(bad.error().message(), HasSubstr("invalid request: payload is not valid JSON: "));
  EXPECT_THAT(bad.error().message(), ::testing::Not(HasSubstr("[json.exception")));
  auto bomb = ParsePayload(std::string(10 << 20, '['));
  ASSERT_FALSE(bomb.ok());
  EXPECT_THAT(bomb.error().message(), HasSubstr("nesting deeper than"));
}

TEST(ApiHttpTest, DumpedSizeIsTheSizeOfDump) {
  nlohmann::json j = {{"matches", nlohmann::json::array()}, {"truncated", true}, {"n", -12.5}};
  for (int i = 0; i < 100; ++i) {
    j["matches"].push_back({{"path", "/f"}, {"line", i}, {"content", std::string("caf\xc3\xa9 \xff\"\n")}});
  }
  EXPECT_EQ(DumpedSize(j), Dump(j).size());
  EXPECT_EQ(DumpedSize(nullptr), 4u);
}

TEST(ApiHttpTest, DumpNeverThrowsOnInvalidUtf8) {
  nlohmann::json j = {{"s", std::string("a\xff"
                                        "b")}};
  EXPECT_EQ(Dump(j),
            "{\"s\":\"a\xEF\xBF\xBD"
            "b\"}");
}

TEST(ApiHttpTest, TokensAndModes) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_EQ(*BearerToken("Bearer s3cret"), "s3cret");
  EXPECT_EQ(*BearerToken("bearer s3cret"), "s3cret");
  EXPECT_FALSE(BearerToken("Basic s3cret"));
  EXPECT_FALSE(BearerToken("Bearer "));
  EXPECT_EQ(*ParseModeString("0755"), 0755u);
  EXPECT_EQ(*ParseModeString("4755"), 04755u);
  EXPECT_EQ(*ParseModeString("0"), 0u);
  EXPECT_EQ(*ParseModeString("000644"), 0644u);
  for (const char* bad : {"", "0o755", "rwx", "9", "17777", "-1"}) {
    EXPECT_FALSE(ParseModeString(bad)) << bad;
  }
}

TEST(ChannelTest, OrderedBoundedNeverDrops) {
  Channel ch(4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ch.TryPush(Frame{true, std::to_string(i)}), Channel::Push::kOk);
  }
  EXPECT_EQ(ch.TryPush(Frame{true, "x"}), Channel::Push::kFull);
  bool woke = false;
  ch.OnWritable([&] { woke = true; });
  Frame f;
  ASSERT_EQ(ch.TryPop(&f), Channel::Pop::kFrame);
  EXPECT_EQ(f.data, "0");
  EXPECT_TRUE(woke);
  // A blocking writer waits for space, then everything arrives in order.
  std::thread writer([&] {
    for (int i = 4; i < 100; ++i) ASSERT_TRUE(ch.PushBlocking(Frame{true, std::to_string(i)}).ok());
    ch.CloseWrite();
  });
  for (int i = 1; i < 100; ++i) {
    auto r = ch.PopBlocking(std::chrono::seconds(5));
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->has_value());
    EXPECT_EQ((*r)->data, std::to_string(i));
  }
  auto end = ch.PopBlocking(std::chrono::seconds(5));
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  writer.join();
}

TEST(ChannelTest, StallAndAbortAreS218) {
  Channel ch(2);
  auto r = ch.PopBlocking(std::chrono::milliseconds(50));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS218);
  ch.Abort("gone");
  auto a = ch.PopBlocking(std::chrono::milliseconds(50));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code(), Code::kS218);
  EXPECT_THAT(a.error().message(), HasSubstr("gone"));
}

TEST(ChannelTest, ReaderGoneReleasesBlockedWriter) {
  Channel ch(1);
  ASSERT_TRUE(ch.PushBlocking(Frame{true, "a"}).ok());
  std::thread t([&] { EXPECT_FALSE(ch.PushBlocking(Frame{true, "b"}).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.ReaderGone();
  t.join();
}

TEST(HttpUtilTest, ParseDecimalTakesDigitsUpToItsMaximumAndNothingElse) {
  EXPECT_EQ(ParseDecimal("0", 10), 0);
  EXPECT_EQ(ParseDecimal("17", INT32_MAX), 17);
  EXPECT_EQ(ParseDecimal("2147483647", INT32_MAX), INT32_MAX);
  EXPECT_EQ(ParseDecimal("9223372036854775807", INT64_MAX), INT64_MAX);
  for (const char* bad : {"", "-1", "+1", "1.5", "1e3", " 1", "0x10", "2147483648"})
    EXPECT_FALSE(ParseDecimal(bad, INT32_MAX)) << bad;
  // Overflow is refused, never wrapped.
  for (const char* big : {"9223372036854775808", "9999999999999999999", "99999999999999999999999"})
    EXPECT_FALSE(ParseDecimal(big, INT64_MAX)) << big;
}

TEST(BrokerTest, AttachRules) {
  Broker broker([](std::function<void()> f) { std::thread(std::move(f)).detach(); });
  auto pair = broker.CreateChannelPair(5000);
  ASSERT_TRUE(pair.ok());
  std::string id = (*pair)["reader"]["channel_id"];
  std::string key = (*pair)["reader"]["access_key"];
  EXPECT_EQ((*pair)["writer"]["access_key"], key);
  EXPECT_EQ((*pair)["writer"]["direction"], "write");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(broker.Attach(id, "wrong", "read").http_status, 404);
  EXPECT_EQ(broker.Attach("nope", key, "read").http_status, 404);
  EXPECT_EQ(broker.Attach(id, key, "sideways").http_status, 400);
  auto w = broker.Attach(id, key, "write");
  ASSERT_EQ(w.http_status, 200);
  EXPECT_EQ(w.channel->capacity(), 1024u);  // clamped
  EXPECT_EQ(broker.Attach(id, key, "write").http_status, 409);
  // fs::write's in-process reader.
  auto src = broker.AttachReader((*pair)["reader"]);
  ASSERT_TRUE(src.ok());
  EXPECT_FALSE(broker.AttachReader((*pair)["reader"]).ok());  // taken
  w.channel->TryPush(Frame{true, "hello"});
  w.channel->TryPush(Frame{false, "a message, not file bytes"});
  w.channel->TryPush(Frame{true, " world"});
  w.channel->CloseWrite();
  std::string got;
  while (true) {
    auto chunk = (*src)();
    ASSERT_TRUE(chunk.ok());
    if (chunk->empty()) break;
    got += *chunk;
  }
  EXPECT_EQ(got, "hello world");
}

TEST(BrokerTest, ReadChannelRunsProducerOnAttachAndReportsErrors) {
  Broker broker([](std::function<void()> f) { std::thread(std::move(f)).detach(); });
  std::atomic<bool> started{false};
  auto ref = broker.CreateReadChannel([&](const ByteSink& sink) -> Status {
    started = true;
    std::string big(200 * 1024, 'x');
    if (!sink(big)) return Error(Code::kS216, "fs i/o error: aborted");
    return Error(Code::kS216, "fs i/o error: disk on fire");
  });
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ((*ref)["direction"], "read");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(started);  // lazy: nothing happens until a reader attaches
  EXPECT_EQ(broker.Attach((*ref)["channel_id"], (*ref)["access_key"], "write").http_status, 409);
  auto r = broker.Attach((*ref)["channel_id"], (*ref)["access_key"], "read");
  ASSERT_EQ(r.http_status, 200);
  size_t bytes = 0;
  std::string last_text;
  while (true) {
    auto f = r.channel->PopBlocking(std::chrono::seconds(5));
    ASSERT_TRUE(f.ok());
    if (!f->has_value()) break;
    if ((*f)->binary) {
      EXPECT_LE((*f)->data.size(), kChannelChunk);
      bytes += (*f)->data.size();
    } else {
      last_text = (*f)->data;
    }
  }
  EXPECT_EQ(bytes, 200u * 1024);
  auto err = nlohmann::json::parse(last_text);
  EXPECT_EQ(err["code"], "S216");
  EXPECT_THAT(err["error"].get<std::string>(), HasSubstr("disk on fire"));
}

TEST(BrokerTest, ScopedBrokerDeletesItsChannels) {
  Broker broker([](std::function<void()> f) { std::thread(std::move(f)).detach(); });
  std::string id, key;
  {
    ScopedBroker scoped(broker);
    auto pair = scoped.CreateChannelPair(8);
    ASSERT_TRUE(pair.ok());
    id = (*pair)["reader"]["channel_id"];
    key = (*pair)["reader"]["access_key"];
    EXPECT_EQ(broker.size(), 1u);
  }
  EXPECT_EQ(broker.size(), 0u);
  EXPECT_EQ(broker.Attach(id, key, "read").http_status, 404);
}

}  // namespace
}  // namespace skiff::api
