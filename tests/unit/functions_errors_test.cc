// Error wire objects (docs/errors.md): key order, HTTP statuses, types,
// retryability, fix notes, and the sandbox::run step wrapper.
#include <gtest/gtest.h>

#include "functions/engine_errors.h"
#include "functions/errors.h"
#include "functions/registry.h"
#include "sandbox/run_step.h"

namespace skiff {
namespace {

using nlohmann::json;

TEST(ErrorWire, SortedKeysAndFields) {
  Error e(Code::kS002, "sandbox not found: 3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11");
  json w = ErrorToWire(e, "docs/errors.md");
  EXPECT_EQ(w.dump(), R"({"code":"S002","docs_url":"docs/errors.md#S002","fix":null,)"
                      R"("fix_note":"this sandbox no longer exists; call sandbox::create to get a new one",)"
                      R"("message":"sandbox not found: 3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11",)"
                      R"("retryable":false,"type":"validation"})");
  EXPECT_FALSE(w.contains("details"));
}

TEST(ErrorWire, SpecExampleParentsFix) {
  json w = ErrorToWire(ParentsMissing("/project/a"), "docs/errors.md");
  EXPECT_EQ(w, json::parse(R"({
    "code": "S211", "docs_url": "docs/errors.md#S211", "fix": {"parents": true},
    "fix_note": "merge fix into the request you sent and send it again; parents: true creates the missing directories",
    "message": "parent directory not found: /project/a", "retryable": false, "type": "filesystem"})"));
  // Plain S211 has a null note.
  json plain = ErrorToWire(Error(Code::kS211, "file not found: /nope"), "docs/errors.md");
  EXPECT_TRUE(plain["fix_note"].is_null());
  EXPECT_TRUE(plain["fix"].is_null());
}

TEST(ErrorWire, DetailsKeyOrder) {
  Error e(Code::kS200, "exec timed out after 5 ms");
  e.set_details({{"stdout", "a"},
                 {"stderr", ""},
                 {"duration_ms", 5},
                 {"stdout_truncated", false},
                 {"stderr_truncated", false}});
  json w = ErrorToWire(e, "https://example.org/errors");
  std::vector<std::string> keys;
  for (auto it = w.begin(); it != w.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"code", "details", "docs_url", "fix", "fix_note", "message",
                                            "retryable", "type"}));
  EXPECT_EQ(w["docs_url"], "https://example.org/errors#S200");
  EXPECT_EQ(w["details"]["stdout"], "a");
  EXPECT_EQ(w["type"], "execution");
  // the dumped text keeps the same order
  std::string d = w.dump();
  EXPECT_LT(d.find("\"code\""), d.find("\"details\""));
  EXPECT_LT(d.find("\"details\""), d.find("\"docs_url\""));
}

TEST(ErrorWire, FixNoteOverride) {
  Error e(Code::kS300, "platform failure: boot: x");
  e.set_fix_note("custom");
  EXPECT_EQ(ErrorToWire(e, "d")["fix_note"], "custom");
  e.set_fix_note(std::string());
  EXPECT_TRUE(ErrorToWire(e, "d")["fix_note"].is_null());
}

struct Row {
  Code code;
  const char* type;
  int http;
  bool retryable;
};

TEST(ErrorTable, TypesStatusesRetryable) {
  const std::vector<Row> rows = {
      {Code::kS001, "validation", 400, false}, {Code::kS002, "validation", 404, false},
      {Code::kS003, "validation", 429, false}, {Code::kS004, "validation", 409, false},
      {Code::kS005, "validation", 409, false}, {Code::kS006, "validation", 409, false},
      {Code::kS007, "validation", 404, false}, {Code::kS008, "validation", 409, false},
      {Code::kS100, "config", 400, false},     {Code::kS101, "internal", 503, false},
      {Code::kS102, "transient", 503, true},   {Code::kS200, "execution", 504, false},
      {Code::kS210, "filesystem", 400, false}, {Code::kS211, "filesystem", 404, false},
      {Code::kS212, "filesystem", 409, false}, {Code::kS213, "filesystem", 409, false},
      {Code::kS214, "filesystem", 409, false}, {Code::kS215, "filesystem", 403, false},
      {Code::kS216, "filesystem", 500, false}, {Code::kS217, "filesystem", 400, false},
      {Code::kS218, "transient", 503, true},   {Code::kS219, "filesystem", 500, false},
      {Code::kS220, "validation", 404, false}, {Code::kS221, "validation", 409, false},
      {Code::kS222, "execution", 502, false},  {Code::kS300, "platform", 500, false},
      {Code::kS301, "platform", 502, false},   {Code::kS400, "config", 429, false},
  };
  ASSERT_EQ(rows.size(), AllCodes().size());
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(CodeName(r.code)));
    EXPECT_EQ(ErrorType(r.code), r.type);
    EXPECT_EQ(HttpStatus(r.code), r.http);
    EXPECT_EQ(Retryable(r.code), r.retryable);
    json w = ErrorToWire(Error(r.code, "m"), "docs/errors.md");
    EXPECT_EQ(w["type"], r.type);
    EXPECT_EQ(w["retryable"], r.retryable);
    EXPECT_EQ(w["code"], std::string(CodeName(r.code)));
  }
}

TEST(ErrorTable, FixNotesExactText) {
  auto note = [](Code c) { return ErrorToWire(Error(c, "m"), "d")["fix_note"]; };
  EXPECT_EQ(note(Code::kS001), "the message names the field and what is expected");
  EXPECT_EQ(note(Code::kS002), "this sandbox no longer exists; call sandbox::create to get a new one");
  EXPECT_EQ(note(Code::kS004), "this sandbox no longer exists; call sandbox::create to get a new one");
  EXPECT_EQ(note(Code::kS003),
            "every exec slot of this sandbox is busy (default 4); a slot frees only when a running exec "
            "exits or hits its timeout_ms, so waiting does not help if those commands are servers, "
            "installs or watchers: start such commands detached (nohup cmd > /tmp/cmd.log 2>&1 &) and "
            "read the log with sandbox::fs::read, or stop this sandbox and create a new one; retrying "
            "after a pause only helps when the running commands are short");
  EXPECT_EQ(note(Code::kS100),
            "pick one of the images named in the message; others must be added by the operator "
            "(custom_images and image_allowlist)");
  EXPECT_EQ(note(Code::kS101), "an operator must install this image on the host or turn on auto_install");
  EXPECT_EQ(note(Code::kS102), "probably temporary: wait a little and retry");
  EXPECT_EQ(note(Code::kS200),
            "give the command more time with timeout_ms (the operator's max_exec_timeout_ms caps it) "
            "or split the work into shorter commands");
  EXPECT_EQ(note(Code::kS300),
            "platform failure; resending the same call is unlikely to help; check the skiffd log");
  EXPECT_EQ(note(Code::kS400),
            "a configured limit was hit: stop sandboxes you no longer need, lower cpus/memory_mb, or "
            "ask the operator to raise the limit");
  EXPECT_EQ(note(Code::kS222),
            "start a server listening on that port inside the sandbox (on 127.0.0.1, ::1 or all addresses), "
            "then retry");
  for (Code c : {Code::kS210, Code::kS211, Code::kS212, Code::kS213, Code::kS214, Code::kS215, Code::kS216,
                 Code::kS217, Code::kS218, Code::kS219, Code::kS221}) {
    EXPECT_TRUE(note(c).is_null()) << CodeName(c);
  }
}

TEST(EngineFault, WireCodesAndStatuses) {
  EngineFault nf = EngineFault::FunctionNotFound("x::y");
  EXPECT_EQ(nf.ToJson().dump(),
            R"({"code":"function_not_found","message":"function 'x::y' is not provided by skiff"})");
  EXPECT_EQ(nf.http_status(), 404);
  EngineFault bad = EngineFault::InvalidArguments("function_id must be a string");
  EXPECT_EQ(bad.ToJson().dump(), R"({"code":"INVALID_ARGUMENTS","message":"function_id must be a string"})");
  EXPECT_EQ(bad.http_status(), 400);
  EngineFault missing = EngineFault::NotFound("function 'a' not found");
  EXPECT_EQ(missing.ToJson().dump(), R"({"code":"NOT_FOUND","message":"function 'a' not found"})");
  EXPECT_EQ(missing.http_status(), 404);
  EXPECT_EQ(InvocationFailed(R"({"code":"S001"})").dump(),
            R"({"code":"invocation_failed","message":"handler error: {\"code\":\"S001\"}"})");
}

TEST(RunStep, WrapsInnerError) {
  Error inner(Code::kS200, "exec timed out after 100 ms");
  inner.set_details({{"stdout", "partial"}});
  Error w = WrapRunStep(inner, kRunStepExec, "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11");
  json j = ErrorToWire(w, "docs/errors.md");
  EXPECT_EQ(j["code"], "S200");
  EXPECT_EQ(j["type"], "execution");
  EXPECT_EQ(j["retryable"], false);
  EXPECT_EQ(j["docs_url"], "docs/errors.md#S200");
  EXPECT_EQ(j["details"]["stdout"], "partial");
  EXPECT_EQ(j["message"],
            "during sandbox::run step `exec` (sandbox_id=3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11): exec "
            "timed out after 100 ms");
  EXPECT_EQ(j["fix"], json::parse(R"({"context":"during sandbox::run step `exec`",
      "sandbox_id":"3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11","inner_code":"S200"})"));
  EXPECT_TRUE(j["fix_note"].is_null());
  EXPECT_EQ(HttpStatus(w.code()), 504);
}

TEST(RunStep, CreateStepHasEmptyIdAndReplacesFix) {
  Error inner = ParentsMissing("/x");  // a fix that must be replaced
  Error w = WrapRunStep(inner, kRunStepCreate, "");
  json j = ErrorToWire(w, "d");
  EXPECT_EQ(j["message"], "during sandbox::run step `create` (sandbox_id=): parent directory not found: /x");
  EXPECT_EQ(j["fix"]["sandbox_id"], "");
  EXPECT_EQ(j["fix"]["inner_code"], "S211");
  EXPECT_FALSE(j["fix"].contains("parents"));
  EXPECT_TRUE(j["fix_note"].is_null());
  EXPECT_FALSE(j.contains("details"));
  // retryability of the inner code is kept
  EXPECT_EQ(ErrorToWire(WrapRunStep(Error(Code::kS102, "auto-install failed"), kRunStepCreate, ""),
                        "d")["retryable"],
            true);
  EXPECT_EQ(std::string(kRunStepSiblingFile), "fs::write (sibling file)");
  EXPECT_EQ(std::string(kRunStepCode), "fs::write (code)");
}

TEST(RunStep, LangTable) {
  struct L {
    const char* lang;
    const char* prog;
    const char* file;
    bool bash;
  };
  for (const L& l : std::vector<L>{{"node", "node", "/tmp/run.js", false},
                                   {"js", "node", "/tmp/run.js", false},
                                   {"javascript", "node", "/tmp/run.js", false},
                                   {"python", "python3", "/tmp/run.py", false},
                                   {"py", "python3", "/tmp/run.py", false},
                                   {"shell", "/bin/sh", "/tmp/run.sh", false},
                                   {"sh", "/bin/sh", "/tmp/run.sh", false},
                                   {"bash", "/bin/bash", "/tmp/run.sh", true},
                                   {"Python", "Python", "/tmp/run.txt", false},
                                   {"/usr/bin/ruby", "/usr/bin/ruby", "/tmp/run.txt", false}}) {
    RunLang r = LangFor(l.lang);
    EXPECT_EQ(r.program, l.prog) << l.lang;
    EXPECT_EQ(r.file, l.file) << l.lang;
    EXPECT_EQ(r.bash, l.bash) << l.lang;
  }
}

}  // namespace
}  // namespace skiff
