// One end-to-end suite of the 16 sandbox::* functions, written once and run
// on both isolation backends (value-parameterised: "jail", "microvm"). A real
// `skiff serve` per backend is driven over HTTP; every response is checked
// against the schema the daemon publishes and every error against the docs/errors.md
// wire object and its HTTP status. The fs tests walk each function's spec
// table (fields, defaults, S-codes); the escape tests plant links from inside
// the sandbox and check on the host that nothing outside was touched.
//
// Cost control (microVM under TCG boots in seconds): one daemon and one
// shared sandbox per backend, created on first use and shared by every test
// (each test works in its own directories); only the lifecycle and run
// tests boot further sandboxes. CMake registers one ctest entry per backend
// so the sharing survives (gtest_discover_tests would start a process, and
// a VM, per test).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "ws_client.h"

namespace skiff::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

const std::string kGhost = "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11";

int StatusFor(const std::string& code) {
  static const std::map<std::string, int> m = {
      {"S001", 400}, {"S100", 400}, {"S210", 400}, {"S217", 400}, {"S215", 403}, {"S002", 404},
      {"S211", 404}, {"S004", 409}, {"S005", 409}, {"S006", 409}, {"S007", 404}, {"S008", 409},
      {"S212", 409}, {"S213", 409}, {"S214", 409}, {"S003", 429}, {"S400", 429}, {"S216", 500},
      {"S219", 500}, {"S300", 500}, {"S101", 503}, {"S102", 503}, {"S218", 503}, {"S200", 504}};
  auto it = m.find(code);
  return it == m.end() ? -1 : it->second;
}

std::string RandomTag() {
  std::random_device rd;
  char b[17];
  std::snprintf(b, sizeof b, "%08x%08x", rd(), rd());
  return b;
}

std::string Slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

// A directory on the host that no sandbox may reach: escape tests point
// links at its path (and at "/") and check afterwards that it is unchanged.
struct HostCanary {
  std::string dir, file, agent;
  std::string content;
  mode_t file_mode = 0, dir_mode = 0, agent_mode = 0;
  void Create() {
    dir = "/tmp/skiff-suite-canary-" + RandomTag();
    file = dir + "/secret";
    content = "host secret " + RandomTag() + "\n";
    std::filesystem::create_directories(dir);
    ::chmod(dir.c_str(), 0751);
    std::ofstream(file) << content;
    ::chmod(file.c_str(), 0640);
    agent = std::string(SKIFF_BINARY_DIR) + "/cmd/skiff-agent/skiff-agent";
    file_mode = ModeOf(file);
    dir_mode = ModeOf(dir);
    agent_mode = ModeOf(agent);
  }
  static mode_t ModeOf(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 ? st.st_mode : 0;
  }
  // "" when untouched, else what changed.
  std::string Check() const {
    if (ModeOf(dir) != dir_mode) return "canary dir mode changed";
    if (ModeOf(file) != file_mode) return "canary file mode changed";
    if (Slurp(file) != content) return "canary file content changed";
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename());
    if (names != std::set<std::string>{"secret"}) return "canary dir gained entries";
    if (ModeOf(agent) != agent_mode) return "host agent binary mode changed";
    return "";
  }
  void Remove() const {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

// One daemon and one shared sandbox per backend.
struct Backend {
  std::unique_ptr<Daemon> daemon;
  std::string sid;
  std::string setup_error;
  double boot_secs = 0;
  Clock::time_point started;
  std::map<std::string, json> schemas;
};

std::map<std::string, Backend*>& Backends() {
  static std::map<std::string, Backend*> m;
  return m;
}
HostCanary& Canary() {
  static HostCanary c;
  return c;
}

// Each backend's daemon keeps its snapshots apart, removed with the suite.
std::string SnapshotDir(const std::string& isolation) {
  return "/tmp/skiff-functions-suite-snapshots-" + isolation + "-" + std::to_string(::getpid());
}

std::string ConfigFor(const std::string& isolation) {
  return "snapshot_dir: " + SnapshotDir(isolation) +
         "\n"
         "image_allowlist: [base, python]\n"
         "isolation: " +
         isolation +
         "\n"
         "default_idle_timeout_secs: 1800\n"
         "max_concurrent_exec_per_sandbox: 4\n"
         "per_image_caps: {base: {max_cpus: 2, max_memory_mb: 1024}}\n";
}

class FunctionsSuite : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Canary().Create();
  }
  static void TearDownTestSuite() {
    for (auto& [name, b] : Backends()) {
      if (b->daemon && !b->sid.empty()) {
        b->daemon->Call("sandbox::stop", {{"sandbox_id", b->sid}, {"wait", true}});
      }
      double total = std::chrono::duration<double>(Clock::now() - b->started).count();
      std::printf("[ suite    ] backend %s: shared sandbox boot %.2f s, suite %.1f s\n", name.c_str(),
                  b->boot_secs, total);
      if (b->daemon) {
        EXPECT_EQ(b->daemon->Terminate(), 0) << b->daemon->Log();
      }
      EXPECT_EQ(std::system(("rm -rf '" + SnapshotDir(name) + "'").c_str()), 0);
      delete b;
    }
    Backends().clear();
    Canary().Remove();
  }

  void SetUp() override {
    auto& slot = Backends()[GetParam()];
    if (slot == nullptr) {
      slot = new Backend;
      slot->started = Clock::now();
      slot->daemon = std::make_unique<Daemon>(ConfigFor(GetParam()));
      if (!slot->daemon->ready()) {
        slot->setup_error = "daemon did not start:\n" + slot->daemon->Log();
      } else {
        auto t0 = Clock::now();
        auto r = slot->daemon->Call(
            "sandbox::create", {{"image", "base"}, {"isolation", GetParam()}, {"name", "functions-suite"}});
        slot->boot_secs = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r.status != 200) {
          slot->setup_error = "shared sandbox create failed: " + r.body + "\n" + slot->daemon->Log();
        } else {
          slot->sid = r.Json()["sandbox_id"];
        }
      }
    }
    b_ = slot;
    ASSERT_EQ(b_->setup_error, "");
    // Each test gets its own directories: /tmp/<test> (tmpfs) and
    // /root/<test> (the overlay), so cross-filesystem moves are reachable.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    name = name.substr(0, name.find('/'));
    dir_ = "/tmp/" + name;
    odir_ = "/root/" + name;
    CallOk("sandbox::fs::mkdir", {{"sandbox_id", sid()}, {"path", dir_}, {"parents", true}});
    CallOk("sandbox::fs::mkdir", {{"sandbox_id", sid()}, {"path", odir_}, {"parents", true}});
  }
  void TearDown() override {
    if (b_ == nullptr || b_->sid.empty()) return;
    EXPECT_EQ(Canary().Check(), "");
    // The shared sandbox is still alive and sane after every test.
    auto r = d().Call("sandbox::exec", {{"sandbox_id", sid()},
                                        {"argv", {"sh", "-c", "test -f /etc/passwd && stat -c %a /etc"}}});
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json().value("stdout", ""), "755\n") << r.body;
  }

  Daemon& d() { return *b_->daemon; }
  const std::string& sid() { return b_->sid; }
  const std::string& iso() { return GetParam(); }

  json Schema(const std::string& fn, const char* which) {
    if (!b_->schemas.count(fn)) {
      auto r = d().Get("/v1/functions/" + fn);
      EXPECT_EQ(r.status, 200) << fn;
      b_->schemas[fn] = r.Json();
    }
    return b_->schemas[fn][which];
  }
  json CallOk(const std::string& fn, const json& payload) {
    auto r = d().Call(fn, payload);
    EXPECT_EQ(r.status, 200) << fn << " " << payload.dump().substr(0, 400) << " -> " << r.body;
    json body = r.Json();
    json s = Schema(fn, "response_schema");
    EXPECT_EQ(Validate(body, s, s), "") << fn << ": " << r.body.substr(0, 400);
    return body;
  }
  json CallErr(const std::string& fn, const json& payload, const std::string& code) {
    auto r = d().Call(fn, payload);
    EXPECT_EQ(r.status, StatusFor(code)) << fn << " " << payload.dump().substr(0, 400) << " -> " << r.body;
    json body = r.Json();
    EXPECT_EQ(ValidateErrorObject(body), "") << r.body;
    EXPECT_EQ(body.value("code", ""), code) << fn << " " << payload.dump().substr(0, 400) << " -> " << r.body;
    return body;
  }
  // Either a success or one of `codes`; the body is validated either way.
  json CallAny(const std::string& fn, const json& payload, const std::set<std::string>& codes) {
    auto r = d().Call(fn, payload);
    json body = r.Json();
    if (r.status == 200) {
      json s = Schema(fn, "response_schema");
      EXPECT_EQ(Validate(body, s, s), "") << fn << ": " << r.body;
    } else {
      EXPECT_EQ(ValidateErrorObject(body), "") << r.body;
      EXPECT_TRUE(codes.count(body.value("code", ""))) << fn << " " << payload.dump() << " -> " << r.body;
      EXPECT_EQ(r.status, StatusFor(body.value("code", ""))) << r.body;
    }
    return body;
  }
  // Payload for a sandbox-scoped call on the shared sandbox.
  json P(json fields) {
    fields["sandbox_id"] = sid();
    return fields;
  }
  // Runs a shell script in the shared sandbox; expects exit 0.
  std::string Sh(const std::string& script) {
    json r = CallOk("sandbox::exec", P({{"argv", {"sh", "-c", script}}}));
    EXPECT_EQ(r.value("exit_code", -1), 0) << script << "\n" << r.dump();
    return r.value("stdout", "");
  }
  json Write(const std::string& path, const std::string& content, json extra = json::object()) {
    extra["path"] = path;
    extra["content"] = content;
    return CallOk("sandbox::fs::write", P(extra));
  }
  json Stat(const std::string& path) { return CallOk("sandbox::fs::stat", P({{"path", path}})); }
  // By value: a range-for over a member of a temporary would dangle.
  json ListSandboxes() { return CallOk("sandbox::list", json::object())["sandboxes"]; }
  json Entries(const std::string& path) { return CallOk("sandbox::fs::ls", P({{"path", path}}))["entries"]; }

  // The decode rules every sandbox-scoped function shares (docs/api.md#conventions, docs/api.md#conventions):
  // sandbox_id and each required string field missing, null, mistyped;
  // path-like fields empty or holding NUL. All S001, before any lookup.
  void ExpectDecodeRules(const std::string& fn, json valid, const std::vector<std::string>& paths,
                         const std::vector<std::string>& other_required = {}) {
    valid["sandbox_id"] = kGhost;  // S001 must win over S002
    for (const std::string& f : [&] {
           std::vector<std::string> all = {"sandbox_id"};
           all.insert(all.end(), paths.begin(), paths.end());
           all.insert(all.end(), other_required.begin(), other_required.end());
           return all;
         }()) {
      json p = valid;
      p.erase(f);
      auto e = CallErr(fn, p, "S001");
      EXPECT_EQ(e["message"], "invalid request: missing required field '" + f + "' (expected string)");
      p[f] = nullptr;
      e = CallErr(fn, p, "S001");
      EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("missing required field '" + f + "'"));
      p[f] = 7;
      e = CallErr(fn, p, "S001");
      EXPECT_EQ(e["message"], "invalid request: field '" + f + "': expected string, got number");
    }
    for (const auto& f : paths) {
      json p = valid;
      p[f] = "";
      CallErr(fn, p, "S001");
      p[f] = std::string("/tmp/a\0b", 8);
      auto e = CallErr(fn, p, "S001");
      EXPECT_THAT(e["message"].get<std::string>(), HasSubstr(f));
    }
    json p = valid;
    p["sandbox_id"] = "nope";
    auto e = CallErr(fn, p, "S001");
    EXPECT_EQ(e["message"], "invalid request: sandbox_id: not a UUID: nope");
    CallErr(fn, json::array({1}), "S001");
    // Well-formed, unknown sandbox: S002 (unknown fields ignored).
    p = valid;
    p["_caller_worker_id"] = "w";
    e = CallErr(fn, p, "S002");
    EXPECT_EQ(e["message"], "sandbox not found: " + kGhost);
  }
  // A boolean option: wrong type is S001 naming it.
  void ExpectBoolField(const std::string& fn, json valid, const std::string& field) {
    valid["sandbox_id"] = kGhost;
    valid[field] = "yes";
    auto e = CallErr(fn, valid, "S001");
    EXPECT_EQ(e["message"], "invalid request: field '" + field + "': expected boolean, got string");
  }

  Backend* b_ = nullptr;
  std::string dir_, odir_;
};

std::string TooLong(const std::string& dir) { return dir + "/" + std::string(300, 'n'); }

json With(json base, const json& extra) {
  base.update(extra);
  return base;
}

// ======================================================================
// Lifecycle: create, list, catalog::list, stop (+ S004 on in-flight calls)
// ======================================================================

TEST_P(FunctionsSuite, CreateListStopLifecycle) {
  // Validation: all before any boot.
  CallErr("sandbox::create", json::object(), "S001");
  auto e = CallErr("sandbox::create", {{"image", 1}}, "S001");
  EXPECT_EQ(e["message"], "invalid request: field 'image': expected string, got number");
  CallErr("sandbox::create", {{"image", "base"}, {"cpus", 0}}, "S001");
  CallErr("sandbox::create", {{"image", "base"}, {"cpus", 256}}, "S001");
  CallErr("sandbox::create", {{"image", "base"}, {"memory_mb", 63}}, "S001");
  CallErr("sandbox::create", {{"image", "base"}, {"isolation", "kvm"}}, "S001");
  CallErr("sandbox::create", {{"image", "base"}, {"idle_timeout_secs", -1}}, "S001");
  CallErr("sandbox::create", {{"image", "base"}, {"env", {{"9bad", "x"}}}}, "S001");
  CallErr("sandbox::create", {{"image", "base"}, {"network", "no"}}, "S001");
  e = CallErr("sandbox::create", {{"image", "node"}}, "S100");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("; allowed images: "));
  CallErr("sandbox::create", {{"image", "docker.io/library/debian:12"}}, "S100");
  e = CallErr("sandbox::create", {{"image", "base"}, {"cpus", 3}}, "S400");
  EXPECT_EQ(e["message"], "resource limit exceeded: cpus=3 exceeds per-image cap 2");
  CallErr("sandbox::create", {{"image", "base"}, {"memory_mb", 2048}}, "S400");
  // The other backend is not permitted on a daemon configured for this one.
  const std::string other = iso() == "jail" ? "microvm" : "jail";
  e = CallErr("sandbox::create", {{"image", "base"}, {"isolation", other}}, "S300");
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("platform failure: isolation: "));

  // Catalog.
  json cat = CallOk("sandbox::catalog::list", {{"ignored", true}});
  std::vector<std::string> names;
  for (const auto& i : cat["images"]) names.push_back(i["name"]);
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 5),
            (std::vector<std::string>{"python", "node", "base", "code-interpreter", "host"}));
  for (const auto& i : cat["images"]) {
    if (i["name"] == "base") {
      EXPECT_EQ(i["kind"], "preset");
      EXPECT_EQ(i["allowed"], true);
      EXPECT_EQ(i["installed"], true);
      EXPECT_THAT(i["oci_ref"].get<std::string>(), StartsWith("skiff.local/preset/base:"));
    }
    if (i["name"] == "node") {
      EXPECT_EQ(i["allowed"], false);
    }
    if (i["name"] == "host") {
      EXPECT_EQ(i["kind"], "host");
    }
  }
  CallErr("sandbox::catalog::list", json::array(), "S001");

  // Every field of create, non-default.
  json cr = CallOk("sandbox::create", {{"image", "base"},
                                       {"cpus", 2},
                                       {"memory_mb", 256},
                                       {"name", "life"},
                                       {"network", false},
                                       {"idle_timeout_secs", 900},
                                       {"env", {{"SUITE_A", "1"}, {"SUITE_B", "x=y"}}},
                                       {"isolation", iso()}});
  std::string id = cr["sandbox_id"];
  EXPECT_EQ(cr["image"], "base");
  EXPECT_EQ(cr["isolation"], iso());
  EXPECT_TRUE(
      std::regex_match(id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << id;
  auto ex =
      CallOk("sandbox::exec", {{"sandbox_id", id}, {"argv", {"sh", "-c", "echo $SUITE_A $SUITE_B; nproc"}}});
  EXPECT_THAT(ex["stdout"].get<std::string>(), StartsWith("1 x=y\n"));
  if (iso() == "microvm") {
    EXPECT_EQ(ex["stdout"], "1 x=y\n2\n");  // cpus = vCPUs
  }

  // list: the new sandbox with every field; the shared one too; ordered.
  json list = CallOk("sandbox::list", json::object());
  CallOk("sandbox::list", {{"anything", 1}});
  EXPECT_EQ(d().Post("/v1/functions/sandbox::list", "").status, 200);
  CallErr("sandbox::list", json::array(), "S001");
  json mine;
  std::vector<std::string> created_at;
  for (const auto& s : list["sandboxes"]) {
    created_at.push_back(s["created_at"]);
    if (s["sandbox_id"] == id) mine = s;
  }
  EXPECT_TRUE(std::is_sorted(created_at.begin(), created_at.end()));
  ASSERT_TRUE(mine.is_object()) << list.dump();
  EXPECT_EQ(mine["name"], "life");
  EXPECT_EQ(mine["image"], "base");
  EXPECT_EQ(mine["isolation"], iso());
  EXPECT_EQ(mine["cpus"], 2);
  EXPECT_EQ(mine["memory_mb"], 256);
  EXPECT_EQ(mine["network"], false);
  EXPECT_EQ(mine["stopped"], false);
  EXPECT_EQ(mine["exec_in_progress"], false);
  EXPECT_EQ(mine["exec_in_flight"], 0);
  EXPECT_EQ(mine["exec_slots_free"], 4);
  EXPECT_GE(mine["age_secs"].get<int64_t>(), 0);
  std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  EXPECT_TRUE(std::regex_match(mine["created_at"].get<std::string>(), rfc3339)) << mine.dump();
  EXPECT_TRUE(std::regex_match(mine["last_activity_at"].get<std::string>(), rfc3339)) << mine.dump();
  for (const auto& s : list["sandboxes"]) {
    if (s["sandbox_id"] == sid()) {
      EXPECT_TRUE(s["name"] == "functions-suite");
      EXPECT_EQ(s["cpus"], 1);         // default_cpus
      EXPECT_EQ(s["memory_mb"], 512);  // default_memory_mb
    }
  }

  // Liveness (docs/api.md#sandboxlist, last_activity_at): fs calls refresh last_activity_at; list and
  // catalog::list do not.
  auto activity = [&] {
    for (const auto& s : ListSandboxes()) {
      if (s["sandbox_id"] == id) return s["last_activity_at"].get<std::string>();
    }
    return std::string("gone");
  };
  std::string a0 = activity();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CallOk("sandbox::fs::stat", {{"sandbox_id", id}, {"path", "/"}});
  std::string a1 = activity();
  EXPECT_GT(a1, a0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CallOk("sandbox::catalog::list", json::object());
  EXPECT_EQ(activity(), a1);

  // An exec and a streamed fs::write in flight when stop arrives end with S004.
  CallOk("sandbox::fs::write", {{"sandbox_id", id}, {"path", "/tmp/keep"}, {"content", "orig"}});
  auto pair = d().Call("engine::channels::create", json::object()).Json();
  ASSERT_TRUE(pair.contains("writer")) << pair.dump();
  WsClient held;
  ASSERT_EQ(held.Open(d(), "/ws/channels/" + pair["writer"]["channel_id"].get<std::string>() +
                               "?key=" + pair["writer"]["access_key"].get<std::string>() + "&dir=write"),
            101);
  held.Send(2, "some bytes, then nothing");
  json fs_err;
  std::thread fs_call([&] {
    auto r = d().Call("sandbox::fs::write",
                      {{"sandbox_id", id}, {"path", "/tmp/keep"}, {"content", pair["reader"]}});
    fs_err = r.Json();
    fs_err["_status"] = r.status;
  });
  std::atomic<bool> exec_done{false};
  json exec_err;
  std::thread slow([&] {
    auto r = d().Call("sandbox::exec",
                      {{"sandbox_id", id}, {"argv", {"sh", "-c", "echo partial; exec sleep 60"}}});
    exec_err = r.Json();
    exec_err["_status"] = r.status;
    exec_done = true;
  });
  // The list shows the exec in flight.
  bool saw_busy = false;
  for (int i = 0; i < 400 && !saw_busy; ++i) {
    for (const auto& s : ListSandboxes()) {
      if (s["sandbox_id"] == id && s["exec_in_flight"] == 1) {
        saw_busy = true;
        EXPECT_EQ(s["exec_in_progress"], true);
        EXPECT_EQ(s["exec_slots_free"], 3);
      }
    }
    if (!saw_busy) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(saw_busy);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // let "partial" arrive
  // Stop with an uppercase, unhyphenated id: accepted, canonical in the answer.
  std::string odd = id;
  odd.erase(std::remove(odd.begin(), odd.end(), '-'), odd.end());
  for (auto& c : odd) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  json st = CallOk("sandbox::stop", {{"sandbox_id", odd}});  // wait defaults to false
  EXPECT_EQ(st["sandbox_id"], id);
  EXPECT_EQ(st["stopped"], true);
  // Removed from the registry before stop returned.
  for (const auto& s : ListSandboxes()) EXPECT_NE(s["sandbox_id"], id);
  slow.join();
  fs_call.join();
  EXPECT_EQ(fs_err["_status"], 409) << fs_err.dump();
  EXPECT_EQ(fs_err["code"], "S004") << fs_err.dump();
  EXPECT_EQ(exec_err["_status"], 409) << exec_err.dump();
  EXPECT_EQ(exec_err["code"], "S004") << exec_err.dump();
  exec_err.erase("_status");
  EXPECT_EQ(ValidateErrorObject(exec_err), "");
  ASSERT_TRUE(exec_err.contains("details")) << exec_err.dump();
  EXPECT_EQ(exec_err["details"]["stdout"], "partial\n");
  // A second stop during the background teardown is {stopped:true} (with
  // wait:true it waits for that teardown); once done, the id is gone: S002.
  CallAny("sandbox::stop", {{"sandbox_id", id}, {"wait", true}}, {"S002"});
  CallErr("sandbox::stop", {{"sandbox_id", id}}, "S002");
  CallErr("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}}, "S002");
  CallErr("sandbox::fs::read", {{"sandbox_id", id}, {"path", "/tmp/keep"}}, "S002");
  CallErr("sandbox::stop", json::object(), "S001");
  CallErr("sandbox::stop", {{"sandbox_id", kGhost}, {"wait", "yes"}}, "S001");

  // stop wait:true on a fresh sandbox (default everything but isolation).
  json c2 = CallOk("sandbox::create", {{"image", "base"}, {"isolation", iso()}, {"name", nullptr}});
  EXPECT_EQ(c2["isolation"], iso());
  for (const auto& s : ListSandboxes()) {
    if (s["sandbox_id"] == c2["sandbox_id"]) {
      EXPECT_TRUE(s["name"].is_null());
      EXPECT_EQ(s["cpus"], 1);
      EXPECT_EQ(s["memory_mb"], 512);
    }
  }
  std::string braced = "{" + c2["sandbox_id"].get<std::string>() + "}";
  st = CallOk("sandbox::stop", {{"sandbox_id", braced}, {"wait", true}});
  EXPECT_EQ(st["sandbox_id"], c2["sandbox_id"]);
  CallErr("sandbox::fs::ls",
          {{"sandbox_id", "urn:uuid:" + c2["sandbox_id"].get<std::string>()}, {"path", "/"}}, "S002");
}

// ======================================================================
// exec
// ======================================================================

// Snapshots, forks and hibernation through the functions (docs/snapshots.md):
// the microVM saves files and running processes, the jail its files; the jail
// cannot hibernate and says why.
TEST_P(FunctionsSuite, SnapshotForkAndHibernate) {
  const bool vm = iso() == "microvm";
  std::string src = CallOk("sandbox::create", {{"image", "base"}, {"isolation", iso()}})["sandbox_id"];
  const std::string ticker =
      "echo saved > /root/state; echo shared > /dev/shm/seg; "
      "(i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.2; done) "
      ">/dev/null 2>&1 &";
  EXPECT_EQ(CallOk("sandbox::exec", {{"sandbox_id", src}, {"argv", {"sh", "-c", ticker}}})["exit_code"], 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string name = "suite-" + iso();
  json snap = CallOk("sandbox::snapshot", {{"sandbox_id", src}, {"name", name}});
  EXPECT_EQ(snap["contents"], vm ? "memory+disk" : "disk");
  EXPECT_EQ(snap["isolation"], iso());
  EXPECT_EQ(snap["network"], false);
  CallErr("sandbox::snapshot", {{"sandbox_id", src}, {"name", name}}, "S001");
  CallErr("sandbox::snapshot", {{"sandbox_id", kGhost}}, "S002");
  json listed = CallOk("sandbox::snapshot::list", json::object());
  ASSERT_EQ(listed["snapshots"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["snapshots"][0]["snapshot_id"], snap["snapshot_id"]);

  // A sandbox from the snapshot: the files, and on the microVM the ticker.
  json copy = CallOk("sandbox::create", {{"snapshot", name}});
  EXPECT_EQ(copy["isolation"], iso());
  std::string cid = copy["sandbox_id"];
  auto sh = [&](const std::string& id, const std::string& script) {
    return CallOk("sandbox::exec", {{"sandbox_id", id}, {"argv", {"sh", "-c", script}}});
  };
  EXPECT_EQ(sh(cid, "cat /root/state")["stdout"], "saved\n");
  EXPECT_EQ(sh(cid, "cat /dev/shm/seg")["stdout"], "shared\n") << "/dev/shm is part of the snapshot";
  const std::string ticks = "a=$(cat /tmp/n); sleep 1; b=$(cat /tmp/n); test $b -gt $a && echo ticking";
  EXPECT_EQ(sh(cid, ticks)["stdout"], vm ? "ticking\n" : "") << "processes come back on the microVM only";
  CallErr("sandbox::create", {{"snapshot", "no-such-snapshot"}}, "S007");
  CallErr("sandbox::create", {{"snapshot", name}, {"image", "python"}}, "S001");
  if (vm) {
    // A VM saved without a NIC has none to give a network to.
    json e = CallErr("sandbox::create", {{"snapshot", name}, {"network", true}}, "S001");
    EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("without network"));
  }

  // Fork: copies of the source's current state.
  json forks = CallOk("sandbox::fork", {{"sandbox_id", src}, {"count", 2}});
  ASSERT_EQ(forks["sandboxes"].size(), 2u);
  for (const auto& f : forks["sandboxes"])
    EXPECT_EQ(sh(f["sandbox_id"], "cat /root/state /dev/shm/seg")["stdout"], "saved\nshared\n");
  EXPECT_EQ(CallOk("sandbox::snapshot::list", json::object())["snapshots"].size(), 1u);

  // Hibernation.
  if (vm) {
    EXPECT_EQ(CallOk("sandbox::pause", {{"sandbox_id", src}, {"mode", "disk"}})["hibernated"], true);
    CallErr("sandbox::pause", {{"sandbox_id", src}, {"mode", "disk"}}, "S006");
    CallErr("sandbox::exec", {{"sandbox_id", src}, {"cmd", "true"}}, "S005");
    json entry;
    for (const auto& e : ListSandboxes())
      if (e["sandbox_id"] == src) entry = e;
    EXPECT_EQ(entry["hibernated"], true) << entry.dump();
    EXPECT_EQ(entry["state"], "paused") << entry.dump();
    CallOk("sandbox::resume", {{"sandbox_id", src}});
    EXPECT_EQ(sh(src, ticks)["stdout"], "ticking\n") << "the ticker runs on after the wake";
    EXPECT_EQ(sh(src, "cat /root/state")["stdout"], "saved\n");
  } else {
    json e = CallErr("sandbox::pause", {{"sandbox_id", src}, {"mode", "disk"}}, "S300");
    EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("CRIU"));
    EXPECT_EQ(sh(src, "cat /root/state")["stdout"], "saved\n") << "a refused hibernation changes nothing";
  }

  // A jail reads its snapshot's files for its whole life.
  if (vm) {
    CallOk("sandbox::snapshot::delete", {{"snapshot", name}});
  } else {
    CallErr("sandbox::snapshot::delete", {{"snapshot", name}}, "S008");
  }
  for (const auto& f : forks["sandboxes"])
    CallOk("sandbox::stop", {{"sandbox_id", f["sandbox_id"]}, {"wait", true}});
  CallOk("sandbox::stop", {{"sandbox_id", cid}, {"wait", true}});
  CallOk("sandbox::stop", {{"sandbox_id", src}, {"wait", true}});
  if (!vm) CallOk("sandbox::snapshot::delete", {{"snapshot", name}});
  CallErr("sandbox::snapshot::delete", {{"snapshot", name}}, "S007");
  EXPECT_TRUE(CallOk("sandbox::snapshot::list", json::object())["snapshots"].empty());
}

// sandbox::metrics: 64 MiB written to /tmp (a tmpfs: memory and disk both)
// shows in mem_used and disk_used, a busy loop in cpu_used_pct. The jail
// reads its cgroups; the microVM asks its guest's agent (op "usage"), and
// answers while paused from the sample taken before the pause.
TEST_P(FunctionsSuite, MetricsSeeMemoryDiskAndCpu) {
  std::string id = CallOk("sandbox::create", {{"image", "base"}, {"isolation", iso()}})["sandbox_id"];
  CallErr("sandbox::metrics", {{"sandbox_id", kGhost}}, "S002");
  CallErr("sandbox::metrics", json::object(), "S001");
  json before = CallOk("sandbox::metrics", {{"sandbox_id", id}});
  EXPECT_EQ(before["sandbox_id"], id);
  EXPECT_EQ(before["cpu_count"], 1);
  if (iso() == "microvm") {
    // The guest's MemTotal: its RAM less what its kernel keeps.
    EXPECT_LE(before["mem_total_bytes"].get<uint64_t>(), 512ull << 20) << before.dump();
    EXPECT_GT(before["mem_total_bytes"].get<uint64_t>(), 400ull << 20) << before.dump();
    EXPECT_GT(before["mem_used_bytes"].get<uint64_t>(), 0u) << before.dump();
  } else {
    EXPECT_EQ(before["mem_total_bytes"], 512ull << 20) << before.dump();
  }
  EXPECT_GT(before["disk_total_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(before["cpu_used_pct"].get<double>(), 0.0);
  EXPECT_LE(before["cpu_used_pct"].get<double>(), 100.0);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_LE(std::llabs(before["timestamp_ms"].get<int64_t>() - now_ms), 5000);
  json w = CallOk("sandbox::exec",
                  {{"sandbox_id", id}, {"argv", {"sh", "-c", "head -c 67108864 /dev/zero > /tmp/big"}}});
  ASSERT_EQ(w["exit_code"], 0) << w.dump();
  json after = CallOk("sandbox::metrics", {{"sandbox_id", id}});
  const uint64_t mib64 = 64ull << 20;
  EXPECT_GE(after["disk_used_bytes"].get<uint64_t>(),
            before["disk_used_bytes"].get<uint64_t>() + mib64 - (1 << 20))
      << before.dump() << " -> " << after.dump();
  EXPECT_GE(after["mem_used_bytes"].get<uint64_t>(),
            before["mem_used_bytes"].get<uint64_t>() + mib64 - (4 << 20))
      << before.dump() << " -> " << after.dump();
  // A busy loop for a second: the sample since the previous call sees it.
  CallOk("sandbox::exec",
         {{"sandbox_id", id}, {"argv", {"sh", "-c", "(while :; do :; done) & sleep 1; kill $!"}}});
  json busy = CallOk("sandbox::metrics", {{"sandbox_id", id}});
  EXPECT_GT(busy["cpu_used_pct"].get<double>(), 20.0) << busy.dump();
  // Paused: still readable, and nothing runs.
  CallOk("sandbox::pause", {{"sandbox_id", id}});
  json paused = CallOk("sandbox::metrics", {{"sandbox_id", id}});
  EXPECT_LT(paused["cpu_used_pct"].get<double>(), 5.0) << paused.dump();
  EXPECT_GE(paused["disk_used_bytes"].get<uint64_t>(), mib64);
  EXPECT_GE(paused["mem_used_bytes"].get<uint64_t>(), mib64) << paused.dump();
  EXPECT_EQ(paused["cpu_count"], 1);
  CallOk("sandbox::resume", {{"sandbox_id", id}});
  // Running again: read afresh (the file removed shows).
  CallOk("sandbox::exec", {{"sandbox_id", id}, {"argv", {"rm", "/tmp/big"}}});
  json resumed = CallOk("sandbox::metrics", {{"sandbox_id", id}});
  EXPECT_LT(resumed["disk_used_bytes"].get<uint64_t>(), paused["disk_used_bytes"].get<uint64_t>() - mib64 / 2)
      << paused.dump() << " -> " << resumed.dump();
  CallOk("sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
  CallErr("sandbox::metrics", {{"sandbox_id", id}}, "S002");
}

// The sandbox's clock is right after a pause: a VM guest's clock stands
// still while its vCPUs are stopped, and the resume sets it from the host's.
TEST_P(FunctionsSuite, TheClockIsRightAfterAPause) {
  std::string id = CallOk("sandbox::create", {{"image", "base"}, {"isolation", iso()}})["sandbox_id"];
  CallOk("sandbox::pause", {{"sandbox_id", id}});
  std::this_thread::sleep_for(std::chrono::seconds(3));
  CallOk("sandbox::resume", {{"sandbox_id", id}});
  json r = CallOk("sandbox::exec", {{"sandbox_id", id}, {"argv", {"date", "+%s"}}});
  const int64_t host =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const int64_t guest = std::stoll(r["stdout"].get<std::string>());
  EXPECT_LE(std::llabs(host - guest), 1) << "guest " << guest << ", host " << host;
  CallOk("sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
}

TEST_P(FunctionsSuite, ExecFieldsDefaultsAndErrors) {
  // Command shapes.
  EXPECT_EQ(CallOk("sandbox::exec", P({{"cmd", "echo"}, {"args", {"a b", "$HOME"}}}))["stdout"],
            "a b $HOME\n");
  EXPECT_EQ(CallOk("sandbox::exec", P({{"cmd", "echo 'a b' \"c\\\"d\" #x"}}))["stdout"], "a b c\"d\n");
  EXPECT_EQ(CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "echo $0 $1", "zero", "one"}}}))["stdout"],
            "zero one\n");
  // Defaults: workdir = image workdir (/root), HOME, PATH; env layering.
  json r = CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "pwd; echo $HOME; echo $PATH"}}}));
  EXPECT_EQ(r["stdout"], "/root\n/root\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["success"], true);
  EXPECT_EQ(r["timed_out"], false);
  EXPECT_EQ(r["stdout_truncated"], false);
  EXPECT_EQ(r["stderr_truncated"], false);
  EXPECT_GE(r["duration_ms"].get<int64_t>(), 0);
  EXPECT_EQ(CallOk("sandbox::exec", P({{"cmd", "pwd"}, {"workdir", "tmp"}}))["stdout"], "/tmp\n");
  EXPECT_EQ(CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "echo $A$B"}},
                                       {"env", {"A=1", "B=x=y", "junk", "=v"}}}))["stdout"],
            "1x=y\n");
  EXPECT_EQ(
      CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "echo $A"}}, {"env", {{"A", "obj"}}}}))["stdout"],
      "obj\n");
  EXPECT_EQ(
      CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "echo $HOME"}}, {"env", {"HOME=/x"}}}))["stdout"],
      "/x\n");
  // stdin.
  EXPECT_EQ(
      CallOk("sandbox::exec", P({{"cmd", "cat"}, {"stdin", Base64(std::string("in\0put", 6))}}))["stdout"],
      std::string("in\0put", 6));
  EXPECT_EQ(CallOk("sandbox::exec", P({{"cmd", "cat"}, {"stdin", ""}}))["stdout"], "");
  EXPECT_EQ(CallOk("sandbox::exec", P({{"cmd", "cat"}}))["stdout"], "");
  // Exit codes and spawn outcomes.
  r = CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "echo e >&2; exit 3"}}}));
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["success"], false);
  EXPECT_EQ(r["stderr"], "e\n");
  EXPECT_EQ(CallOk("sandbox::exec", P({{"argv", {"sh", "-c", "kill -9 $$"}}}))["exit_code"], 137);
  r = CallOk("sandbox::exec", P({{"cmd", "no-such-program"}}));
  EXPECT_EQ(r["exit_code"], 127);
  EXPECT_EQ(r["stderr"], "exec: no-such-program: not found\n");
  Write(dir_ + "/noexec", "#!/bin/sh\n", {{"mode", "0644"}});
  r = CallOk("sandbox::exec", P({{"cmd", dir_ + "/noexec"}}));
  EXPECT_EQ(r["exit_code"], 126);
  EXPECT_EQ(r["stderr"], "exec: " + dir_ + "/noexec: permission denied\n");
  Write(dir_ + "/garbage", "\x01\x02garbage", {{"mode", "0755"}});
  r = CallOk("sandbox::exec", P({{"cmd", dir_ + "/garbage"}}));
  EXPECT_EQ(r["exit_code"], 126);
  EXPECT_EQ(r["stderr"], "exec: " + dir_ + "/garbage: exec format error\n");
  // Output cap and UTF-8 repair.
  r = CallOk("sandbox::exec",
             P({{"argv", {"sh", "-c", "head -c 1100000 /dev/zero | tr '\\0' a; printf '\\377' >&2"}}}));
  EXPECT_EQ(r["stdout"].get<std::string>().size(), 1048576u);
  EXPECT_EQ(r["stdout_truncated"], true);
  EXPECT_EQ(r["stderr"], "\xEF\xBF\xBD");
  EXPECT_EQ(r["stderr_truncated"], false);
  // Timeouts: S200 with partial output in details; 0 never starts.
  auto e = CallErr("sandbox::exec",
                   P({{"argv", {"sh", "-c", "echo early; exec sleep 30"}}, {"timeout_ms", 2500}}), "S200");
  EXPECT_EQ(e["message"], "exec timed out after 2500 ms");
  ASSERT_TRUE(e.contains("details"));
  EXPECT_EQ(e["details"]["stdout"], "early\n");
  EXPECT_TRUE(e["details"]["duration_ms"].is_number_integer());
  e = CallErr("sandbox::exec", P({{"argv", {"sh", "-c", "touch " + dir_ + "/started"}}, {"timeout_ms", 0}}),
              "S200");
  CallErr("sandbox::fs::stat", P({{"path", dir_ + "/started"}}), "S211");
  // workdir errors.
  e = CallErr("sandbox::exec", P({{"cmd", "true"}, {"workdir", "/nonexistent"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: workdir /nonexistent");
  e = CallErr("sandbox::exec", P({{"cmd", "true"}, {"workdir", "/etc/passwd"}}), "S212");
  EXPECT_EQ(e["message"], "not a directory or wrong type: workdir /etc/passwd");
  // S001 shapes, all checked before the lookup.
  json ghost = {{"sandbox_id", kGhost}};
  for (json bad :
       {json{{"cmd", "x"}, {"argv", {"ls"}}}, json{{"cmd", "ls -l"}, {"args", {"/"}}},
        json{{"cmd", "echo 'x"}}, json{{"cmd", "   "}}, json{{"cmd", ""}, {"args", {"x"}}}, json::object(),
        json{{"cmd", "true"}, {"stdin", "***"}}, json{{"cmd", "true"}, {"env", {{"9bad", "1"}}}},
        json{{"cmd", "true"}, {"timeout_ms", -1}}, json{{"cmd", "true"}, {"timeout_ms", 1.5}},
        json{{"cmd", "true"}, {"args", {std::string("a\0b", 3)}}}, json{{"cmd", 5}}, json{{"argv", "ls"}}}) {
    bad["sandbox_id"] = kGhost;
    CallErr("sandbox::exec", bad, "S001");
  }
  e = CallErr("sandbox::exec", {{"sandbox_id", kGhost}, {"cmd", "x"}, {"argv", {"ls"}}}, "S001");
  CallErr("sandbox::exec", {{"sandbox_id", kGhost}, {"cmd", "true"}}, "S002");
  CallErr("sandbox::exec", {{"sandbox_id", "nope"}, {"cmd", "true"}}, "S001");
  // S003 at the cap of 4: four sleepers, then a fifth exec.
  std::vector<std::thread> sleepers;
  for (int i = 0; i < 4; ++i) {
    sleepers.emplace_back([&] { d().Call("sandbox::exec", P({{"argv", {"sleep", "4"}}})); });
  }
  bool full = false;
  for (int i = 0; i < 200 && !full; ++i) {
    for (const auto& s : ListSandboxes()) {
      if (s["sandbox_id"] == sid() && s["exec_slots_free"] == 0) full = true;
    }
    if (!full) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(full);
  e = CallErr("sandbox::exec", P({{"cmd", "true"}}), "S003");
  EXPECT_EQ(e["message"],
            "sandbox " + sid() + " is at its exec concurrency cap (max_concurrent_exec_per_sandbox=4)");
  // fs calls do not use exec slots.
  CallOk("sandbox::fs::stat", P({{"path", "/"}}));
  for (auto& t : sleepers) t.join();
}

// ======================================================================
// run
// ======================================================================

TEST_P(FunctionsSuite, RunFieldsDefaultsAndStepErrors) {
  // Every field, keep_sandbox: the sandbox stays and its id comes back.
  json r = CallOk("sandbox::run",
                  {{"image", "base"},
                   {"lang", "sh"},
                   {"code", "cat /work/in.txt; echo \"$RUN_ENV\"; pwd; cat; ls -l /tmp/run.sh | cut -c1-10"},
                   {"files", {{{"path", "/work/in.txt"}, {"content", "sibling\n"}}}},
                   {"env", {"RUN_ENV=yes"}},
                   {"stdin", Base64("from stdin\n")},
                   {"timeout_ms", 60000},
                   {"keep_sandbox", true},
                   {"network", false},
                   {"cpus", 1},
                   {"memory_mb", 256},
                   {"idle_timeout_secs", 600},
                   {"isolation", iso()},
                   {"workdir", "/work"}});
  EXPECT_EQ(r["stdout"], "sibling\nyes\n/work\nfrom stdin\n-rw-r--r--\n");
  EXPECT_EQ(r["exit_code"], 0);
  ASSERT_TRUE(r.contains("sandbox_id"));
  std::string kept = r["sandbox_id"];
  bool listed = false;
  for (const auto& s : ListSandboxes()) {
    if (s["sandbox_id"] == kept) {
      listed = true;
      EXPECT_EQ(s["isolation"], iso());
      EXPECT_EQ(s["memory_mb"], 256);
    }
  }
  EXPECT_TRUE(listed);
  // The env was applied at create too: a later exec sees it.
  EXPECT_EQ(
      CallOk("sandbox::exec", {{"sandbox_id", kept}, {"argv", {"sh", "-c", "echo $RUN_ENV"}}})["stdout"],
      "yes\n");
  CallOk("sandbox::stop", {{"sandbox_id", kept}, {"wait", true}});

  // Defaults: no keep (no sandbox_id key, nothing left), a lang that is a
  // program name (file /tmp/run.txt), non-zero exit is a response.
  size_t before = CallOk("sandbox::list", json::object())["sandboxes"].size();
  r = CallOk("sandbox::run",
             {{"image", "base"}, {"lang", "cat"}, {"code", "plain text"}, {"isolation", iso()}});
  EXPECT_EQ(r["stdout"], "plain text");
  EXPECT_FALSE(r.contains("sandbox_id"));
  EXPECT_EQ(CallOk("sandbox::list", json::object())["sandboxes"].size(), before);

  // Step errors are wrapped; the timeout keeps its partial output.
  auto e = CallErr("sandbox::run",
                   {{"image", "base"},
                    {"lang", "bash"},
                    {"code", "echo half; exec sleep 30"},
                    {"timeout_ms", 2500},
                    {"isolation", iso()}},
                   "S200");
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("during sandbox::run step `exec` (sandbox_id="));
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("exec timed out after 2500 ms"));
  EXPECT_EQ(e["fix"]["context"], "during sandbox::run step `exec`");
  EXPECT_EQ(e["fix"]["inner_code"], "S200");
  EXPECT_TRUE(e["fix_note"].is_null());
  EXPECT_EQ(e["details"]["stdout"], "half\n");
  EXPECT_EQ(CallOk("sandbox::list", json::object())["sandboxes"].size(), before);  // stopped
  e = CallErr("sandbox::run", {{"image", "node"}, {"lang", "sh"}, {"code", "true"}}, "S100");
  EXPECT_THAT(e["message"].get<std::string>(),
              StartsWith("during sandbox::run step `create` (sandbox_id=): "));
  EXPECT_EQ(e["fix"]["sandbox_id"], "");
  EXPECT_EQ(e["fix"]["inner_code"], "S100");
  // argv instead of code and lang: the command as given; its errors are
  // the steps' own, unwrapped; nothing is left behind either way.
  r = CallOk("sandbox::run",
             {{"image", "base"},
              {"argv", {"sh", "-c", "echo \"$0|$1|$RUN_ENV\"; ls /tmp/run.* 2>&1; exit 3", "zero", "a b"}},
              {"env", {"RUN_ENV=cmd"}},
              {"isolation", iso()}});
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_THAT(r["stdout"].get<std::string>(), StartsWith("zero|a b|cmd\n"));
  EXPECT_THAT(r["stdout"].get<std::string>(), HasSubstr("No such file"));  // no code file was written
  e = CallErr("sandbox::run",
              {{"image", "base"},
               {"argv", {"sh", "-c", "echo half; exec sleep 30"}},
               {"timeout_ms", 2500},
               {"isolation", iso()}},
              "S200");
  EXPECT_EQ(e["message"], "exec timed out after 2500 ms");
  EXPECT_EQ(e["details"]["stdout"], "half\n");
  e = CallErr("sandbox::run", {{"image", "node"}, {"argv", {"true"}}}, "S100");
  EXPECT_THAT(e["message"].get<std::string>(), Not(HasSubstr("during sandbox::run")));
  EXPECT_EQ(CallOk("sandbox::list", json::object())["sandboxes"].size(), before);
  // Request validation is plain S001, before any step.
  for (json bad :
       {json{{"image", "base"}, {"argv", json::array()}}, json{{"image", "base"}, {"argv", "true"}},
        json{{"image", "base"}, {"argv", {"true"}}, {"code", "x"}},
        json{{"image", "base"}, {"argv", {"true"}}, {"lang", "sh"}}, json{{"image", "base"}, {"argv", {""}}},
        json{{"image", "base"}, {"argv", {std::string("a\0b", 3)}}}, json{{"lang", "sh"}, {"code", "x"}},
        json{{"image", "base"}, {"code", "x"}}, json{{"image", "base"}, {"lang", "sh"}},
        json{{"image", "base"}, {"lang", ""}, {"code", "x"}},
        json{{"image", "base"}, {"lang", "s h"}, {"code", "x"}},
        json{{"image", "base"}, {"lang", "sh"}, {"code", "x"}, {"files", {{{"path", "/a"}}}}},
        json{{"image", "base"}, {"lang", "sh"}, {"code", "x"}, {"stdin", "!"}},
        json{{"image", "base"}, {"lang", "sh"}, {"code", "x"}, {"keep_sandbox", 1}},
        json{{"image", "base"}, {"lang", "sh"}, {"code", "x"}, {"isolation", "vm"}}}) {
    e = CallErr("sandbox::run", bad, "S001");
    EXPECT_THAT(e["message"].get<std::string>(), StartsWith("invalid request: "));
  }
}

// ======================================================================
// fs::ls
// ======================================================================

TEST_P(FunctionsSuite, FsLs) {
  ExpectDecodeRules("sandbox::fs::ls", {{"path", "/"}}, {"path"});
  Sh("cd " + dir_ +
     " && printf hi > b.txt && chmod 0640 b.txt && : > .hidden && mkdir -m 0700 sub && "
     ": > sub/inner && ln -s sub lnk && ln -s /nowhere broken && ln -s loop loop");
  json ls = CallOk("sandbox::fs::ls", P({{"path", dir_}}));
  std::vector<std::string> names;
  for (const auto& e : ls["entries"]) names.push_back(e["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{".hidden", "b.txt", "broken", "lnk", "loop", "sub"}));
  std::string stats = Sh("cd " + dir_ + " && stat -c '%n %s %Y' b.txt sub");
  for (const auto& e : ls["entries"]) {
    if (e["name"] == "b.txt") {
      EXPECT_EQ(e["size"], 2);
      EXPECT_EQ(e["mode"], "0640");
      EXPECT_EQ(e["is_dir"], false);
      EXPECT_EQ(e["is_symlink"], false);
      EXPECT_THAT(stats, HasSubstr("b.txt 2 " + std::to_string(e["mtime"].get<int64_t>())));
    } else if (e["name"] == "sub") {
      EXPECT_EQ(e["is_dir"], true);
      EXPECT_EQ(e["mode"], "0700");
      EXPECT_THAT(stats, HasSubstr("sub " + std::to_string(e["size"].get<int64_t>()) + " "));
    } else if (e["name"] == "lnk" || e["name"] == "broken") {
      EXPECT_EQ(e["is_dir"], false);
      EXPECT_EQ(e["is_symlink"], true);
    }
  }
  // A link to a directory is followed; a relative path resolves against /.
  json via = CallOk("sandbox::fs::ls", P({{"path", dir_ + "/lnk"}}));
  ASSERT_EQ(via["entries"].size(), 1u);
  EXPECT_EQ(via["entries"][0]["name"], "inner");
  EXPECT_EQ(CallOk("sandbox::fs::ls", P({{"path", dir_.substr(1)}}))["entries"], ls["entries"]);
  EXPECT_EQ(CallOk("sandbox::fs::ls", P({{"path", dir_ + "/sub"}}))["entries"].size(), 1u);
  // S-codes.
  auto e = CallErr("sandbox::fs::ls", P({{"path", dir_ + "/missing"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + dir_ + "/missing");
  e = CallErr("sandbox::fs::ls", P({{"path", dir_ + "/b.txt"}}), "S212");
  EXPECT_EQ(e["message"], "not a directory or wrong type: not a directory: " + dir_ + "/b.txt");
  CallErr("sandbox::fs::ls", P({{"path", dir_ + "/broken"}}), "S211");
  CallErr("sandbox::fs::ls", P({{"path", dir_ + "/loop"}}), "S216");
  e = CallErr("sandbox::fs::ls", P({{"path", TooLong(dir_)}}), "S216");
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("fs i/o error: "));
}

// ======================================================================
// fs::stat
// ======================================================================

TEST_P(FunctionsSuite, FsStat) {
  ExpectDecodeRules("sandbox::fs::stat", {{"path", "/"}}, {"path"});
  Sh("cd " + dir_ +
     " && printf 12345 > f && chmod 4755 f && mkdir d && ln -s d l && ln -s l2 l1 && ln -s l1 l2");
  json f = Stat(dir_ + "/f");
  EXPECT_EQ(f, json({{"name", "f"},
                     {"is_dir", false},
                     {"size", 5},
                     {"mode", "4755"},
                     {"mtime", f["mtime"]},
                     {"is_symlink", false},
                     {"uid", f["uid"]},
                     {"gid", f["gid"]},
                     {"owner", f["owner"]},
                     {"group", f["group"]}}));
  EXPECT_EQ(Sh("stat -c %Y " + dir_ + "/f"), std::to_string(f["mtime"].get<int64_t>()) + "\n");
  EXPECT_EQ(Sh("stat -c '%u %g' " + dir_ + "/f"),
            std::to_string(f["uid"].get<uint32_t>()) + " " + std::to_string(f["gid"].get<uint32_t>()) + "\n");
  EXPECT_FALSE(f["owner"].get<std::string>().empty());
  json d = Stat(dir_ + "/d");
  EXPECT_EQ(d["is_dir"], true);
  EXPECT_EQ(d["mode"], "0755");
  json l = Stat(dir_ + "/l");  // the link itself
  EXPECT_EQ(l["is_dir"], false);
  EXPECT_EQ(l["is_symlink"], true);
  EXPECT_EQ(l["size"], 1);
  EXPECT_EQ(l["symlink_target"], dir_ + "/d");
  EXPECT_EQ(Stat("/")["name"], "/");
  EXPECT_EQ(Stat("/tmp")["mode"], "1777");
  EXPECT_EQ(Stat(dir_.substr(1) + "/f")["name"], "f");
  EXPECT_EQ(Stat(dir_ + "/l1")["is_symlink"], true);  // lstat: a loop is still a link
  auto e = CallErr("sandbox::fs::stat", P({{"path", dir_ + "/none"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + dir_ + "/none");
  CallErr("sandbox::fs::stat", P({{"path", dir_ + "/f/x"}}), "S212");
  CallErr("sandbox::fs::stat", P({{"path", dir_ + "/l1/x"}}), "S216");
  CallErr("sandbox::fs::stat", P({{"path", TooLong(dir_)}}), "S216");
}

// ======================================================================
// fs::mkdir
// ======================================================================

TEST_P(FunctionsSuite, FsMkdir) {
  ExpectDecodeRules("sandbox::fs::mkdir", {{"path", "/x"}}, {"path"});
  ExpectBoolField("sandbox::fs::mkdir", {{"path", "/x"}}, "parents");
  for (const char* bad : {"", "0o755", "rwx", "9", "17777", "-1", "0x1ff"}) {
    auto e = CallErr("sandbox::fs::mkdir", {{"sandbox_id", kGhost}, {"path", "/x"}, {"mode", bad}}, "S210");
    EXPECT_EQ(e["message"], std::string("invalid octal mode: ") + bad);
  }
  CallErr("sandbox::fs::mkdir", {{"sandbox_id", kGhost}, {"path", "/x"}, {"mode", 755}}, "S001");
  // Defaults: mode 0755, parents false.
  EXPECT_EQ(CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/a"}}))["created"], true);
  EXPECT_EQ(Stat(dir_ + "/a")["mode"], "0755");
  EXPECT_EQ(CallOk("sandbox::fs::mkdir",
                   P({{"path", dir_ + "/m"}, {"mode", "1777"}, {"parents", nullptr}}))["created"],
            true);
  EXPECT_EQ(Stat(dir_ + "/m")["mode"], "1777");  // exactly, no umask
  CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/z"}, {"mode", "0"}}));
  EXPECT_EQ(Stat(dir_ + "/z")["mode"], "0000");
  CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/s"}, {"mode", "00700"}}));
  EXPECT_EQ(Stat(dir_ + "/s")["mode"], "0700");
  // parents: intermediates 0755, the leaf gets the mode.
  EXPECT_EQ(CallOk("sandbox::fs::mkdir",
                   P({{"path", dir_ + "/p/q/r"}, {"mode", "711"}, {"parents", true}}))["created"],
            true);
  EXPECT_EQ(Stat(dir_ + "/p")["mode"], "0755");
  EXPECT_EQ(Stat(dir_ + "/p/q")["mode"], "0755");
  EXPECT_EQ(Stat(dir_ + "/p/q/r")["mode"], "0711");
  // parents:true on anything existing: created false.
  EXPECT_EQ(CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/p/q/r"}, {"parents", true}}))["created"],
            false);
  Write(dir_ + "/file", "x");
  EXPECT_EQ(CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/file"}, {"parents", true}}))["created"], false);
  Sh("ln -s p " + dir_ + "/plink");
  EXPECT_EQ(CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/plink/q"}, {"parents", true}}))["created"],
            false);
  // S213: exists (dir, file, link to a dir).
  auto e = CallErr("sandbox::fs::mkdir", P({{"path", dir_ + "/a"}}), "S213");
  EXPECT_EQ(e["message"], "already exists: " + dir_ + "/a");
  CallErr("sandbox::fs::mkdir", P({{"path", dir_ + "/file"}}), "S213");
  CallErr("sandbox::fs::mkdir", P({{"path", dir_ + "/plink"}}), "S213");
  // S211 with fix for a missing parent; the resend with the fix works.
  json req = P({{"path", dir_ + "/n1/n2"}});
  e = CallErr("sandbox::fs::mkdir", req, "S211");
  EXPECT_EQ(e["message"], "parent directory not found: " + dir_ + "/n1");
  EXPECT_EQ(e["fix"], json({{"parents", true}}));
  EXPECT_EQ(
      e["fix_note"],
      "merge fix into the request you sent and send it again; parents: true creates the missing directories");
  req.update(e["fix"]);
  EXPECT_EQ(CallOk("sandbox::fs::mkdir", req)["created"], true);
  // S212: a component is a file.
  CallErr("sandbox::fs::mkdir", P({{"path", dir_ + "/file/x"}}), "S212");
  CallErr("sandbox::fs::mkdir", P({{"path", dir_ + "/file/x"}, {"parents", true}}), "S212");
  // S215: read-only /sys. S216: name too long.
  CallErr("sandbox::fs::mkdir", P({{"path", "/sys/skiff-suite"}}), "S215");
  CallErr("sandbox::fs::mkdir", P({{"path", TooLong(dir_)}}), "S216");
}

// ======================================================================
// fs::write
// ======================================================================

TEST_P(FunctionsSuite, FsWrite) {
  ExpectDecodeRules("sandbox::fs::write", {{"path", "/x"}, {"content", "c"}}, {"path"});
  ExpectBoolField("sandbox::fs::write", {{"path", "/x"}, {"content", "c"}}, "parents");
  // Body rules, checked before the sandbox lookup.
  json g = {{"sandbox_id", kGhost}, {"path", "/x"}};
  auto e = CallErr("sandbox::fs::write", g, "S001");
  EXPECT_EQ(e["message"],
            "invalid request: fs::write needs a body: content (string or channel reference) or content_b64");
  e = CallErr("sandbox::fs::write", With(g, {{"content", nullptr}}), "S001");
  e = CallErr("sandbox::fs::write", With(g, {{"content", "a"}, {"content_b64", "YQ=="}}), "S001");
  EXPECT_EQ(e["message"], "invalid request: fs::write takes content or content_b64, not both");
  e = CallErr("sandbox::fs::write", With(g, {{"content_b64", "not base64!"}}), "S001");
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("invalid request: content_b64: invalid base64: "));
  e = CallErr("sandbox::fs::write", With(g, {{"content", 12}}), "S001");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("content"));
  CallErr("sandbox::fs::write", With(g, {{"content", {{"channel_id", "x"}}}}), "S001");
  e = CallErr("sandbox::fs::write", With(g, {{"content", "x"}, {"mode", "rwx"}}), "S210");
  CallErr("sandbox::fs::write", With(g, {{"content", "x"}}), "S002");

  // Defaults: mode 0644, parents false; path echoed; bytes counted.
  json w = Write(dir_ + "/hello.txt", "hello wörld\n");
  EXPECT_EQ(w, json({{"bytes_written", 13}, {"path", dir_ + "/hello.txt"}}));
  EXPECT_EQ(Stat(dir_ + "/hello.txt")["mode"], "0644");
  EXPECT_EQ(Sh("cat " + dir_ + "/hello.txt; stat -c '%u:%g' " + dir_ + "/hello.txt"), "hello wörld\n0:0\n");
  // Exact mode, no umask; setuid kept.
  Write(dir_ + "/suid", "x", {{"mode", "4755"}});
  EXPECT_EQ(Stat(dir_ + "/suid")["mode"], "4755");
  Write(dir_ + "/z", "x", {{"mode", "0"}});
  EXPECT_EQ(Stat(dir_ + "/z")["mode"], "0000");
  // Binary body via content_b64, with content: null counting as absent.
  std::string bin("\0\x01\xff\xfe binary\n", 12);
  w = CallOk("sandbox::fs::write",
             P({{"path", dir_ + "/bin"}, {"content", nullptr}, {"content_b64", Base64(bin)}}));
  EXPECT_EQ(w["bytes_written"], 12);
  EXPECT_EQ(Sh("od -An -tx1 " + dir_ + "/bin | tr -d ' \\n'"), "0001fffe2062696e6172790a");
  // Empty body: a 0-byte file.
  EXPECT_EQ(Write(dir_ + "/empty", "")["bytes_written"], 0);
  EXPECT_EQ(Stat(dir_ + "/empty")["size"], 0);
  CallOk("sandbox::fs::write", P({{"path", dir_ + "/empty2"}, {"content_b64", ""}}));
  EXPECT_EQ(Stat(dir_ + "/empty2")["size"], 0);
  // Replacing keeps owner and group, takes the new mode.
  Sh("chown 1234:2345 " + dir_ + "/hello.txt");
  Write(dir_ + "/hello.txt", "new", {{"mode", "0600"}});
  EXPECT_EQ(Sh("cat " + dir_ + "/hello.txt; echo; stat -c '%u:%g %a' " + dir_ + "/hello.txt"),
            "new\n1234:2345 600\n");
  // A symlink at path is replaced by a regular file; its target is untouched.
  Write(dir_ + "/target", "target");
  Sh("ln -s target " + dir_ + "/link");
  Write(dir_ + "/link", "replaced");
  EXPECT_EQ(Stat(dir_ + "/link")["is_symlink"], false);
  EXPECT_EQ(Sh("cat " + dir_ + "/target"), "target");
  // A symlinked parent is followed.
  Sh("mkdir " + dir_ + "/real && ln -s real " + dir_ + "/via");
  Write(dir_ + "/via/f", "through");
  EXPECT_EQ(Sh("cat " + dir_ + "/real/f"), "through");
  // parents: missing parents get 0755.
  e = CallErr("sandbox::fs::write", P({{"path", dir_ + "/n1/n2/f"}, {"content", "x"}}), "S211");
  EXPECT_EQ(e["message"], "parent directory not found: " + dir_ + "/n1/n2");
  EXPECT_EQ(e["fix"], json({{"parents", true}}));
  EXPECT_EQ(
      e["fix_note"],
      "merge fix into the request you sent and send it again; parents: true creates the missing directories");
  Write(dir_ + "/n1/n2/f", "deep", {{"parents", true}});
  EXPECT_EQ(Stat(dir_ + "/n1")["mode"], "0755");
  EXPECT_EQ(Stat(dir_ + "/n1/n2")["mode"], "0755");
  // S212: onto a directory, or through a file.
  CallErr("sandbox::fs::write", P({{"path", dir_ + "/real"}, {"content", "x"}}), "S212");
  CallErr("sandbox::fs::write", P({{"path", dir_ + "/target/x"}, {"content", "x"}}), "S212");
  CallErr("sandbox::fs::write", P({{"path", dir_ + "/target/x"}, {"content", "x"}, {"parents", true}}),
          "S212");
  // S215: read-only /sys. S216: name too long. Failures leave no temp file.
  CallErr("sandbox::fs::write", P({{"path", "/sys/skiff-suite"}, {"content", "x"}}), "S215");
  CallErr("sandbox::fs::write", P({{"path", TooLong(dir_)}, {"content", "x"}}), "S216");
  for (const auto& ent : Entries(dir_)) {
    EXPECT_THAT(ent["name"].get<std::string>(), ::testing::Not(StartsWith(".skiff"))) << ent.dump();
  }

  // Streamed body through a data channel (the reader reference).
  auto pair = d().Call("engine::channels::create", {{"buffer_size", 2}}).Json();
  ASSERT_TRUE(pair.contains("reader")) << pair.dump();
  std::string cid = pair["writer"]["channel_id"], key = pair["writer"]["access_key"];
  std::thread writer([&] {
    WsClient ws;
    ASSERT_EQ(ws.Open(d(), "/ws/channels/" + cid + "?key=" + key + "&dir=write"), 101);
    for (int i = 0; i < 5; ++i) ws.Send(2, std::string(1000, static_cast<char>('a' + i)));
    ws.Close();
    ws.Recv(5000);
  });
  w = CallOk("sandbox::fs::write",
             P({{"path", dir_ + "/streamed"}, {"content", pair["reader"]}, {"mode", "0640"}}));
  writer.join();
  EXPECT_EQ(w["bytes_written"], 5000);
  EXPECT_EQ(Sh("md5sum < " + dir_ + "/streamed | cut -c1-32; stat -c %a " + dir_ + "/streamed"),
            Sh("for c in a b c d e; do head -c 1000 /dev/zero | tr '\\0' $c; done | md5sum | cut -c1-32; "
               "echo 640"));
  // A stalled stream: S218 after 5 s, the target untouched, no temp file.
  Write(dir_ + "/stall", "original");
  pair = d().Call("engine::channels::create", json::object()).Json();
  cid = pair["writer"]["channel_id"];
  key = pair["writer"]["access_key"];
  WsClient idle;
  ASSERT_EQ(idle.Open(d(), "/ws/channels/" + cid + "?key=" + key + "&dir=write"), 101);
  idle.Send(2, "partial bytes");
  auto t0 = Clock::now();
  e = CallErr("sandbox::fs::write", P({{"path", dir_ + "/stall"}, {"content", pair["reader"]}}), "S218");
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(secs, 4.5);
  EXPECT_LT(secs, 30);
  EXPECT_EQ(e["retryable"], true);
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("fs channel aborted: "));
  EXPECT_EQ(Sh("cat " + dir_ + "/stall"), "original");
  for (const auto& ent : Entries(dir_)) {
    EXPECT_THAT(ent["name"].get<std::string>(), ::testing::Not(StartsWith(".skiff"))) << ent.dump();
  }
}

// ======================================================================
// fs::read
// ======================================================================

TEST_P(FunctionsSuite, FsRead) {
  ExpectDecodeRules("sandbox::fs::read", {{"path", "/x"}}, {"path"});
  Write(dir_ + "/small.txt", "héllo\n", {{"mode", "0604"}});
  json r = CallOk("sandbox::fs::read", P({{"path", dir_ + "/small.txt"}}));
  EXPECT_EQ(r["body"], "héllo\n");
  EXPECT_EQ(r["size"], 7);
  EXPECT_EQ(r["mode"], "0604");
  EXPECT_EQ(Sh("stat -c %Y " + dir_ + "/small.txt"), std::to_string(r["mtime"].get<int64_t>()) + "\n");
  EXPECT_EQ(r["content"]["direction"], "read");
  // The channel serves the same bytes, then a normal close.
  auto drain = [&](const json& ref) {
    WsClient ws;
    std::string got;
    EXPECT_EQ(ws.Open(d(), "/ws/channels/" + ref["channel_id"].get<std::string>() +
                               "?key=" + ref["access_key"].get<std::string>() + "&dir=read"),
              101);
    while (auto m = ws.Recv(20000)) {
      if (m->opcode == 2) {
        EXPECT_LE(m->data.size(), 65536u);
        got += m->data;
      } else if (m->opcode == 8) {
        EXPECT_EQ(WsClient::CloseCode(*m), 1000);
        return got;
      } else if (m->opcode == 1) {
        ADD_FAILURE() << "error frame: " << m->data;
      }
    }
    ADD_FAILURE() << "channel did not close";
    return got;
  };
  EXPECT_EQ(drain(r["content"]), "héllo\n");
  // Empty file: body "".
  Write(dir_ + "/empty", "");
  r = CallOk("sandbox::fs::read", P({{"path", dir_ + "/empty"}}));
  EXPECT_EQ(r["body"], "");
  EXPECT_EQ(r["size"], 0);
  // Not UTF-8: no body key, bytes via the channel.
  CallOk("sandbox::fs::write",
         P({{"path", dir_ + "/bin"}, {"content_b64", Base64(std::string("\xff\x00\x01", 3))}}));
  r = CallOk("sandbox::fs::read", P({{"path", dir_ + "/bin"}}));
  EXPECT_FALSE(r.contains("body"));
  EXPECT_EQ(drain(r["content"]), std::string("\xff\x00\x01", 3));
  // The 1 MiB boundary: one byte under has a body; exactly 1 MiB has none.
  Sh("cd " + dir_ +
     " && head -c 1048575 /dev/zero | tr '\\0' a > under && head -c 1048576 /dev/zero | tr '\\0' b > at");
  r = CallOk("sandbox::fs::read", P({{"path", dir_ + "/under"}}));
  EXPECT_EQ(r["body"].get<std::string>().size(), 1048575u);
  r = CallOk("sandbox::fs::read", P({{"path", dir_ + "/at"}}));
  EXPECT_FALSE(r.contains("body"));
  EXPECT_EQ(r["size"], 1048576);
  EXPECT_EQ(drain(r["content"]), std::string(1048576, 'b'));
  // Links are followed (mode of the target); relative paths resolve against /.
  Sh("cd " + dir_ + " && ln -s small.txt link && ln -s l2 l1 && ln -s l1 l2 && mkdir d");
  r = CallOk("sandbox::fs::read", P({{"path", dir_ + "/link"}}));
  EXPECT_EQ(r["body"], "héllo\n");
  EXPECT_EQ(r["mode"], "0604");
  EXPECT_EQ(CallOk("sandbox::fs::read", P({{"path", dir_.substr(1) + "/small.txt"}}))["body"], "héllo\n");
  // S-codes.
  auto e = CallErr("sandbox::fs::read", P({{"path", dir_ + "/none"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + dir_ + "/none");
  e = CallErr("sandbox::fs::read", P({{"path", dir_ + "/d"}}), "S212");
  EXPECT_EQ(e["message"], "not a directory or wrong type: is a directory: " + dir_ + "/d");
  CallErr("sandbox::fs::read", P({{"path", dir_ + "/small.txt/x"}}), "S212");
  CallErr("sandbox::fs::read", P({{"path", dir_ + "/l1"}}), "S216");
  CallErr("sandbox::fs::read", P({{"path", TooLong(dir_)}}), "S216");
}

// ======================================================================
// fs::rm
// ======================================================================

TEST_P(FunctionsSuite, FsRm) {
  ExpectDecodeRules("sandbox::fs::rm", {{"path", "/x"}}, {"path"});
  ExpectBoolField("sandbox::fs::rm", {{"path", "/x"}}, "recursive");
  Sh("cd " + dir_ +
     " && : > f && mkdir empty && mkdir -p tree/a/b && : > tree/a/b/f && : > tree/x && "
     "mkdir keep && : > keep/k && ln -s keep dlink && ln -s /nowhere broken && mkfifo fifo");
  EXPECT_EQ(CallOk("sandbox::fs::rm", P({{"path", dir_ + "/f"}}))["removed"], true);
  CallOk("sandbox::fs::rm", P({{"path", dir_ + "/empty"}}));  // recursive default false, empty dir
  // Non-empty without recursive: S214 and intact.
  auto e = CallErr("sandbox::fs::rm", P({{"path", dir_ + "/tree"}}), "S214");
  EXPECT_EQ(e["message"], "directory not empty: " + dir_ + "/tree");
  CallErr("sandbox::fs::rm", P({{"path", dir_ + "/tree"}, {"recursive", nullptr}}), "S214");
  EXPECT_EQ(Sh("find " + dir_ + "/tree | sort"), dir_ + "/tree\n" + dir_ + "/tree/a\n" + dir_ +
                                                     "/tree/a/b\n" + dir_ + "/tree/a/b/f\n" + dir_ +
                                                     "/tree/x\n");
  CallOk("sandbox::fs::rm", P({{"path", dir_ + "/tree"}, {"recursive", true}}));
  // A link to a directory: the link goes, the target stays (even recursive).
  CallOk("sandbox::fs::rm", P({{"path", dir_ + "/dlink"}, {"recursive", true}}));
  EXPECT_EQ(Sh("ls " + dir_ + "/keep"), "k\n");
  CallOk("sandbox::fs::rm", P({{"path", dir_ + "/broken"}}));
  CallOk("sandbox::fs::rm", P({{"path", dir_ + "/fifo"}}));
  EXPECT_EQ(Sh("ls -A " + dir_), "keep\n");
  e = CallErr("sandbox::fs::rm", P({{"path", dir_ + "/f"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + dir_ + "/f");
  CallErr("sandbox::fs::rm", P({{"path", dir_ + "/keep/k/x"}}), "S212");
  CallErr("sandbox::fs::rm", P({{"path", "/sys/kernel"}, {"recursive", true}}), "S215");
  CallErr("sandbox::fs::rm", P({{"path", TooLong(dir_)}}), "S216");
}

// ======================================================================
// fs::chmod
// ======================================================================

TEST_P(FunctionsSuite, FsChmod) {
  ExpectDecodeRules("sandbox::fs::chmod", {{"path", "/x"}, {"mode", "0644"}}, {"path"}, {"mode"});
  ExpectBoolField("sandbox::fs::chmod", {{"path", "/x"}, {"mode", "0644"}}, "recursive");
  json g = {{"sandbox_id", kGhost}, {"path", "/x"}, {"mode", "0644"}};
  for (json bad : {json{{"uid", -1}}, json{{"gid", -1}}, json{{"uid", 4294967296LL}}, json{{"uid", "0"}},
                   json{{"gid", 1.5}}}) {
    CallErr("sandbox::fs::chmod", With(g, bad), "S001");
  }
  for (const char* bad : {"", "0o755", "rwx", "9", "17777"}) {
    auto e = CallErr("sandbox::fs::chmod", With(g, {{"mode", bad}}), "S210");
    EXPECT_EQ(e["message"], std::string("invalid octal mode: ") + bad);
  }
  Sh("cd " + dir_ +
     " && mkdir -p t/s && : > t/f && : > t/s/g && ln -s f t/flink && : > other && ln -s other olink && "
     "ln -s t tlink && chmod 0600 other");
  // Non-recursive (the default): updated 1; uid/gid absent = unchanged.
  json r = CallOk("sandbox::fs::chmod", P({{"path", dir_ + "/t"}, {"mode", "0750"}}));
  EXPECT_EQ(r["updated"], 1);
  EXPECT_EQ(Sh("cd " + dir_ + " && stat -c '%a %u %g' t t/f"), "750 0 0\n644 0 0\n");
  // uid and gid, separately and together.
  CallOk("sandbox::fs::chmod", P({{"path", dir_ + "/t/f"}, {"mode", "0640"}, {"uid", 1000}}));
  EXPECT_EQ(Sh("stat -c '%a %u %g' " + dir_ + "/t/f"), "640 1000 0\n");
  CallOk("sandbox::fs::chmod",
         P({{"path", dir_ + "/t/f"}, {"mode", "0640"}, {"gid", 2000}, {"uid", nullptr}}));
  EXPECT_EQ(Sh("stat -c '%a %u %g' " + dir_ + "/t/f"), "640 1000 2000\n");
  CallOk("sandbox::fs::chmod", P({{"path", dir_ + "/t/f"}, {"mode", "4755"}, {"uid", 0}, {"gid", 0}}));
  EXPECT_EQ(Sh("stat -c '%a %u %g' " + dir_ + "/t/f"), "4755 0 0\n");
  // Non-recursive follows a link: the target changes, the link does not.
  CallOk("sandbox::fs::chmod", P({{"path", dir_ + "/olink"}, {"mode", "0444"}}));
  EXPECT_EQ(Sh("cd " + dir_ + " && stat -c %a other"), "444\n");
  EXPECT_EQ(Stat(dir_ + "/olink")["is_symlink"], true);
  // Recursive: root included, links inside skipped; a linked root is followed.
  r = CallOk("sandbox::fs::chmod",
             P({{"path", dir_ + "/tlink"}, {"mode", "0700"}, {"recursive", true}, {"uid", 7}}));
  EXPECT_EQ(r["updated"], 4);  // t, t/f, t/s, t/s/g
  EXPECT_EQ(Sh("cd " + dir_ + " && stat -c '%n %a %u' t t/f t/s t/s/g other"),
            "t 700 7\nt/f 700 7\nt/s 700 7\nt/s/g 700 7\nother 444 0\n");
  EXPECT_EQ(Sh("stat -c '%u' " + dir_ + "/t/flink"), "0\n");  // link itself untouched
  // S211, S212, S215, S216.
  auto e = CallErr("sandbox::fs::chmod", P({{"path", dir_ + "/none"}, {"mode", "0644"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + dir_ + "/none");
  CallErr("sandbox::fs::chmod", P({{"path", dir_ + "/other/x"}, {"mode", "0644"}}), "S212");
  CallErr("sandbox::fs::chmod", P({{"path", "/sys/kernel"}, {"mode", "0700"}}), "S215");
  CallErr("sandbox::fs::chmod", P({{"path", TooLong(dir_)}, {"mode", "0644"}}), "S216");
}

// ======================================================================
// fs::mv
// ======================================================================

TEST_P(FunctionsSuite, FsMv) {
  ExpectDecodeRules("sandbox::fs::mv", {{"src", "/a"}, {"dst", "/b"}}, {"src", "dst"});
  ExpectBoolField("sandbox::fs::mv", {{"src", "/a"}, {"dst", "/b"}}, "overwrite");
  const std::string& t = dir_;
  Sh("cd " + t +
     " && printf A > a && printf B > b && mkdir -p d1/in e1 full/x && printf C > d1/in/c && "
     "chmod 0701 d1/in && ln -s /nowhere broken && ln -s /nowhere2 dstlink");
  auto mv = [&](const std::string& s, const std::string& dd, json extra = json::object()) {
    extra["src"] = s;
    extra["dst"] = dd;
    return P(extra);
  };
  EXPECT_EQ(CallOk("sandbox::fs::mv", mv(t + "/a", t + "/a2"))["moved"], true);
  // overwrite defaults to false: S213, nothing changes.
  auto e = CallErr("sandbox::fs::mv", mv(t + "/a2", t + "/b"), "S213");
  EXPECT_EQ(e["message"], "already exists: dst " + t + "/b");
  EXPECT_EQ(Sh("cat " + t + "/a2 " + t + "/b"), "AB");
  CallErr("sandbox::fs::mv", mv(t + "/a2", t + "/dstlink"), "S213");  // a broken link exists
  CallOk("sandbox::fs::mv", mv(t + "/a2", t + "/b", {{"overwrite", true}}));
  EXPECT_EQ(Sh("cat " + t + "/b; test ! -e " + t + "/a2"), "A");
  // A broken link is moved as a link.
  CallOk("sandbox::fs::mv", mv(t + "/broken", t + "/broken2"));
  EXPECT_EQ(Sh("readlink " + t + "/broken2"), "/nowhere\n");
  // mv never moves "into" a directory; type conflicts are S212, non-empty S214.
  CallErr("sandbox::fs::mv", mv(t + "/b", t + "/e1", {{"overwrite", true}}), "S212");
  CallErr("sandbox::fs::mv", mv(t + "/e1", t + "/b", {{"overwrite", true}}), "S212");
  e = CallErr("sandbox::fs::mv", mv(t + "/d1", t + "/full", {{"overwrite", true}}), "S214");
  CallOk("sandbox::fs::mv", mv(t + "/d1", t + "/e1", {{"overwrite", true}}));  // onto an empty dir
  EXPECT_EQ(Sh("cat " + t + "/e1/in/c"), "C");
  // Across filesystems (/tmp is a tmpfs, /root the overlay): copy keeps
  // modes, owners and links, then src is gone.
  Sh("chown -R 55:66 " + t + "/e1 && ln -s in/c " + t + "/e1/clink");
  CallOk("sandbox::fs::mv", mv(t + "/e1", odir_ + "/moved"));
  EXPECT_EQ(
      Sh("cd " + odir_ +
         "/moved && stat -c '%n %a %u:%g' in in/c && readlink clink && cat clink && test ! -e " + t + "/e1"),
      "in 701 55:66\nin/c 644 55:66\nin/c\nC");
  CallErr("sandbox::fs::mv", mv(odir_ + "/moved", t + "/full", {{"overwrite", true}}), "S214");
  Write(t + "/exists", "x");
  CallErr("sandbox::fs::mv", mv(odir_ + "/moved", t + "/exists"), "S213");
  CallOk("sandbox::fs::mv", mv(odir_ + "/moved", t + "/back"));
  EXPECT_EQ(Sh("cat " + t + "/back/in/c; ls " + odir_), "C");
  // src missing; dst parent missing (fix null).
  e = CallErr("sandbox::fs::mv", mv(t + "/none", t + "/x"), "S211");
  EXPECT_EQ(e["message"], "file not found: src " + t + "/none");
  e = CallErr("sandbox::fs::mv", mv(t + "/b", t + "/no/dir/x"), "S211");
  EXPECT_TRUE(e["fix"].is_null());
  CallErr("sandbox::fs::mv", mv(t + "/b", t + "/exists/x"), "S212");
  // S215 (read-only /sys, both same-fs and cross-fs), S216.
  CallErr("sandbox::fs::mv", mv("/sys/kernel", "/sys/kernel2"), "S215");
  CallErr("sandbox::fs::mv", mv(t + "/b", "/sys/b"), "S215");
  EXPECT_EQ(Sh("cat " + t + "/b"), "A");
  CallErr("sandbox::fs::mv", mv(t + "/b", TooLong(t)), "S216");
}

// ======================================================================
// fs::grep
// ======================================================================

TEST_P(FunctionsSuite, FsGrep) {
  ExpectDecodeRules("sandbox::fs::grep", {{"path", "/x"}, {"pattern", "p"}}, {"path"}, {"pattern"});
  for (const char* f : {"recursive", "ignore_case"})
    ExpectBoolField("sandbox::fs::grep", {{"path", "/x"}, {"pattern", "p"}}, f);
  json g = {{"sandbox_id", kGhost}, {"path", "/x"}, {"pattern", "p"}};
  CallErr("sandbox::fs::grep", With(g, {{"max_matches", -1}}), "S001");
  CallErr("sandbox::fs::grep", With(g, {{"max_line_bytes", -1}}), "S001");
  CallErr("sandbox::fs::grep", With(g, {{"include_glob", "*.py"}}), "S001");
  CallErr("sandbox::fs::grep", With(g, {{"exclude_glob", {1}}}), "S001");
  auto e = CallErr("sandbox::fs::grep", With(g, {{"pattern", "a(b"}}), "S217");
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("invalid regex pattern: "));
  CallErr("sandbox::fs::grep", With(g, {{"pattern", "(?<=x)y"}}), "S217");  // not RE2

  const std::string& t = dir_;
  Sh("cd " + t +
     " && mkdir -p src/deep/er docs && "
     "printf 'one TODO\\nTwo todo\\r\\nthree\\n' > src/a.py && "
     "printf 'x\\nTODO deep\\n' > src/deep/er/b.py && "
     "printf 'TODO in txt\\n' > docs/c.txt && "
     "printf 'TODO\\000binary\\n' > src/bin.py && "
     "printf 'TODO \\377 bad\\nTODO good\\n' > src/latin.py && "
     "ln -s ../docs src/docslink && ln -s a.py src/alink && mkfifo src/fifo");
  auto grep = [&](json extra) {
    if (extra.is_null()) extra = json::object();
    extra["path"] = extra.value("path", t);
    extra["pattern"] = extra.value("pattern", "TODO");
    return CallOk("sandbox::fs::grep", P(extra));
  };
  auto paths = [](const json& r) {
    std::vector<std::string> v;
    for (const auto& m : r["matches"])
      v.push_back(m["path"].get<std::string>() + ":" + std::to_string(m["line"].get<int>()));
    return v;
  };
  // Defaults: recursive, case-sensitive, walk order, links not followed,
  // binary and non-UTF-8 lines skipped, fifo not opened.
  json r = grep({});
  EXPECT_EQ(paths(r), (std::vector<std::string>{t + "/docs/c.txt:1", t + "/src/a.py:1",
                                                t + "/src/deep/er/b.py:2", t + "/src/latin.py:2"}));
  EXPECT_EQ(r["truncated"], false);
  EXPECT_EQ(r["matches"][1]["content"], "one TODO");
  EXPECT_EQ(r["matches"][1]["byte_offset"], 4);
  EXPECT_EQ(r["matches"][2]["byte_offset"], 2);
  EXPECT_EQ(r["matches"][3]["byte_offset"], 11);
  // ignore_case; the trailing \r is removed.
  r = grep({{"ignore_case", true}, {"path", t + "/src/a.py"}});
  EXPECT_EQ(paths(r), (std::vector<std::string>{t + "/src/a.py:1", t + "/src/a.py:2"}));
  EXPECT_EQ(r["matches"][1]["content"], "Two todo");
  // Single-file root (recursive:false is fine for a file); glob on basename.
  r = grep({{"path", t + "/src/a.py"}, {"recursive", false}, {"include_glob", {"*.txt"}}});
  EXPECT_EQ(r["matches"].size(), 0u);
  // recursive:false with a directory root.
  e = CallErr("sandbox::fs::grep", P({{"path", t}, {"pattern", "x"}, {"recursive", false}}), "S210");
  EXPECT_EQ(e["message"],
            "recursive is false but " + t + " is a directory; pass a file, or set recursive to true");
  // Globs: basename at any depth, path patterns, **, excludes.
  EXPECT_EQ(paths(grep({{"include_glob", {"*.py"}}})),
            (std::vector<std::string>{t + "/src/a.py:1", t + "/src/deep/er/b.py:2", t + "/src/latin.py:2"}));
  EXPECT_EQ(paths(grep({{"include_glob", {"src/*.py"}}})),
            (std::vector<std::string>{t + "/src/a.py:1", t + "/src/latin.py:2"}));
  EXPECT_EQ(paths(grep({{"include_glob", {"src/**/b.py"}}})),
            (std::vector<std::string>{t + "/src/deep/er/b.py:2"}));
  EXPECT_EQ(paths(grep({{"include_glob", {"**"}}, {"exclude_glob", {"*.py"}}})),
            (std::vector<std::string>{t + "/docs/c.txt:1"}));
  EXPECT_EQ(paths(grep({{"exclude_glob", {"deep", "l?tin.py", "docs/**"}}})),
            (std::vector<std::string>{t + "/src/a.py:1", t + "/src/deep/er/b.py:2"}));
  // A root that links to a directory is walked (paths keep the given root).
  EXPECT_EQ(paths(grep({{"path", t + "/src/docslink"}})),
            (std::vector<std::string>{t + "/src/docslink/c.txt:1"}));
  // max_matches: default 10 000, explicit, 0 = unlimited.
  Sh("seq 1 10001 | sed 's/^/hit /' > " + odir_ + "/many");
  r = grep({{"path", odir_ + "/many"}, {"pattern", "hit"}});
  EXPECT_EQ(r["matches"].size(), 10000u);
  EXPECT_EQ(r["truncated"], true);
  r = grep({{"path", odir_ + "/many"}, {"pattern", "hit"}, {"max_matches", 0}});
  EXPECT_EQ(r["matches"].size(), 10001u);
  EXPECT_EQ(r["truncated"], false);
  r = grep({{"path", odir_ + "/many"}, {"pattern", "hit 1$"}, {"max_matches", 1}});
  EXPECT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["truncated"], false);  // the only match: not cut short
  r = grep({{"path", odir_ + "/many"}, {"pattern", "^hit 1"}, {"max_matches", 2}});
  EXPECT_EQ(r["matches"].size(), 2u);
  EXPECT_EQ(r["truncated"], true);
  // max_line_bytes: default 4096, cut at a UTF-8 boundary with …; 0 = no cut.
  Sh("{ printf 'TODO'; head -c 5000 /dev/zero | tr '\\0' x; echo; printf 'TODO\\303\\251\\303\\251\\n'; } "
     "> " +
     t + "/long");
  r = grep({{"path", t + "/long"}});
  EXPECT_EQ(r["matches"][0]["content"], "TODO" + std::string(4092, 'x') + "…");
  EXPECT_EQ(r["matches"][1]["content"], "TODOéé");
  r = grep({{"path", t + "/long"}, {"max_line_bytes", 5}});
  EXPECT_EQ(r["matches"][0]["content"], "TODOx…");
  EXPECT_EQ(r["matches"][1]["content"], "TODO…");
  r = grep({{"path", t + "/long"}, {"max_line_bytes", 0}});
  EXPECT_EQ(r["matches"][0]["content"].get<std::string>().size(), 5004u);
  // S211 (also a broken-link root), S216.
  e = CallErr("sandbox::fs::grep", P({{"path", t + "/none"}, {"pattern", "x"}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + t + "/none");
  CallErr("sandbox::fs::grep", P({{"path", TooLong(t)}, {"pattern", "x"}}), "S216");
}

// ======================================================================
// fs::sed
// ======================================================================

TEST_P(FunctionsSuite, FsSed) {
  ExpectDecodeRules("sandbox::fs::sed", {{"path", "/x"}, {"pattern", "p"}, {"replacement", "r"}}, {},
                    {"pattern", "replacement"});
  json g = {{"sandbox_id", kGhost}, {"pattern", "p"}, {"replacement", "r"}};
  for (const char* f : {"recursive", "regex", "first_only", "ignore_case"}) {
    ExpectBoolField("sandbox::fs::sed", With(g, {{"path", "/x"}}), f);
  }
  auto e = CallErr("sandbox::fs::sed", With(g, {{"path", "/x"}, {"files", {"/y"}}}), "S210");
  EXPECT_EQ(e["message"], "sed: give files or path, not both");
  e = CallErr("sandbox::fs::sed", g, "S210");
  EXPECT_EQ(e["message"], "sed: one of files or path is required");
  e = CallErr("sandbox::fs::sed", With(g, {{"files", json::array()}}), "S210");
  e = CallErr("sandbox::fs::sed", With(g, {{"path", "/x"}, {"pattern", ""}}), "S210");
  EXPECT_EQ(e["message"], "sed: pattern must not be empty");
  CallErr("sandbox::fs::sed", With(g, {{"path", "/x"}, {"pattern", ""}, {"regex", false}}), "S210");
  CallErr("sandbox::fs::sed", With(g, {{"path", "/x"}, {"pattern", "(x"}}), "S217");
  CallErr("sandbox::fs::sed", With(g, {{"files", "/x"}}), "S001");
  CallErr("sandbox::fs::sed", With(g, {{"path", ""}}), "S001");

  const std::string& t = dir_;
  Sh("cd " + t +
     " && mkdir -p w/sub && printf 'foo bar foo\\nFOO\\r\\nnone\\n' > w/a.txt && "
     "printf 'foo\\n' > w/sub/b.txt && printf 'nothing\\n' > w/c.txt && printf 'foo \\377\\n' > w/bad.txt && "
     "chmod 0640 w/a.txt && chown 12:34 w/a.txt && ln -s a.txt w/alink");
  auto sed = [&](json extra) {
    extra["pattern"] = extra.value("pattern", "foo");
    extra["replacement"] = extra.value("replacement", "X");
    return CallOk("sandbox::fs::sed", P(extra));
  };
  std::string inode_c = Sh("stat -c '%i %Y' " + t + "/w/c.txt");
  // Path form, defaults: regex, every match, case-sensitive, recursive;
  // every selected file listed in walk order, links not followed.
  json r = sed({{"path", t + "/w"}});
  EXPECT_EQ(r["total_replacements"], 3);
  ASSERT_EQ(r["results"].size(), 4u) << r.dump();
  EXPECT_EQ(r["results"][0], json({{"path", t + "/w/a.txt"}, {"replacements", 2}, {"success", true}}));
  EXPECT_EQ(r["results"][1]["path"], t + "/w/bad.txt");
  EXPECT_EQ(r["results"][1]["success"], false);
  EXPECT_EQ(r["results"][1]["replacements"], 0);
  EXPECT_TRUE(r["results"][1]["error"].is_string());
  EXPECT_EQ(r["results"][2], json({{"path", t + "/w/c.txt"}, {"replacements", 0}, {"success", true}}));
  EXPECT_EQ(r["results"][3], json({{"path", t + "/w/sub/b.txt"}, {"replacements", 1}, {"success", true}}));
  // Terminators kept; mode and owner kept; a zero-replacement file untouched.
  EXPECT_EQ(Sh("cd " + t + "/w && cat -A a.txt && stat -c '%a %u:%g' a.txt"),
            "X bar X$\nFOO^M$\nnone$\n640 12:34\n");
  EXPECT_EQ(Sh("stat -c '%i %Y' " + t + "/w/c.txt"), inode_c);
  // ignore_case, first_only (per file), recursive:false on a dir.
  r = sed({{"path", t + "/w/a.txt"},
           {"pattern", "(?:x|foo)"},
           {"ignore_case", true},
           {"first_only", true},
           {"replacement", "y"}});
  EXPECT_EQ(r["total_replacements"], 1);
  EXPECT_EQ(Sh("head -1 " + t + "/w/a.txt"), "y bar X\n");
  e = CallErr("sandbox::fs::sed",
              P({{"path", t + "/w"}, {"pattern", "x"}, {"replacement", ""}, {"recursive", false}}), "S210");
  EXPECT_EQ(e["message"],
            "recursive is false but " + t + "/w is a directory; pass a file, or set recursive to true");
  r = sed({{"path", t + "/w/a.txt"}, {"pattern", "FOO"}, {"recursive", false}});
  EXPECT_EQ(r["total_replacements"], 1);
  // Replacement expansion: $1, ${1}, $name, ${name}, $$, unknown group, bare $.
  Write(t + "/exp", "key=value\n");
  sed({{"files", {t + "/exp"}},
       {"pattern", "(?P<k>\\w+)=(\\w+)"},
       {"replacement", "$2${1}x $k ${k}_ $$ [$9] $-"}});
  EXPECT_EQ(Sh("cat " + t + "/exp"), "valuekeyx key key_ $ [] $-\n");
  // Literal mode: metacharacters are text, the replacement is verbatim.
  Write(t + "/lit", "a.b a+b $1\n");
  r = sed({{"files", {t + "/lit"}}, {"pattern", "a.b"}, {"replacement", "$1"}, {"regex", false}});
  EXPECT_EQ(r["total_replacements"], 1);
  EXPECT_EQ(Sh("cat " + t + "/lit"), "$1 a+b $1\n");
  // Empty matches replace at each position; first_only takes the first.
  Write(t + "/empty", "ab\n");
  sed({{"files", {t + "/empty"}}, {"pattern", "x*"}, {"replacement", "-"}});
  EXPECT_EQ(Sh("cat " + t + "/empty"), "-a-b-\n");
  // Files form: order kept, a link's target edited (the link stays), a
  // missing file reported per file; globs apply to path form only.
  Write(t + "/w/c.txt", "foo\n");
  r = sed({{"files", {t + "/w/c.txt", t + "/missing", t + "/w/alink"}}, {"pattern", "bar"}});
  ASSERT_EQ(r["results"].size(), 3u);
  EXPECT_EQ(r["results"][0]["replacements"], 0);
  EXPECT_EQ(r["results"][1], json({{"path", t + "/missing"},
                                   {"replacements", 0},
                                   {"success", false},
                                   {"error", "file not found: " + t + "/missing"}}));
  EXPECT_EQ(r["results"][2]["replacements"], 1);
  EXPECT_EQ(r["total_replacements"], 1);
  EXPECT_EQ(Stat(t + "/w/alink")["is_symlink"], true);
  EXPECT_EQ(Sh("head -1 " + t + "/w/a.txt"), "y X X\n");
  r = sed({{"path", t + "/w"}, {"include_glob", {"*.txt"}}, {"exclude_glob", {"sub/**", "bad.txt"}}});
  std::vector<std::string> got;
  for (const auto& x : r["results"]) got.push_back(x["path"]);
  EXPECT_EQ(got, (std::vector<std::string>{t + "/w/a.txt", t + "/w/c.txt"}));
  // S211 for a path-form root; S216.
  e = CallErr("sandbox::fs::sed", P({{"path", t + "/none"}, {"pattern", "x"}, {"replacement", ""}}), "S211");
  EXPECT_EQ(e["message"], "file not found: " + t + "/none");
  CallErr("sandbox::fs::sed", P({{"path", TooLong(t)}, {"pattern", "x"}, {"replacement", ""}}), "S216");
}

// ======================================================================
// Escape attempts
// ======================================================================

TEST_P(FunctionsSuite, EscapeWriteThroughSymlinkToRoot) {
  const std::string name = "skiff-escape-" + RandomTag();
  ASSERT_FALSE(std::filesystem::exists("/etc/" + name));
  Sh("ln -s / " + dir_ + "/l");
  // The link's "/" is the sandbox's root: the write lands in the sandbox's
  // own /etc (its private layer), never the host's.
  json w = Write(dir_ + "/l/etc/" + name, "inside\n");
  EXPECT_EQ(w["bytes_written"], 7);
  EXPECT_EQ(Sh("cat /etc/" + name), "inside\n");
  EXPECT_FALSE(std::filesystem::exists("/etc/" + name)) << "the write reached the host's /etc";
  // Through a link at the host canary's path: the host has that directory,
  // the sandbox does not, so the link dangles (S211, with or without
  // parents). Once the sandbox makes its own, the write lands there.
  Sh("ln -s " + Canary().dir + " " + dir_ + "/c");
  CallErr("sandbox::fs::write", P({{"path", dir_ + "/c/secret"}, {"content", "overwritten"}}), "S211");
  CallErr("sandbox::fs::write", P({{"path", dir_ + "/c/new"}, {"content", "x"}, {"parents", true}}), "S211");
  CallErr("sandbox::fs::mkdir", P({{"path", dir_ + "/c/new"}, {"parents", true}}), "S211");
  Sh("mkdir -p " + Canary().dir);
  Write(dir_ + "/c/secret", "overwritten");
  EXPECT_EQ(Sh("cat " + Canary().dir + "/secret"), "overwritten");
  // A link at the path itself is replaced, its target never written.
  Sh("ln -s /etc/" + name + "-2 " + dir_ + "/direct");
  Write(dir_ + "/direct", "y");
  EXPECT_EQ(Sh("test ! -e /etc/" + name + "-2 && echo ok"), "ok\n");
  // The same through fs::mkdir and fs::mv.
  CallOk("sandbox::fs::mkdir", P({{"path", dir_ + "/l/etc/" + name + ".d"}}));
  CallOk("sandbox::fs::mv",
         P({{"src", dir_ + "/l/etc/" + name}, {"dst", dir_ + "/l/etc/" + name + ".moved"}}));
  EXPECT_FALSE(std::filesystem::exists("/etc/" + name + ".d"));
  EXPECT_FALSE(std::filesystem::exists("/etc/" + name + ".moved"));
  Sh("rm -rf /etc/" + name + "* " + Canary().dir);
}

TEST_P(FunctionsSuite, EscapeReadDotDotShadow) {
  const std::string host_shadow = Slurp("/etc/shadow");
  const std::string marker = "sandbox-shadow-" + RandomTag() + "\n";
  Write("/etc/shadow", marker, {{"mode", "0640"}});
  Sh("ln -s ../../../../../../etc/shadow " + dir_ + "/sh");
  for (const std::string& p :
       {std::string("../../../../etc/shadow"), std::string("/tmp/../../../../etc/shadow"),
        dir_ + "/../../../../../etc/shadow", dir_ + "/sh"}) {
    json r = CallOk("sandbox::fs::read", P({{"path", p}}));
    EXPECT_EQ(r["body"], marker) << p;
    EXPECT_NE(r.value("body", ""), host_shadow) << p;
  }
  json g = CallOk("sandbox::fs::grep", P({{"path", "../../../../etc/shadow"}, {"pattern", "root"}}));
  EXPECT_EQ(g["matches"].size(), 0u) << g.dump();  // the sandbox's file has no root line now
  EXPECT_EQ(Slurp("/etc/shadow"), host_shadow);
  // Through a link at the canary's path: the sandbox has no such file.
  Sh("ln -s " + Canary().file + " " + dir_ + "/canary");
  CallErr("sandbox::fs::read", P({{"path", dir_ + "/canary"}}), "S211");
  CallErr("sandbox::fs::read", P({{"path", "../../../.." + Canary().file}}), "S211");
}

TEST_P(FunctionsSuite, EscapeMvDirectoryContainingRootSymlink) {
  Sh("mkdir -p " + dir_ + "/d && cd " + dir_ + "/d && ln -s / root && ln -s " + Canary().dir +
     " host && printf f > f");
  std::string etc_before = Sh("ls /etc | md5sum");
  // Across filesystems (copy path: links must be copied as links) ...
  CallOk("sandbox::fs::mv", P({{"src", dir_ + "/d"}, {"dst", odir_ + "/d"}}));
  // ... and back within one (rename).
  CallOk("sandbox::fs::mv", P({{"src", odir_ + "/d"}, {"dst", odir_ + "/e"}}));
  json ls = CallOk("sandbox::fs::ls", P({{"path", odir_ + "/e"}}));
  ASSERT_EQ(ls["entries"].size(), 3u) << ls.dump();
  for (const auto& e : ls["entries"]) EXPECT_EQ(e["is_symlink"], e["name"] != "f") << e.dump();
  EXPECT_EQ(Sh("cd " + odir_ + "/e && readlink root host"), "/\n" + Canary().dir + "\n");
  EXPECT_EQ(Sh("ls /etc | md5sum"), etc_before);
  EXPECT_EQ(Sh("test ! -e " + dir_ + "/d && test -f /etc/passwd && echo ok"), "ok\n");
  // With overwrite onto a directory that holds such links: only links go.
  Sh("mkdir " + odir_ + "/empty");
  CallOk("sandbox::fs::mv", P({{"src", odir_ + "/e"}, {"dst", dir_ + "/e2"}, {"overwrite", true}}));
  CallOk("sandbox::fs::rm", P({{"path", dir_ + "/e2"}, {"recursive", true}}));
  EXPECT_EQ(Sh("test -f /etc/passwd && test -d /usr/bin && echo ok"), "ok\n");
}

TEST_P(FunctionsSuite, EscapeChmodRecursiveOverAgentSymlink) {
  Sh("mkdir -p " + dir_ + "/t/s && cd " + dir_ +
     "/t && : > a && : > s/b && ln -s /proc/1/exe agent && "
     "ln -s " +
     Canary().agent + " hostagent && ln -s / root && ln -s " + Canary().file + " canary");
  std::string inside = "stat -L -c %a /proc/1/exe; stat -c %a /etc /usr/bin/env /etc/passwd";
  std::string before = Sh(inside);
  json r = CallOk("sandbox::fs::chmod",
                  P({{"path", dir_ + "/t"}, {"mode", "0777"}, {"recursive", true}, {"uid", 4242}}));
  EXPECT_EQ(r["updated"], 4);  // t, a, s, s/b: no link, no link target
  EXPECT_EQ(Sh(inside), before);
  EXPECT_EQ(Sh("cd " + dir_ + "/t && stat -c '%a %u' a s s/b"), "777 4242\n777 4242\n777 4242\n");
  EXPECT_EQ(Sh("stat -c %u /etc /proc/1/exe 2>/dev/null | sort -u"), "0\n");
  // Non-recursive follows the link; to /proc/1/exe that is the sandbox's own
  // agent (inside the VM), or, in a jail, a host file the sandbox's root
  // does not own: refused. Either way the host binary keeps its mode.
  CallAny("sandbox::fs::chmod",
          P({{"path", dir_ + "/t/agent"}, {"mode", before.substr(0, before.find('\n'))}}), {"S215", "S211"});
  CallAny("sandbox::fs::chmod", P({{"path", dir_ + "/t/hostagent"}, {"mode", "0700"}}), {"S211"});
  CallAny("sandbox::fs::chmod", P({{"path", dir_ + "/t/canary"}, {"mode", "0777"}}), {"S211"});
}

TEST_P(FunctionsSuite, EscapeSymlinkSwappedBetweenCheckAndUse) {
  // A loop inside the sandbox swaps race/d between a real directory (with a
  // file "needle") and a link to "/" while fs calls act on race/d.
  Sh("mkdir -p " + dir_ + "/race/d && printf needle > " + dir_ + "/race/d/f");
  std::string before = Sh("stat -c '%a %u' /etc /etc/passwd /usr/bin/env /bin/sh; ls / | md5sum");
  std::atomic<bool> done{false};
  json swapper;
  std::thread t([&] {
    swapper = CallOk("sandbox::exec",
                     P({{"argv",
                         {"bash", "-c",
                          "cd " + dir_ +
                              "/race; end=$((SECONDS+6)); n=0; while [ $SECONDS -lt $end ]; do "
                              "rm -rf d; mkdir d; printf needle > d/f; mv -T d d.tmp 2>/dev/null; "
                              "ln -s / d; sleep 0.01; rm -f d; mv -T d.tmp d 2>/dev/null; n=$((n+1)); done; "
                              "echo $n"}},
                        {"timeout_ms", 60000}}));
    done = true;
  });
  const std::set<std::string> fs_codes = {"S211", "S212", "S213", "S214", "S216"};
  int rounds = 0;
  const std::string rd = dir_ + "/race";
  while (!done) {
    ++rounds;
    CallAny("sandbox::fs::chmod", P({{"path", rd}, {"mode", "0700"}, {"recursive", true}, {"uid", 99}}),
            fs_codes);
    json g = CallAny("sandbox::fs::grep", P({{"path", rd}, {"pattern", "needle|root:"}}), fs_codes);
    for (const auto& m : g.value("matches", json::array())) {
      EXPECT_THAT(m["path"].get<std::string>(), ::testing::AnyOf(rd + "/d/f", rd + "/d.tmp/f")) << m.dump();
    }
    json s = CallAny("sandbox::fs::sed", P({{"path", rd}, {"pattern", "root:"}, {"replacement", "pwned:"}}),
                     fs_codes);
    EXPECT_EQ(s.value("total_replacements", 0), 0) << s.dump();
    CallAny("sandbox::fs::write", P({{"path", rd + "/d/w"}, {"content", "w"}}), fs_codes);
    CallAny("sandbox::fs::mv", P({{"src", rd + "/d"}, {"dst", odir_ + "/m" + std::to_string(rounds)}}),
            fs_codes);
    CallAny("sandbox::fs::rm", P({{"path", rd + "/d"}, {"recursive", true}}), fs_codes);
    CallAny("sandbox::fs::rm", P({{"path", rd + "/d.tmp"}, {"recursive", true}}), fs_codes);
  }
  t.join();
  EXPECT_GE(rounds, 3);
  Sh("rm -f /w");  // fs::write follows a linked parent: it may have landed in the sandbox's /
  EXPECT_GT(std::stoi(swapper.value("stdout", "0")), 0) << swapper.dump();
  // Nothing outside race/ changed: modes, owners and the root listing. The
  // recursive moves either took a directory or a link; the sandbox's "/"
  // still has everything.
  EXPECT_EQ(Sh("stat -c '%a %u' /etc /etc/passwd /usr/bin/env /bin/sh; ls / | md5sum"), before);
  EXPECT_EQ(Sh("grep -c '^root:' /etc/passwd"), "1\n");
  // Moves only ever moved the race tree's entries (a link stays a link).
  json ls = CallOk("sandbox::fs::ls", P({{"path", odir_}}));
  for (const auto& e : ls["entries"]) {
    if (e["is_symlink"] == true) {
      EXPECT_EQ(Sh("readlink " + odir_ + "/" + e["name"].get<std::string>()), "/\n");
    }
  }
  CallOk("sandbox::fs::rm", P({{"path", odir_}, {"recursive", true}}));
}

TEST_P(FunctionsSuite, GrepOnSymlinkLoopTerminates) {
  Sh("cd " + dir_ +
     " && mkdir -p g/sub && printf 'needle\\n' > g/f && ln -s . g/self && ln -s .. g/up && "
     "ln -s " +
     dir_ +
     "/g g/abs && ln -s ../../g g/sub/back && ln -s / g/root && ln -s l2 g/l1 && ln -s l1 g/l2 && "
     "ln -s g gl");
  auto t0 = Clock::now();
  json r = CallOk("sandbox::fs::grep", P({{"path", dir_ + "/g"}, {"pattern", "needle"}}));
  EXPECT_EQ(r["matches"],
            json::array({{{"path", dir_ + "/g/f"}, {"line", 1}, {"content", "needle"}, {"byte_offset", 0}}}));
  r = CallOk("sandbox::fs::grep", P({{"path", dir_ + "/gl"}, {"pattern", "needle"}}));
  ASSERT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["matches"][0]["path"], dir_ + "/gl/f");
  r = CallOk("sandbox::fs::grep",
             P({{"path", dir_ + "/g/self"}, {"pattern", "needle"}, {"include_glob", {"**"}}}));
  EXPECT_EQ(r["matches"].size(), 1u);
  json s =
      CallOk("sandbox::fs::sed", P({{"path", dir_ + "/gl"}, {"pattern", "needle"}, {"replacement", "pin"}}));
  EXPECT_EQ(s["total_replacements"], 1);
  CallErr("sandbox::fs::grep", P({{"path", dir_ + "/g/l1"}, {"pattern", "x"}}), "S216");
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0);
}

TEST_P(FunctionsSuite, SedInvalidRegexIsS217AndRewritesNothing) {
  Write(dir_ + "/s/a.txt", "a(b\n", {{"parents", true}});
  Write(dir_ + "/s/b.txt", "(((\n");
  std::string before = Sh("cd " + dir_ + "/s && stat -c '%n %i %Y %s' a.txt b.txt && ls -A");
  for (const std::string& pat :
       {std::string("("), std::string("a(b"), std::string("x{2,1}"), std::string("\\")}) {
    auto e = CallErr("sandbox::fs::sed", P({{"path", dir_ + "/s"}, {"pattern", pat}, {"replacement", "Z"}}),
                     "S217");
    EXPECT_THAT(e["message"].get<std::string>(), StartsWith("invalid regex pattern: "));
    CallErr("sandbox::fs::sed",
            P({{"files", {dir_ + "/s/a.txt", dir_ + "/s/b.txt"}}, {"pattern", pat}, {"replacement", "Z"}}),
            "S217");
    CallErr("sandbox::fs::sed",
            P({{"path", dir_ + "/s"}, {"pattern", pat}, {"replacement", "Z"}, {"ignore_case", true}}),
            "S217");
  }
  EXPECT_EQ(Sh("cd " + dir_ + "/s && stat -c '%n %i %Y %s' a.txt b.txt && ls -A"), before);
  EXPECT_EQ(Sh("cat " + dir_ + "/s/a.txt " + dir_ + "/s/b.txt"), "a(b\n(((\n");
  // The same text as a literal is fine.
  json r = CallOk("sandbox::fs::sed",
                  P({{"path", dir_ + "/s"}, {"pattern", "("}, {"replacement", "Z"}, {"regex", false}}));
  EXPECT_EQ(r["total_replacements"], 4);
}

INSTANTIATE_TEST_SUITE_P(Backends, FunctionsSuite, ::testing::Values("jail", "microvm"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace skiff::e2e
