// The code-interpreter preset on a real backend (one ctest entry per
// backend): an E2B create of `code-interpreter-v1` starts the image's
// server and answers once it is ready; inside the sandbox, a client on
// 127.0.0.1:49999 then sees the wire protocol of @e2b/code-interpreter
// (docs/e2b.md#code-interpreter): state that survives between executions,
// streamed stdout, errors, a matplotlib PNG, contexts and 404s.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2b/api.h"
#include "sandbox/backends.h"

namespace skiff {
namespace {

using nlohmann::json;

struct Captured final : e2b::ResponseWriter {
  int status = 0;
  std::string body;
  bool Start(int s, std::string_view, const e2b::Headers&) override {
    status = s;
    return true;
  }
  bool Write(std::string_view b) override {
    body.append(b);
    return true;
  }
  bool Alive() override { return true; }
  void Drop() override {}
};

// Runs inside the sandbox: each step prints "<step>: <what it saw>".
constexpr char kClient[] = R"PY(
import base64, json, sys, urllib.error, urllib.request

def call(method, path, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request("http://127.0.0.1:49999" + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", e.read().decode()

def run(code, **kw):
    kw["code"] = code
    status, ctype, text = call("POST", "/execute", kw)
    lines = [json.loads(l) for l in text.splitlines() if l.strip()]
    assert lines and lines[-1] == {"type": "end_of_execution"}, text
    return status, ctype, lines

# A kernel may send one print's output as several stream messages (it
# flushes on a timer): what a step printed is the chunks joined.
def stdout_of(lines):
    return "".join(l["text"] for l in lines if l["type"] == "stdout")

def show(step, value):
    print("%s: %s" % (step, value))
    sys.stdout.flush()

s, ctype, _ = run("x = 41")
show("status", s)
show("type", ctype)
_, _, lines = run("x + 1")
show("state", [l.get("text") for l in lines if l["type"] == "result" and l.get("is_main_result")])
show("count", [l["execution_count"] for l in lines if l["type"] == "number_of_executions"])
_, _, lines = run("print('hi')")
show("stdout", repr(stdout_of(lines)))
_, _, lines = run("1/0")
show("error", [(l["name"], l["value"]) for l in lines if l["type"] == "error"])
_, _, lines = run("import os\nprint(os.environ.get('SKIFF_T', 'unset'))", env_vars={"SKIFF_T": "set"})
show("env", stdout_of(lines).strip())
_, _, lines = run("print(os.environ.get('SKIFF_T', 'unset'))")
show("env_after", stdout_of(lines).strip())
_, _, lines = run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
pngs = [base64.b64decode(l["png"]) for l in lines if l["type"] == "result" and "png" in l]
show("png", [p[:8] == b"\x89PNG\r\n\x1a\n" and len(p) > 1000 for p in pngs])

s, _, body = call("POST", "/contexts", {"language": "python", "cwd": "/tmp"})
ctx = json.loads(body)
show("context", (s, ctx["language"], ctx["cwd"], len(ctx["id"]) > 0))
_, _, lines = run("import os\nprint(os.getcwd())\ny = 7", context_id=ctx["id"])
show("context_cwd", stdout_of(lines).strip())
_, _, lines = run("'x' in dir()", context_id=ctx["id"])
show("isolated", [l.get("text") for l in lines if l["type"] == "result"])
s, _, body = call("GET", "/contexts")
show("listed", ctx["id"] in [c["id"] for c in json.loads(body)])
s, _, _ = call("POST", "/contexts/%s/restart" % ctx["id"])
show("restart", s)
_, _, lines = run("y", context_id=ctx["id"])
show("restarted", [l["name"] for l in lines if l["type"] == "error"])
s, _, _ = call("DELETE", "/contexts/%s" % ctx["id"])
show("delete", s)
s, _, body = call("GET", "/contexts")
show("listed_after", ctx["id"] in [c["id"] for c in json.loads(body)])
show("unknown", call("POST", "/execute", {"code": "1", "context_id": "nope"})[0])
show("unknown_delete", call("DELETE", "/contexts/nope")[0])
show("bad_json", call("POST", "/execute", b"{nope")[0])
show("bad_language", call("POST", "/execute", {"code": "1", "language": "cobol"})[0])
)PY";

class CodeInterpreter : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root on this host";
    setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
    Config cfg;
    cfg.allow_all_images = true;
    cfg.isolation = GetParam();
    cfg.default_memory_mb = 1024;
    auto m = MakeSandboxManager(cfg);
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    mgr_ = std::move(m).value();
    e2b::Options options;
    options.isolation = GetParam();
    api_ = std::make_unique<e2b::Api>(
        *mgr_,
        [this](std::string_view key) -> SandboxService* { return key == "key" ? mgr_.get() : nullptr; },
        options);
  }
  void TearDown() override {
    api_.reset();
    if (mgr_)
      for (const auto& e : mgr_->List()) (void)mgr_->Stop(e.sandbox_id, true);
  }

  Captured Control(const std::string& method, const std::string& path, const std::string& body) {
    e2b::Request r;
    r.method = method;
    r.path = path;
    r.headers["x-api-key"] = "key";
    Captured c;
    api_->Handle(r, body, c);
    return c;
  }

  std::unique_ptr<SandboxManager> mgr_;
  std::unique_ptr<e2b::Api> api_;
};

TEST_P(CodeInterpreter, RunCodeProtocolInsideTheSandbox) {
  // The create builds the preset when it is missing (auto_install), starts
  // the server and waits for its readiness check.
  Captured created = Control("POST", "/v2/sandboxes", R"({"templateID":"code-interpreter-v1"})");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json::parse(created.body)["sandboxID"];

  ExecSpec es;
  es.sandbox_id = id;
  es.argv = {"/usr/bin/python3", "-c", kClient};
  es.timeout_ms = 600000;
  auto r = mgr_->Exec(es);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->exit_code, 0) << r->stdout_text << r->stderr_text;
  std::map<std::string, std::string> seen;
  std::istringstream lines(r->stdout_text);
  for (std::string line; std::getline(lines, line);) {
    auto colon = line.find(": ");
    if (colon != std::string::npos) seen[line.substr(0, colon)] = line.substr(colon + 2);
  }
  const std::map<std::string, std::string> want = {
      {"status", "200"},
      {"type", "application/x-ndjson"},
      {"state", "['42']"},
      {"count", "[2]"},
      {"stdout", "'hi\\n'"},
      {"error", "[('ZeroDivisionError', 'division by zero')]"},
      {"env", "set"},
      {"env_after", "unset"},
      {"png", "[True]"},
      {"context", "(200, 'python', '/tmp', True)"},
      {"context_cwd", "/tmp"},
      {"isolated", "['False']"},
      {"listed", "True"},
      {"restart", "204"},
      {"restarted", "['NameError']"},
      {"delete", "204"},
      {"listed_after", "False"},
      {"unknown", "404"},
      {"unknown_delete", "404"},
      {"bad_json", "400"},
      {"bad_language", "400"},
  };
  for (const auto& [step, value] : want) EXPECT_EQ(seen[step], value) << step << "\n" << r->stdout_text;

  // The server is a live process of the sandbox, tagged as the service.
  proto::ProcListRequest list;
  auto procs = mgr_->Process(id, list);
  ASSERT_TRUE(procs.ok()) << procs.error().ToString();
  EXPECT_NE(procs->dump().find("service:code-interpreter"), std::string::npos) << procs->dump();

  // Killing the sandbox leaves no server behind: a new sandbox starts its own.
  EXPECT_EQ(Control("DELETE", "/sandboxes/" + id, "").status, 204);
  EXPECT_FALSE(mgr_->TenantOf(id).has_value());
}

INSTANTIATE_TEST_SUITE_P(Backends, CodeInterpreter, ::testing::Values("jail", "microvm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace skiff
