// Request decoding: S001 message forms, env shapes, base64, mode strings,
// UUID forms, the shell-line splitter and command-shape resolution.
#include <gtest/gtest.h>

#include "functions/decode.h"

namespace skiff::fn {
namespace {

using nlohmann::json;

std::string Msg(const Error& e) { return e.message(); }

template <typename T>
Error Err(Result<T> r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return Error(Code::kS300, "unexpected success");
  return std::move(r).error();
}

// ---- payloads and field reader ----

TEST(Payload, NullAndObjectAccepted) {
  auto r = NormalizePayload(nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, json::object());
  EXPECT_EQ(*NormalizePayload(json{{"a", 1}}), (json{{"a", 1}}));
}

TEST(Payload, NonObjectIsS001WithType) {
  struct Case {
    json v;
    std::string type;
  };
  for (const auto& c : std::vector<Case>{
           {json::array(), "array"}, {"x", "string"}, {1, "number"}, {1.5, "number"}, {true, "boolean"}}) {
    Error e = Err(NormalizePayload(c.v));
    EXPECT_EQ(e.code(), Code::kS001);
    EXPECT_EQ(Msg(e), "invalid request: payload must be a JSON object, got " + c.type);
  }
}

TEST(Fields, MissingRequired) {
  json p = {{"other", 1}};
  Error e = Err(Fields(p).RequiredString("image"));
  EXPECT_EQ(e.code(), Code::kS001);
  EXPECT_EQ(Msg(e), "invalid request: missing required field 'image' (expected string)");
  // null counts as missing for a required field
  json q = {{"image", nullptr}};
  EXPECT_EQ(Msg(Err(Fields(q).RequiredString("image"))),
            "invalid request: missing required field 'image' (expected string)");
}

TEST(Fields, WrongTypeNamesFieldAndTypes) {
  json p = {{"content", 5}, {"flag", "yes"}, {"arr", {1}}, {"list", "x"}};
  EXPECT_EQ(Msg(Err(Fields(p, "files[2]").RequiredString("content"))),
            "invalid request: field 'files[2].content': expected string, got number");
  EXPECT_EQ(Msg(Err(Fields(p).OptBool("flag", false))),
            "invalid request: field 'flag': expected boolean, got string");
  EXPECT_EQ(Msg(Err(Fields(p).OptStringArray("arr"))),
            "invalid request: field 'arr[0]': expected string, got number");
  EXPECT_EQ(Msg(Err(Fields(p).OptStringArray("list"))),
            "invalid request: field 'list': expected array of strings, got string");
}

TEST(Fields, NullOptionalMeansAbsent) {
  json p = {{"name", nullptr}, {"wait", nullptr}, {"n", nullptr}, {"a", nullptr}};
  Fields f(p);
  EXPECT_FALSE(f.OptString("name")->has_value());
  EXPECT_TRUE(*f.OptBool("wait", true));
  EXPECT_FALSE(f.OptUint("n")->has_value());
  EXPECT_TRUE(f.OptStringArray("a")->empty());
}

TEST(Fields, IntegersMustBeJsonIntegers) {
  json p = json::parse(R"j({"a":1.0,"b":1e3,"c":-1,"d":18446744073709551615,"e":4294967296,
                          "f":4294967295,"g":"1","h":0})j");
  Fields f(p);
  EXPECT_EQ(Msg(Err(f.OptUint("a"))), "invalid request: field 'a': expected integer ≥ 0, got number");
  EXPECT_EQ(Msg(Err(f.OptUint("b"))), "invalid request: field 'b': expected integer ≥ 0, got number");
  EXPECT_EQ(Msg(Err(f.OptUint("c"))), "invalid request: field 'c': expected integer ≥ 0, got -1");
  EXPECT_EQ(**f.OptUint("d"), 18446744073709551615ULL);
  EXPECT_EQ(Msg(Err(f.OptUint("e", kMax32))),
            "invalid request: field 'e': value 4294967296 exceeds 4294967295");
  EXPECT_EQ(**f.OptUint("f", kMax32), 4294967295ULL);
  EXPECT_EQ(Msg(Err(f.OptUint("g"))), "invalid request: field 'g': expected integer ≥ 0, got string");
  EXPECT_EQ(**f.OptUint("h"), 0u);
  EXPECT_EQ(Msg(Err(f.OptInt("a"))), "invalid request: field 'a': expected integer, got number");
  EXPECT_EQ(**f.OptInt("c"), -1);
}

TEST(Fields, PathsRejectEmptyAndNul) {
  json p = {{"path", ""}, {"p2", std::string("/a\0b", 4)}, {"ok", "/x"}};
  Fields f(p);
  EXPECT_EQ(Msg(Err(f.RequiredPath("path"))), "invalid request: field 'path': must not be empty");
  EXPECT_EQ(Msg(Err(f.RequiredPath("p2"))), "invalid request: field 'p2': contains a NUL byte");
  EXPECT_EQ(*f.RequiredPath("ok"), "/x");
}

// ---- env ----

TEST(Env, ArrayShape) {
  json v = {"A=1", "B=x=y", "NOEQ", "=empty", "A=2", "C="};
  auto env = ParseEnv(&v);
  ASSERT_TRUE(env.ok());
  Env want = {{"B", "x=y"}, {"A", "2"}, {"C", ""}};
  EXPECT_EQ(*env, want);
}

TEST(Env, ArrayNamesNotValidated) {
  json v = {"9bad=1", "a-b=2"};
  auto env = ParseEnv(&v);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->size(), 2u);
}

TEST(Env, ObjectShapeSortedByName) {
  json v = {{"b", "2"}, {"A", "1"}, {"_x", "x=y"}};
  auto env = ParseEnv(&v);
  ASSERT_TRUE(env.ok());
  Env want = {{"A", "1"}, {"_x", "x=y"}, {"b", "2"}};
  EXPECT_EQ(*env, want);
}

TEST(Env, ObjectBadNames) {
  json v = {{"9bad", "1"}, {"ok", "2"}, {"a-b", "3"}, {"", "4"}};
  Error e = Err(ParseEnv(&v));
  EXPECT_EQ(e.code(), Code::kS001);
  EXPECT_EQ(Msg(e),
            "invalid request: env: invalid variable name(s) [\"\",\"9bad\",\"a-b\"]; names must "
            "match [A-Za-z_][A-Za-z0-9_]*");
  json one = {{"9bad", "1"}};
  EXPECT_EQ(Msg(Err(ParseEnv(&one))),
            "invalid request: env: invalid variable name(s) [\"9bad\"]; names must match "
            "[A-Za-z_][A-Za-z0-9_]*");
}

TEST(Env, NonStringValuesAndNul) {
  json v = {{"PATH", 1}};
  EXPECT_EQ(Msg(Err(ParseEnv(&v))), "invalid request: field 'env.PATH': expected string, got number");
  json a = {"A=1", 2};
  EXPECT_EQ(Msg(Err(ParseEnv(&a))), "invalid request: field 'env[1]': expected string, got number");
  json n = {std::string("A=\0", 3)};
  EXPECT_EQ(Msg(Err(ParseEnv(&n))), "invalid request: field 'env[0]': contains a NUL byte");
  json s = "A=1";
  EXPECT_EQ(Msg(Err(ParseEnv(&s))), "invalid request: field 'env': expected env, got string");
  EXPECT_TRUE(ParseEnv(nullptr)->empty());
}

TEST(Env, NameRule) {
  EXPECT_TRUE(IsValidEnvName("_"));
  EXPECT_TRUE(IsValidEnvName("PATH"));
  EXPECT_TRUE(IsValidEnvName("a9_Z"));
  EXPECT_FALSE(IsValidEnvName(""));
  EXPECT_FALSE(IsValidEnvName("9a"));
  EXPECT_FALSE(IsValidEnvName("A.B"));
  EXPECT_FALSE(IsValidEnvName("Ä"));
}

// ---- base64 ----

TEST(Base64, StrictRfc4648) {
  EXPECT_EQ(*DecodeBase64Field("aGVsbG8=", "stdin"), "hello");
  EXPECT_EQ(*DecodeBase64Field("", "stdin"), "");
  for (std::string bad : {"aGVsbG8", "aGVs bG8=", "aGVsbG8-", "a===", "aGVsbG8=\n", "_-_-"}) {
    Error e = Err(DecodeBase64Field(bad, "stdin"));
    EXPECT_EQ(e.code(), Code::kS001) << bad;
    EXPECT_EQ(Msg(e).rfind("invalid request: stdin: invalid base64: ", 0), 0u) << Msg(e);
  }
}

// ---- mode strings ----

TEST(Mode, Accepted) {
  EXPECT_EQ(*ParseMode("0755"), 0755u);
  EXPECT_EQ(*ParseMode("755"), 0755u);
  EXPECT_EQ(*ParseMode("4755"), 04755u);
  EXPECT_EQ(*ParseMode("0"), 0u);
  EXPECT_EQ(*ParseMode("7777"), 07777u);
  EXPECT_EQ(*ParseMode("000000644"), 0644u);
}

TEST(Mode, RejectedWithS210) {
  for (std::string bad : {"", "0o755", "rwx", "9", "17777", "-755", "+755", " 755", "0x1ff", "8"}) {
    Error e = Err(ParseMode(bad));
    EXPECT_EQ(e.code(), Code::kS210) << bad;
    EXPECT_EQ(Msg(e), "invalid octal mode: " + bad);
  }
}

TEST(Mode, Format) {
  EXPECT_EQ(FormatMode(0644), "0644");
  EXPECT_EQ(FormatMode(01777), "1777");
  EXPECT_EQ(FormatMode(0100755), "0755");
}

// ---- sandbox ids ----

TEST(SandboxId, AcceptedForms) {
  const std::string canon = "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11";
  for (std::string in :
       {"3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11", "3F0C1A52-6A7E-4C1E-9D2B-0B6F2A9E4D11",
        "3f0c1a526a7e4c1e9d2b0b6f2a9e4d11", "{3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11}",
        "urn:uuid:3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11", "URN:UUID:3F0C1A52-6A7E-4C1E-9D2B-0B6F2A9E4D11",
        "Urn:Uuid:3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11"}) {
    auto r = ParseSandboxId(in);
    ASSERT_TRUE(r.ok()) << in;
    EXPECT_EQ(*r, canon);
  }
}

TEST(SandboxId, Rejected) {
  for (std::string bad :
       {"", "nope", "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d1", "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11x",
        "3f0c1a52_6a7e_4c1e_9d2b_0b6f2a9e4d11", "g f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d1"}) {
    Error e = Err(ParseSandboxId(bad));
    EXPECT_EQ(e.code(), Code::kS001);
    EXPECT_EQ(Msg(e), "invalid request: sandbox_id: not a UUID: " + bad);
  }
}

// ---- splitter ----

struct SplitCase {
  std::string in;
  std::vector<std::string> want;
};

TEST(Shlex, SpecExamplesAndRules) {
  std::vector<SplitCase> cases = {
      {"node -v", {"node", "-v"}},
      {"echo 'a b' \"c\\\"d\"", {"echo", "a b", "c\"d"}},
      {"ls | wc -l", {"ls", "|", "wc", "-l"}},
      {"echo #hi", {"echo"}},
      {"foo#bar", {"foo#bar"}},
      {"a\"b c\"d", {"ab cd"}},
      {"''", {""}},
      {"\"\"", {""}},
      {"a '' b", {"a", "", "b"}},
      {"  a \t\n b  ", {"a", "b"}},
      {"echo $HOME *.txt ~ ; && > < ( )", {"echo", "$HOME", "*.txt", "~", ";", "&&", ">", "<", "(", ")"}},
      {"a\\ b", {"a b"}},
      {"a\\\nb", {"ab"}},
      {"a \\\n b", {"a", "b"}},
      {"'a\\b'", {"a\\b"}},
      {"\"a\\b\"", {"a\\b"}},
      {"\"a\\$b\\`c\\\\d\"", {"a$b`c\\d"}},
      {"\"a\\\nb\"", {"ab"}},
      {"\"x'y\"", {"x'y"}},
      {"'x\"y'", {"x\"y"}},
      {"#only a comment", {}},
      {"a #c1\nb", {"a", "b"}},
      {"node\r", {"node\r"}},
      {"a\xc2\xa0"
       "b",
       {"a\xc2\xa0"
        "b"}},
      {"\\#x", {"#x"}},
      {"''#x", {"#x"}},
      {"", {}},
      {"   ", {}},
  };
  for (const auto& c : cases) {
    ShlexResult r = ShlexSplit(c.in);
    ASSERT_TRUE(r.ok()) << c.in << ": " << r.error;
    EXPECT_EQ(r.words, c.want) << c.in;
  }
}

TEST(Shlex, Errors) {
  EXPECT_EQ(ShlexSplit("echo 'x").error, "unbalanced quote");
  EXPECT_EQ(ShlexSplit("echo \"x").error, "unbalanced quote");
  EXPECT_EQ(ShlexSplit("echo \"x\\\"").error, "unbalanced quote");
  EXPECT_EQ(ShlexSplit("echo x\\").error, "trailing backslash");
}

TEST(Whitespace, UnicodeWhiteSpaceSet) {
  for (std::string ws :
       {"\t", "\n", "\v", "\f", "\r", " ", "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80",
        "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"}) {
    EXPECT_TRUE(ContainsUnicodeWhitespace("a" + ws + "b")) << json(ws).dump();
  }
  for (std::string no : {"node", "\xe2\x80\x8b" /* U+200B is not White_Space */, "\xc2\xa9", "é"}) {
    EXPECT_FALSE(ContainsUnicodeWhitespace(no)) << no;
  }
}

// ---- command shapes ----

using Words = std::vector<std::string>;

TEST(Command, Shapes) {
  EXPECT_EQ(*ResolveCommand("node -v", {}, {}), (Words{"node", "-v"}));
  EXPECT_EQ(*ResolveCommand("python3", {"-c", "print(1)"}, {}), (Words{"python3", "-c", "print(1)"}));
  EXPECT_EQ(*ResolveCommand("", {}, {"sh", "-c", "echo $HOME && ls"}),
            (Words{"sh", "-c", "echo $HOME && ls"}));
  EXPECT_EQ(*ResolveCommand("echo 'a b' \"c\\\"d\"", {}, {}), (Words{"echo", "a b", "c\"d"}));
  EXPECT_EQ(*ResolveCommand("ls | wc -l", {}, {}), (Words{"ls", "|", "wc", "-l"}));
  EXPECT_EQ(*ResolveCommand("echo #hi", {}, {}), (Words{"echo"}));
  // args are never re-split
  EXPECT_EQ(*ResolveCommand("echo", {"a b", "'c'"}, {}), (Words{"echo", "a b", "'c'"}));
  // rule 2 by U+00A0 but the splitter does not split on it
  EXPECT_EQ(*ResolveCommand("node\xc2\xa0-v", {}, {}), (Words{"node\xc2\xa0-v"}));
  EXPECT_EQ(*ResolveCommand("node\r", {}, {}), (Words{"node\r"}));
}

TEST(Command, Errors) {
  auto msg = [](const std::string& cmd, const Words& args, const Words& argv) {
    auto r = ResolveCommand(cmd, args, argv);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return std::string();
    EXPECT_EQ(r.error().code(), Code::kS001);
    return r.error().message();
  };
  EXPECT_EQ(msg("echo 'x", {}, {}), "invalid request: cmd cannot be split: unbalanced quote");
  EXPECT_EQ(msg("echo x\\", {}, {}), "invalid request: cmd cannot be split: trailing backslash");
  EXPECT_EQ(msg("   ", {}, {}), "invalid request: cmd is empty after split");
  EXPECT_EQ(msg("# c", {}, {}), "invalid request: cmd is empty after split");
  EXPECT_EQ(msg("ls -l", {"/"}, {}).rfind("invalid request: ambiguous command", 0), 0u);
  EXPECT_EQ(msg("x", {}, {"ls"}), "invalid request: argv cannot be combined with cmd/args; pick one shape");
  EXPECT_EQ(msg("", {"x"}, {"ls"}), "invalid request: argv cannot be combined with cmd/args; pick one shape");
  const std::string none = "invalid request: no program given: set cmd, or argv with at least one element";
  EXPECT_EQ(msg("", {}, {}), none);
  EXPECT_EQ(msg("", {"x"}, {}), none);
  EXPECT_EQ(msg("", {}, {"", "x"}), none);
  EXPECT_EQ(msg("'' x", {}, {}), none);
}

// ---- lang ----

TEST(Lang, Validation) {
  EXPECT_TRUE(ValidateLang("python").ok());
  EXPECT_TRUE(ValidateLang("/usr/bin/ruby").ok());
  EXPECT_EQ(ValidateLang("").error().message(), "invalid request: field 'lang': must not be empty");
  EXPECT_EQ(ValidateLang("py thon").error().message(),
            "invalid request: field 'lang': must not contain whitespace");
  EXPECT_EQ(ValidateLang("py\xe3\x80\x80").error().code(), Code::kS001);
}

// ---- whole requests ----

TEST(DecodeCreate, FieldsAndRanges) {
  auto spec = DecodeCreate(json::parse(
      R"j({"image":"node","cpus":2,"memory_mb":64,"name":"n","network":true,
          "idle_timeout_secs":0,"env":{"NODE_ENV":"production"},"isolation":"jail","_caller_worker_id":"w"})j"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->image, "node");
  EXPECT_EQ(spec->cpus, 2u);
  EXPECT_EQ(spec->memory_mb, 64u);
  EXPECT_EQ(spec->name, "n");
  EXPECT_TRUE(spec->network);
  EXPECT_EQ(spec->idle_timeout_secs, 0u);
  EXPECT_EQ(spec->env, (Env{{"NODE_ENV", "production"}}));
  EXPECT_EQ(spec->isolation, "jail");

  auto defaults = DecodeCreate(json{{"image", "python"}, {"cpus", nullptr}});
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->cpus);
  EXPECT_FALSE(defaults->memory_mb);
  EXPECT_FALSE(defaults->isolation);

  auto m = [](const json& p) { return DecodeCreate(p).error().message(); };
  EXPECT_EQ(m(json::object()), "invalid request: missing required field 'image' (expected string)");
  EXPECT_EQ(m({{"image", "x"}, {"cpus", 0}}),
            "invalid request: field 'cpus': must be between 1 and 255, got 0");
  EXPECT_EQ(m({{"image", "x"}, {"cpus", 256}}),
            "invalid request: field 'cpus': must be between 1 and 255, got 256");
  EXPECT_EQ(m({{"image", "x"}, {"cpus", 4294967296ULL}}),
            "invalid request: field 'cpus': value 4294967296 exceeds 4294967295");
  EXPECT_EQ(m({{"image", "x"}, {"memory_mb", 63}}),
            "invalid request: field 'memory_mb': must be at least 64, got 63");
  EXPECT_EQ(m({{"image", "x"}, {"isolation", "docker"}}),
            "invalid request: field 'isolation': must be \"microvm\" or \"jail\", got \"docker\"");
  EXPECT_EQ(
      m({{"image", "x"}, {"env", {{"9bad", "1"}}}}),
      "invalid request: env: invalid variable name(s) [\"9bad\"]; names must match [A-Za-z_][A-Za-z0-9_]*");
}

TEST(DecodeExec, Full) {
  auto spec = DecodeExec(json::parse(
      R"j({"sandbox_id":"{3F0C1A52-6A7E-4C1E-9D2B-0B6F2A9E4D11}","cmd":"node","args":["/a.js"],
          "env":["A=1"],"stdin":"aGk=","timeout_ms":5,"workdir":"/srv"})j"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->sandbox_id, "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11");
  EXPECT_EQ(spec->argv, (Words{"node", "/a.js"}));
  EXPECT_EQ(spec->env, (Env{{"A", "1"}}));
  EXPECT_EQ(spec->stdin_bytes, "hi");
  EXPECT_EQ(spec->timeout_ms, 5u);
  EXPECT_EQ(spec->workdir, "/srv");
  // timeout 0 is passed through (S200 is the manager's, after admission)
  auto zero =
      DecodeExec(json{{"sandbox_id", "3f0c1a526a7e4c1e9d2b0b6f2a9e4d11"}, {"cmd", "x"}, {"timeout_ms", 0}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->timeout_ms, 0u);
  auto nostdin =
      DecodeExec(json{{"sandbox_id", "3f0c1a526a7e4c1e9d2b0b6f2a9e4d11"}, {"cmd", "x"}, {"stdin", ""}});
  ASSERT_TRUE(nostdin.ok());
  EXPECT_EQ(nostdin->stdin_bytes, "");
}

TEST(DecodeExec, Errors) {
  const std::string id = "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11";
  auto m = [](const json& p) {
    auto r = DecodeExec(p);
    EXPECT_FALSE(r.ok()) << p.dump();
    return r.ok() ? std::string() : r.error().message();
  };
  EXPECT_EQ(m(json::object()), "invalid request: missing required field 'sandbox_id' (expected string)");
  EXPECT_EQ(m({{"sandbox_id", 7}}), "invalid request: field 'sandbox_id': expected string, got number");
  // JSON type errors (step 1) come before request-only rules (step 2)
  EXPECT_EQ(m({{"sandbox_id", "bad"}, {"timeout_ms", "x"}}),
            "invalid request: field 'timeout_ms': expected integer ≥ 0, got string");
  EXPECT_EQ(m({{"sandbox_id", "bad"}, {"cmd", "ls"}}), "invalid request: sandbox_id: not a UUID: bad");
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", std::string("l\0s", 3)}}),
            "invalid request: field 'cmd': contains a NUL byte");
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", "ls"}, {"args", {"a", std::string("\0", 1)}}}),
            "invalid request: field 'args[1]': contains a NUL byte");
  EXPECT_EQ(m({{"sandbox_id", id}, {"argv", {std::string("\0", 1)}}}),
            "invalid request: field 'argv[0]': contains a NUL byte");
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", "ls"}, {"stdin", "!!"}})
                .rfind("invalid request: stdin: invalid base64: ", 0),
            0u);
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", "ls"}, {"timeout_ms", -1}}),
            "invalid request: field 'timeout_ms': expected integer ≥ 0, got -1");
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", "ls"}, {"timeout_ms", 1.5}}),
            "invalid request: field 'timeout_ms': expected integer ≥ 0, got number");
  EXPECT_EQ(m({{"sandbox_id", id}}),
            "invalid request: no program given: set cmd, or argv with at least one element");
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", "ls"}, {"env", 5}}),
            "invalid request: field 'env': expected env, got number");
  EXPECT_EQ(m({{"sandbox_id", id}, {"cmd", "ls"}, {"workdir", ""}}),
            "invalid request: field 'workdir': must not be empty");
}

TEST(DecodeRun, FullAndErrors) {
  auto spec = DecodeRun(json::parse(
      R"j({"image":"python","code":"print(1)","lang":"py","files":[{"path":"/a","content":"x"}],
          "env":{"A":"1"},"stdin":"","timeout_ms":10,"keep_sandbox":true,"network":true,"cpus":2,
          "memory_mb":128,"idle_timeout_secs":5,"isolation":"microvm","workdir":"/tmp"})j"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->create.image, "python");
  EXPECT_EQ(spec->code, "print(1)");
  EXPECT_EQ(spec->lang, "py");
  ASSERT_EQ(spec->files.size(), 1u);
  EXPECT_EQ(spec->files[0].path, "/a");
  EXPECT_EQ(spec->create.env, (Env{{"A", "1"}}));
  EXPECT_TRUE(spec->keep_sandbox);
  EXPECT_TRUE(spec->create.network);
  EXPECT_EQ(spec->create.cpus, 2u);
  EXPECT_EQ(spec->create.memory_mb, 128u);
  EXPECT_EQ(spec->create.idle_timeout_secs, 5u);
  EXPECT_EQ(spec->create.isolation, "microvm");
  EXPECT_EQ(spec->workdir, "/tmp");
  EXPECT_EQ(spec->timeout_ms, 10u);

  auto m = [](const json& p) {
    auto r = DecodeRun(p);
    EXPECT_FALSE(r.ok()) << p.dump();
    return r.ok() ? std::string() : r.error().message();
  };
  json base = {{"image", "python"}, {"code", "x"}, {"lang", "py"}};
  EXPECT_EQ(m({{"image", "python"}, {"lang", "py"}}),
            "invalid request: missing required field 'code' (expected string)");
  json p = base;
  p["files"] = {{{"path", "/a"}, {"content", 5}}};
  EXPECT_EQ(m(p), "invalid request: field 'files[0].content': expected string, got number");
  p["files"] = {{{"path", "/a"}, {"content", "x"}}, {{"content", "y"}}};
  EXPECT_EQ(m(p), "invalid request: missing required field 'files[1].path' (expected string)");
  p["files"] = {"x"};
  EXPECT_EQ(m(p), "invalid request: field 'files[0]': expected object, got string");
  p["files"] = "x";
  EXPECT_EQ(m(p), "invalid request: field 'files': expected array of objects, got string");
  p = base;
  p["lang"] = "";
  EXPECT_EQ(m(p), "invalid request: field 'lang': must not be empty");
  p = base;
  p["stdin"] = "***";
  EXPECT_EQ(m(p).rfind("invalid request: stdin: invalid base64: ", 0), 0u);
  p = base;
  p["env"] = {{"1x", "y"}};
  EXPECT_EQ(m(p).rfind("invalid request: env: invalid variable name(s) [\"1x\"]", 0), 0u);
  p = base;
  p["cpus"] = 0;
  EXPECT_EQ(m(p), "invalid request: field 'cpus': must be between 1 and 255, got 0");
}

}  // namespace
}  // namespace skiff::fn
