// Live processes end to end, on both backends (value-parameterised: "jail",
// "microvm"): a real `skiff serve` per backend driven over HTTP through the
// sandbox::process::* functions and the NDJSON output stream
// (GET /v1/sandboxes/{id}/processes/{pid}/output). One daemon and one shared
// sandbox per backend; the tests that stop a sandbox create their own.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"

namespace skiff::e2e {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string B64Decode(const std::string& in) {
  static const auto rev = [] {
    std::array<int8_t, 256> r{};
    r.fill(-1);
    const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) r[static_cast<unsigned char>(t[i])] = static_cast<int8_t>(i);
    return r;
  }();
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    int8_t v = rev[static_cast<unsigned char>(c)];
    if (v < 0) continue;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

// The NDJSON stream of one output request, read as it arrives.
struct OutputStream {
  long status = 0;
  std::string raw;                    // bytes not yet split into lines
  std::vector<json> lines;            // every parsed line
  std::vector<Clock::time_point> at;  // when each line arrived
  std::string out, err;               // concatenated data per channel
  int64_t next_out = -1, next_err = -1;
  size_t stop_after_bytes = 0;  // > 0: abort the transfer after this much stdout (a detach)
  std::string bad;              // a protocol problem seen in the stream

  void Feed(const char* p, size_t n) {
    raw.append(p, n);
    size_t nl;
    while ((nl = raw.find('\n')) != std::string::npos) {
      json j = json::parse(raw.substr(0, nl), nullptr, false);
      raw.erase(0, nl + 1);
      if (j.is_discarded()) {
        bad = "unparsable line";
        continue;
      }
      lines.push_back(j);
      at.push_back(Clock::now());
      std::string type = j.value("type", "");
      if (type == "start") {
        next_out = j["stdout_from"];
        next_err = j["stderr_from"];
      } else if (type == "data") {
        bool is_out = j["channel"] == "stdout";
        int64_t& next = is_out ? next_out : next_err;
        if (j["offset"].get<int64_t>() != next) bad = "data not at the expected offset";
        std::string bytes = B64Decode(j["data"]);
        (is_out ? out : err) += bytes;
        next += static_cast<int64_t>(bytes.size());
      } else if (type == "gap") {
        int64_t& next = j["channel"] == "stdout" ? next_out : next_err;
        if (j["from"].get<int64_t>() != next) bad = "gap not at the expected offset";
        next = j["to"];
      }
    }
  }
  bool Ended() const { return !lines.empty() && lines.back().value("type", "") == "end"; }
  bool Failed() const { return !lines.empty() && lines.back().value("type", "") == "error"; }
};

size_t StreamWrite(char* p, size_t s, size_t n, void* ud) {
  auto* o = static_cast<OutputStream*>(ud);
  o->Feed(p, s * n);
  if (o->stop_after_bytes > 0 && o->out.size() >= o->stop_after_bytes) return 0;  // detach
  return s * n;
}

// GET `path`, or POST `body` (JSON) to it, the NDJSON answer read into an
// OutputStream.
OutputStream Fetch(uint16_t port, const std::string& path, const std::string* body, size_t stop_after,
                   long timeout_s) {
  OutputStream o;
  o.stop_after_bytes = stop_after;
  CURL* c = curl_easy_init();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_slist* h = nullptr;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  if (body != nullptr) {
    h = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->c_str());
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, StreamWrite);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &o);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &o.status);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
  return o;
}

OutputStream ReadOutput(uint16_t port, const std::string& sid, int64_t pid, const std::string& query,
                        size_t stop_after = 0, long timeout_s = 300) {
  return Fetch(port,
               "/v1/sandboxes/" + sid + "/processes/" + std::to_string(pid) + "/output" +
                   (query.empty() ? "" : "?" + query),
               nullptr, stop_after, timeout_s);
}

// POST /v1/run with `body` (a run's lines are a process stream's, with its
// own start and end).
OutputStream PostRun(uint16_t port, const json& body, long timeout_s = 300) {
  std::string data = body.dump();
  return Fetch(port, "/v1/run", &data, 0, timeout_s);
}

struct Backend {
  std::unique_ptr<Daemon> daemon;
  std::string sid;
  std::string setup_error;
};

std::map<std::string, Backend*>& Backends() {
  static std::map<std::string, Backend*> m;
  return m;
}

std::string ConfigFor(const std::string& isolation) {
  return "image_allowlist: [base]\nisolation: " + isolation +
         "\ndefault_idle_timeout_secs: 1800\nmax_concurrent_exec_per_sandbox: 4\n";
}

class ProcessSuite : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  static void TearDownTestSuite() {
    for (auto& [name, b] : Backends()) {
      if (b->daemon && !b->sid.empty())
        b->daemon->Call("sandbox::stop", {{"sandbox_id", b->sid}, {"wait", true}});
      if (b->daemon) {
        EXPECT_EQ(b->daemon->Terminate(), 0) << b->daemon->Log();
      }
      delete b;
    }
    Backends().clear();
  }
  void SetUp() override {
    auto& slot = Backends()[GetParam()];
    if (slot == nullptr) {
      slot = new Backend;
      slot->daemon = std::make_unique<Daemon>(ConfigFor(GetParam()));
      if (!slot->daemon->ready()) {
        slot->setup_error = "daemon did not start:\n" + slot->daemon->Log();
      } else {
        auto r = slot->daemon->Call("sandbox::create", {{"image", "base"}, {"isolation", GetParam()}});
        if (r.status != 200)
          slot->setup_error = "create failed: " + r.body;
        else
          slot->sid = r.Json()["sandbox_id"];
      }
    }
    b_ = slot;
    ASSERT_EQ(b_->setup_error, "");
  }

  Daemon& d() { return *b_->daemon; }
  const std::string& sid() { return b_->sid; }
  json P(json fields, const std::string& id = "") {
    fields["sandbox_id"] = id.empty() ? sid() : id;
    return fields;
  }
  json Schema(const std::string& fn) {
    if (!schemas_.count(fn)) schemas_[fn] = d().Get("/v1/functions/" + fn).Json()["response_schema"];
    return schemas_[fn];
  }
  json Ok(const std::string& fn, const json& payload) {
    auto r = d().Call(fn, payload);
    EXPECT_EQ(r.status, 200) << fn << " " << payload.dump() << " -> " << r.body;
    json body = r.Json();
    json s = Schema(fn);
    EXPECT_EQ(Validate(body, s, s), "") << fn << ": " << r.body.substr(0, 400);
    return body;
  }
  json Err(const std::string& fn, const json& payload, const std::string& code, long status) {
    auto r = d().Call(fn, payload);
    EXPECT_EQ(r.status, status) << fn << " " << payload.dump() << " -> " << r.body;
    json body = r.Json();
    EXPECT_EQ(ValidateErrorObject(body), "") << r.body;
    EXPECT_EQ(body.value("code", ""), code) << fn << " " << payload.dump() << " -> " << r.body;
    return body;
  }
  int64_t Start(json fields, const std::string& id = "") {
    json r = Ok("sandbox::process::start", P(std::move(fields), id));
    return r.value("pid", int64_t{0});
  }
  json Wait(int64_t pid, int64_t timeout_ms = 60000, const std::string& id = "") {
    return Ok("sandbox::process::wait", P({{"pid", pid}, {"timeout_ms", timeout_ms}}, id));
  }
  // The whole stdout of a process, read inline from offset 0.
  std::string Stdout(int64_t pid) {
    json r = Ok("sandbox::process::output", P({{"pid", pid}, {"max_bytes", 8 << 20}}));
    return B64Decode(r["stdout"].value("data", ""));
  }
  // Waits until `pred` holds for the process's inline stdout.
  std::string StdoutWhen(int64_t pid, const std::function<bool(const std::string&)>& pred,
                         std::chrono::seconds limit = 60s) {
    auto end = Clock::now() + limit;
    std::string s;
    while (Clock::now() < end) {
      s = Stdout(pid);
      if (pred(s)) return s;
      std::this_thread::sleep_for(100ms);
    }
    return s;
  }

  Backend* b_ = nullptr;
  std::map<std::string, json> schemas_;
};

TEST_P(ProcessSuite, StartReturnsAtOnceAndTheProcessIsListedUntilForgotten) {
  auto t0 = Clock::now();
  int64_t pid = Start({{"argv", {"sh", "-c", "echo one; sleep 2; echo two >&2; exit 3"}}, {"tag", "t1"}});
  EXPECT_LT(Clock::now() - t0, 2s) << "start waited for the process";
  ASSERT_GT(pid, 0);
  json list = Ok("sandbox::process::list", P({}));
  bool found = false;
  for (const auto& p : list["processes"]) {
    if (p["pid"] != pid) continue;
    found = true;
    EXPECT_EQ(p["state"], "running");
    EXPECT_EQ(p["tag"], "t1");
  }
  EXPECT_TRUE(found) << list.dump();
  json running = Wait(pid, 0);
  EXPECT_EQ(running["state"], "running") << "wait with timeout 0 answers at once";
  json done = Wait(pid);
  EXPECT_EQ(done["state"], "exited");
  EXPECT_EQ(done["exit_code"], 3);
  json out = Ok("sandbox::process::output", P({{"pid", pid}}));
  EXPECT_EQ(B64Decode(out["stdout"]["data"]), "one\n");
  EXPECT_EQ(B64Decode(out["stderr"]["data"]), "two\n");
  EXPECT_EQ(out["stdout"]["next"], 4);
  // From an offset: only what follows.
  out = Ok("sandbox::process::output", P({{"pid", pid}, {"stdout_from", 2}}));
  EXPECT_EQ(B64Decode(out["stdout"]["data"]), "e\n");
  Ok("sandbox::process::forget", P({{"pid", pid}}));
  Err("sandbox::process::wait", P({{"pid", pid}}), "S220", 404);
}

TEST_P(ProcessSuite, StreamingIsRealTheFirstLineArrivesBeforeTheProcessEnds) {
  int64_t pid = Start({{"argv", {"sh", "-c", "echo first; sleep 3; echo second"}}});
  OutputStream o = ReadOutput(d().port(), sid(), pid, "follow=true");
  ASSERT_EQ(o.status, 200) << o.raw;
  EXPECT_EQ(o.bad, "");
  ASSERT_TRUE(o.Ended()) << (o.lines.empty() ? "" : o.lines.back().dump());
  EXPECT_EQ(o.out, "first\nsecond\n");
  // The line carrying "first" arrived well before the end line.
  Clock::time_point first{}, end = o.at.back();
  for (size_t i = 0; i < o.lines.size(); ++i)
    if (o.lines[i].value("type", "") == "data") {
      first = o.at[i];
      break;
    }
  EXPECT_GT(end - first, 2s) << "the first line was held back until the process ended";
  EXPECT_EQ(o.lines.back()["process"]["exit_code"], 0);
}

TEST_P(ProcessSuite, ReconnectFromTheLastOffsetLosesAndRepeatsNothing) {
  // 50 MiB of numbered lines ("%08.0f\n", 9 bytes each), written 1 MiB at a
  // time; the reader detaches twice and resumes from the offset it reached.
  constexpr int64_t kChunk = 116509, kLines = 50 * kChunk;  // 52,429,050 bytes
  std::string script = "c=0; while [ $c -lt 50 ]; do seq -f %08.0f $((c*" + std::to_string(kChunk) +
                       ")) $((c*" + std::to_string(kChunk) + "+" + std::to_string(kChunk - 1) +
                       ")); c=$((c+1)); sleep 0.02; done";
  int64_t pid = Start({{"argv", {"sh", "-c", script}}, {"buffer_bytes", 16 << 20}});
  std::string got;
  int64_t from = 0;
  int detaches = 0;
  for (int round = 0; round < 200; ++round) {
    size_t stop = detaches < 2 ? size_t{12} << 20 : 0;
    OutputStream o =
        ReadOutput(d().port(), sid(), pid, "follow=true&stdout_from=" + std::to_string(from), stop);
    ASSERT_EQ(o.bad, "");
    for (const auto& l : o.lines) ASSERT_NE(l.value("type", ""), "gap") << "the ring wrapped: " << l.dump();
    ASSERT_GE(o.lines.size(), 1u) << o.status << " " << o.raw;
    ASSERT_EQ(o.lines[0]["stdout_from"], from) << "the stream did not start where it was asked to";
    got += o.out;
    from = o.next_out;
    if (o.Ended()) break;
    ++detaches;
  }
  EXPECT_GE(detaches, 2);
  ASSERT_EQ(static_cast<int64_t>(got.size()), kLines * 9);
  char line[24];  // room for any long long: GCC cannot bound i under ASan
  for (int64_t i = 0; i < kLines; ++i) {
    std::snprintf(line, sizeof line, "%08lld\n", static_cast<long long>(i));
    if (got.compare(static_cast<size_t>(i * 9), 9, line) != 0) {
      ADD_FAILURE() << "line " << i << " differs: " << got.substr(static_cast<size_t>(i * 9), 9);
      break;
    }
  }
}

TEST_P(ProcessSuite, AWrappedRingStartsAtWhatItStillHolds) {
  int64_t pid = Start({{"argv", {"seq", "-f", "%08.0f", "0", "99999"}}, {"buffer_bytes", 4096}});
  json done = Wait(pid);
  EXPECT_EQ(done["stdout"]["end"], 900000);
  EXPECT_EQ(done["stdout"]["start"], 900000 - 4096);
  OutputStream o = ReadOutput(d().port(), sid(), pid, "");
  ASSERT_EQ(o.status, 200);
  ASSERT_FALSE(o.lines.empty());
  EXPECT_EQ(o.lines[0]["stdout_from"], 900000 - 4096) << "the start line tells where the bytes begin";
  EXPECT_EQ(o.out.size(), 4096u);
  EXPECT_EQ(o.out.substr(o.out.size() - 9), "00099999\n");
}

TEST_P(ProcessSuite, StdinIsWrittenAndClosed) {
  int64_t pid = Start({{"argv", {"cat"}}, {"stdin", true}});
  json r = Ok("sandbox::process::input", P({{"pid", pid}, {"data", "hello\n"}}));
  EXPECT_EQ(r["bytes_written"], 6);
  EXPECT_EQ(StdoutWhen(pid, [](const std::string& s) { return s == "hello\n"; }), "hello\n");
  Ok("sandbox::process::input", P({{"pid", pid}, {"data_base64", "AAE="}, {"close", true}}));
  json done = Wait(pid);
  EXPECT_EQ(done["state"], "exited");
  EXPECT_EQ(done["exit_code"], 0) << "cat saw end-of-file";
  EXPECT_EQ(Stdout(pid), std::string("hello\n\x00\x01", 8));
  Err("sandbox::process::input", P({{"pid", pid}, {"data", "late"}}), "S221", 409);
}

TEST_P(ProcessSuite, SignalsReachTheProcess) {
  int64_t pid = Start({{"argv", {"sleep", "100"}}});
  Ok("sandbox::process::signal", P({{"pid", pid}, {"signal", "TERM"}}));
  json done = Wait(pid);
  EXPECT_EQ(done["signal"], 15);
  EXPECT_EQ(done["exit_code"], 143);
  Err("sandbox::process::signal", P({{"pid", pid}, {"signal", "TERM"}}), "S221", 409);
  Err("sandbox::process::signal", P({{"pid", pid}, {"signal", "SEGV"}}), "S001", 400);
}

TEST_P(ProcessSuite, APseudoTerminalTellsItsSizeAndFollowsAResize) {
  int64_t pid = Start({{"argv", {"sh", "-c", "stty size; echo $TERM; read x; stty size"}},
                       {"pty", {{"rows", 24}, {"cols", 80}}}});
  StdoutWhen(pid, [](const std::string& s) { return s.find("xterm-256color") != std::string::npos; });
  Ok("sandbox::process::resize", P({{"pid", pid}, {"rows", 40}, {"cols", 132}}));
  Ok("sandbox::process::input", P({{"pid", pid}, {"data", "\n"}}));
  json done = Wait(pid);
  EXPECT_EQ(done["exit_code"], 0);
  std::string out = Stdout(pid);
  EXPECT_NE(out.find("24 80\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xterm-256color\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("40 132\r\n"), std::string::npos) << out;
  // A process without a terminal cannot be resized.
  int64_t plain = Start({{"argv", {"sleep", "30"}}});
  Err("sandbox::process::resize", P({{"pid", plain}, {"rows", 10}, {"cols", 10}}), "S221", 409);
  Ok("sandbox::process::signal", P({{"pid", plain}, {"signal", "KILL"}}));
}

TEST_P(ProcessSuite, CtrlCThroughTheTerminalInterruptsTheForegroundJob) {
  int64_t pid = Start({{"argv", {"sh", "-i"}}, {"pty", true}});
  Ok("sandbox::process::input", P({{"pid", pid}, {"data", "sleep 100\n"}}));
  std::this_thread::sleep_for(1s);
  Ok("sandbox::process::input", P({{"pid", pid}, {"data", "\x03"}}));
  Ok("sandbox::process::input", P({{"pid", pid}, {"data", "echo alive-$((40+2))\n"}}));
  std::string out = StdoutWhen(
      pid, [](const std::string& s) { return s.find("alive-42") != std::string::npos; }, 30s);
  EXPECT_NE(out.find("alive-42"), std::string::npos) << "the shell did not get its prompt back: " << out;
  json st = Wait(pid, 0);
  EXPECT_EQ(st["state"], "running") << "Ctrl-C reached the shell instead of only the job";
  Ok("sandbox::process::input", P({{"pid", pid}, {"data", "exit 7\n"}}));
  EXPECT_EQ(Wait(pid)["exit_code"], 7);
}

TEST_P(ProcessSuite, BadInputIsATypedErrorAndChangesNothing) {
  constexpr int64_t kNoSuchPid = 999999;
  Err("sandbox::process::output", P({{"pid", kNoSuchPid}}), "S220", 404);
  Err("sandbox::process::input", P({{"pid", kNoSuchPid}, {"data", "x"}}), "S220", 404);
  Err("sandbox::process::signal", P({{"pid", kNoSuchPid}, {"signal", "KILL"}}), "S220", 404);
  Err("sandbox::process::wait", P({{"pid", kNoSuchPid}}), "S220", 404);
  Err("sandbox::process::resize", P({{"pid", kNoSuchPid}, {"rows", 5}, {"cols", 5}}), "S220", 404);
  Err("sandbox::process::forget", P({{"pid", kNoSuchPid}}), "S220", 404);
  auto r = d().Get("/v1/sandboxes/" + sid() + "/processes/" + std::to_string(kNoSuchPid) + "/output");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.Json().value("code", ""), "S220");
  r = d().Get("/v1/sandboxes/" + sid() + "/processes/abc/output");
  EXPECT_EQ(r.status, 400) << r.body;
  r = d().Get("/v1/sandboxes/" + sid() + "/processes/1/output?follow=maybe");
  EXPECT_EQ(r.status, 400) << r.body;
  int64_t running = Start({{"argv", {"sleep", "30"}}});
  Err("sandbox::process::forget", P({{"pid", running}}), "S221", 409);
  Err("sandbox::process::input", P({{"pid", running}, {"data", "x"}}), "S221", 409);  // no stdin asked for
  Ok("sandbox::process::signal", P({{"pid", running}, {"signal", "KILL"}}));
  EXPECT_EQ(Wait(running)["signal"], 9);
}

TEST_P(ProcessSuite, TheProcessCapIsS400AndStopReapsEverything) {
  json c = Ok("sandbox::create", {{"image", "base"}, {"isolation", GetParam()}});
  std::string id = c["sandbox_id"];
  std::string marker = "1000." + std::to_string(::getpid());
  for (int i = 0; i < 256; ++i) {
    json r = d().Call("sandbox::process::start", P({{"argv", {"sleep", marker}}, {"buffer_bytes", 4096}}, id))
                 .Json();
    ASSERT_GT(r.value("pid", 0), 0) << i << ": " << r.dump();
  }
  Err("sandbox::process::start", P({{"argv", {"sleep", marker}}}, id), "S400", 429);
  json list = Ok("sandbox::process::list", P({}, id));
  EXPECT_EQ(list["processes"].size(), 256u) << "the refused start changed the table";
  // A follower of one of them sees a clear end when the sandbox stops.
  int64_t followed = list["processes"][0]["pid"];
  OutputStream o;
  std::thread follower([&] { o = ReadOutput(d().port(), id, followed, "follow=true", 0, 120); });
  std::this_thread::sleep_for(1s);
  Ok("sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
  follower.join();
  EXPECT_TRUE(o.Failed()) << "the stream did not end with an error line: " << o.raw
                          << (o.lines.empty() ? "" : o.lines.back().dump());
  if (o.Failed()) {
    EXPECT_EQ(o.lines.back()["code"], "S004");
  }
  // No process of the sandbox is left on the host.
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "cmdline");
    std::string cmd(std::istreambuf_iterator<char>(in), {});
    if (cmd.find(marker) != std::string::npos) found += e.path().filename().string() + " ";
  }
  EXPECT_EQ(found, "") << "processes left after stop";
}

TEST_P(ProcessSuite, AQuietBackgroundProcessDoesNotKeepItsSandboxAlive) {
  // docs/api.md, "Activity": a background process and a follower with
  // nothing to send are not activity; the reaper stops the sandbox at its
  // idle timeout and the follower sees a clear end.
  json c = Ok("sandbox::create", {{"image", "base"}, {"isolation", GetParam()}, {"idle_timeout_secs", 2}});
  std::string id = c["sandbox_id"];
  int64_t pid = Start({{"argv", {"sleep", "1000"}}}, id);
  OutputStream o;
  std::thread follower([&] { o = ReadOutput(d().port(), id, pid, "follow=true", 0, 120); });
  bool gone = false;
  auto end = Clock::now() + 60s;
  while (!gone && Clock::now() < end) {
    std::this_thread::sleep_for(500ms);
    gone = true;
    const json listed = Ok("sandbox::list", json::object());  // kept alive through the loop
    for (const auto& s : listed["sandboxes"]) gone = gone && s["sandbox_id"] != id;
  }
  follower.join();
  EXPECT_TRUE(gone) << "a sandbox with only a quiet background process was not reaped";
  EXPECT_TRUE(o.Failed()) << "the follower did not get a clear end: " << o.raw;
}

TEST_P(ProcessSuite, ANeverReadingClientDoesNotGrowTheDaemon) {
  auto rss_kb = [&] {
    std::ifstream in("/proc/" + std::to_string(d().pid()) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0L;
  };
  int64_t pid = Start({{"argv", {"head", "-c", "1G", "/dev/zero"}}});
  // A raw client that sends the request and never reads a byte.
  int fd = d().Connect();
  ASSERT_GE(fd, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::string req = "GET /v1/sandboxes/" + sid() + "/processes/" + std::to_string(pid) +
                    "/output?follow=true HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  long before = rss_kb(), peak = before;
  auto end = Clock::now() + 600s;
  while (Clock::now() < end) {
    peak = std::max(peak, rss_kb());
    json st = Wait(pid, 1000);
    if (st["state"] == "exited") break;
  }
  peak = std::max(peak, rss_kb());
  ::close(fd);
  EXPECT_EQ(Wait(pid, 0)["state"], "exited") << "the process was held back by the client";
  EXPECT_LT(peak - before, 64 * 1024)
      << "daemon RSS grew by " << (peak - before) << " KiB for a client that never reads";
  std::printf(
      "[ rss      ] %s: daemon RSS %ld KiB before, %ld KiB peak, under 1 GiB to a never-reading client\n",
      GetParam().c_str(), before, peak);
}

// POST /v1/run: the output as it is produced, then the result; the
// sandbox is gone after the run, however it ended.
TEST_P(ProcessSuite, TheRunStreamCarriesOutputAsItComesThenTheResult) {
  size_t before = Ok("sandbox::list", json::object())["sandboxes"].size();
  OutputStream o =
      PostRun(d().port(), {{"image", "base"},
                           {"isolation", GetParam()},
                           {"argv", {"sh", "-c", "echo first; sleep 2; echo second >&2; exit 5"}}});
  ASSERT_EQ(o.status, 200) << o.raw;
  EXPECT_EQ(o.bad, "");
  ASSERT_GE(o.lines.size(), 4u) << o.raw;
  EXPECT_EQ(o.lines.front()["type"], "start");
  std::string id = o.lines.front().value("sandbox_id", "");
  EXPECT_EQ(id.size(), 36u) << o.lines.front().dump();
  ASSERT_TRUE(o.Ended()) << o.lines.back().dump();
  EXPECT_EQ(o.out, "first\n");
  EXPECT_EQ(o.err, "second\n");
  EXPECT_EQ(o.lines.back()["result"]["exit_code"], 5);
  EXPECT_EQ(o.lines.back()["result"]["success"], false);
  EXPECT_GT(o.at.back() - o.at[1], 1500ms) << "the first line was held back until the run ended";
  // Code and its interpreter, as sandbox::run takes them.
  o = PostRun(d().port(),
              {{"image", "base"}, {"isolation", GetParam()}, {"lang", "sh"}, {"code", "echo \"$0\""}});
  ASSERT_TRUE(o.Ended()) << o.raw;
  EXPECT_EQ(o.out, "/tmp/run.sh\n");
  // Errors before the start line are ordinary responses; after it, a line.
  o = PostRun(d().port(), {{"image", "base"}, {"argv", json::array()}});
  EXPECT_EQ(o.status, 400) << o.raw;
  EXPECT_EQ(json::parse(o.raw, nullptr, false).value("code", ""), "S001") << o.raw;
  o = PostRun(d().port(), {{"image", "python"}, {"argv", {"true"}}});
  EXPECT_EQ(json::parse(o.raw, nullptr, false).value("code", ""), "S100") << o.raw;
  o = PostRun(d().port(), {{"image", "base"},
                           {"isolation", GetParam()},
                           {"timeout_ms", 1500},
                           {"argv", {"sh", "-c", "echo before; exec sleep 30"}}});
  ASSERT_EQ(o.status, 200) << o.raw;
  EXPECT_EQ(o.out, "before\n");
  ASSERT_TRUE(o.Failed()) << o.raw;
  EXPECT_EQ(o.lines.back()["code"], "S200");
  EXPECT_EQ(o.lines.back()["message"], "exec timed out after 1500 ms");
  EXPECT_FALSE(o.lines.back()["details"].contains("stdout")) << "the output was sent twice";
  // None of these runs left a sandbox.
  EXPECT_EQ(Ok("sandbox::list", json::object())["sandboxes"].size(), before);
}

// A client that goes away (Ctrl-C of `skiff run`) stops the run and its sandbox.
TEST_P(ProcessSuite, TheRunStreamStopsItsSandboxWhenTheClientGoes) {
  size_t before = Ok("sandbox::list", json::object())["sandboxes"].size();
  std::string marker = "1001." + std::to_string(::getpid());
  int fd = d().Connect();
  ASSERT_GE(fd, 0);
  std::string body = json{{"image", "base"}, {"isolation", GetParam()}, {"argv", {"sleep", marker}}}.dump();
  std::string req = "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  auto end = Clock::now() + 120s;
  while (got.find("\"type\":\"start\"") == std::string::npos && Clock::now() < end) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ASSERT_NE(got.find("\"type\":\"start\""), std::string::npos) << got;
  EXPECT_EQ(Ok("sandbox::list", json::object())["sandboxes"].size(), before + 1);
  std::this_thread::sleep_for(500ms);  // the command runs
  ::close(fd);
  size_t now = before + 1;
  for (int i = 0; i < 300 && now != before; ++i) {
    std::this_thread::sleep_for(100ms);
    now = Ok("sandbox::list", json::object())["sandboxes"].size();
  }
  EXPECT_EQ(now, before) << "the run's sandbox outlived its client";
}

INSTANTIATE_TEST_SUITE_P(Backends, ProcessSuite, ::testing::Values("jail", "microvm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace skiff::e2e
