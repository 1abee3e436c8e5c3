// Schemas of every registered function follow the schema rules of the
// contract, their examples validate, their defaults equal the code's
// constants, and docs/api.md / docs/errors.md match the code.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "functions/decode.h"
#include "functions/docs.h"
#include "functions/errors.h"
#include "functions/json_schema.h"
#include "functions/registry.h"
#include "functions/schemas.h"
#include "functions_fake_manager.h"
#include "sandbox/config.h"

namespace skiff {
namespace {

using nlohmann::json;

const std::vector<std::string> kSandboxIds = {
    "sandbox::create", "sandbox::exec", "sandbox::stop", "sandbox::list", "sandbox::metrics", "sandbox::run",
    "sandbox::catalog::list", "sandbox::fs::ls", "sandbox::fs::stat", "sandbox::fs::mkdir",
    "sandbox::fs::write", "sandbox::fs::read", "sandbox::fs::rm", "sandbox::fs::chmod", "sandbox::fs::mv",
    "sandbox::fs::grep", "sandbox::fs::sed",
    // Live processes (skiff's own; not in the iii contract).
    "sandbox::process::start", "sandbox::process::list", "sandbox::process::output",
    "sandbox::process::input", "sandbox::process::signal", "sandbox::process::wait",
    "sandbox::process::resize", "sandbox::process::forget",
    // State across turns (skiff's own).
    "sandbox::pause", "sandbox::resume", "sandbox::snapshot", "sandbox::snapshot::list",
    "sandbox::snapshot::delete", "sandbox::fork"};

TEST(Registry, ExactlyTheContractFunctions) {
  std::set<std::string> ids;
  int sandbox = 0, engine = 0, host = 0;
  for (const FunctionDef& d : Functions()) {
    ids.insert(d.id);
    EXPECT_FALSE(d.description.empty()) << d.id;
    EXPECT_TRUE(d.handler) << d.id;
    if (d.id.rfind("skiff::host::", 0) == 0) {
      ++host;  // a fleet router's questions to one host (docs/multihost.md)
      EXPECT_EQ(d.worker_name, "iii-sandbox");
      EXPECT_FALSE(d.internal);
    } else if (d.id.rfind("sandbox::", 0) == 0) {
      ++sandbox;
      EXPECT_EQ(d.worker_name, "iii-sandbox");
      EXPECT_FALSE(d.internal);
      EXPECT_FALSE(d.errors.empty()) << d.id;
    } else {
      ++engine;
      EXPECT_EQ(d.worker_name, "iii-engine-functions");
      EXPECT_TRUE(d.internal);
    }
  }
  EXPECT_EQ(sandbox, 31);
  EXPECT_EQ(engine, 3);
  EXPECT_EQ(host, 2);
  for (const auto& id : kSandboxIds) EXPECT_TRUE(ids.count(id)) << id;
  for (const char* id : {"engine::functions::list", "engine::functions::info", "engine::channels::create"}) {
    EXPECT_TRUE(ids.count(id)) << id;
  }
  EXPECT_EQ(FindFunction("sandbox::nope"), nullptr);
}

// Every property, at any depth, has a description; no additionalProperties:false.
void CheckDescriptions(const json& s, const std::string& at, std::vector<std::string>& bad) {
  if (!s.is_object()) return;
  if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
    bad.push_back(at + ": additionalProperties false");
  }
  if (s.contains("properties")) {
    for (const auto& [name, p] : s["properties"].items()) {
      if (!p.contains("description") || !p["description"].is_string() ||
          p["description"].get<std::string>().empty()) {
        bad.push_back(at + "/properties/" + name + ": no description");
      }
      CheckDescriptions(p, at + "/properties/" + name, bad);
    }
  }
  for (const char* k : {"items", "additionalProperties"}) {
    if (s.contains(k)) CheckDescriptions(s[k], at + "/" + k, bad);
  }
  for (const char* k : {"anyOf", "oneOf", "allOf"}) {
    if (s.contains(k)) {
      for (size_t i = 0; i < s[k].size(); ++i) CheckDescriptions(s[k][i], at + "/" + k, bad);
    }
  }
  if (s.contains("definitions")) {
    for (const auto& [name, d] : s["definitions"].items()) {
      CheckDescriptions(d, at + "/definitions/" + name, bad);
    }
  }
}

void CheckSchemaRules(const std::string& id, const json& s, bool request) {
  SCOPED_TRACE(id + (request ? " request" : " response"));
  EXPECT_EQ(s["$schema"], "http://json-schema.org/draft-07/schema#");
  EXPECT_EQ(s["type"], "object");
  ASSERT_TRUE(s.contains("properties"));
  ASSERT_TRUE(s.contains("required"));
  for (const auto& r : s["required"]) EXPECT_TRUE(s["properties"].contains(r.get<std::string>())) << r;
  ASSERT_TRUE(s.contains("examples"));
  ASSERT_GE(s["examples"].size(), 1u);
  std::vector<std::string> bad;
  CheckDescriptions(s, "", bad);
  EXPECT_TRUE(bad.empty()) << json(bad).dump();
  for (const auto& ex : s["examples"]) {
    std::vector<std::string> errs = ValidateJsonSchema(s, ex);
    EXPECT_TRUE(errs.empty()) << ex.dump() << " -> " << json(errs).dump();
  }
  // Every $ref resolves inside the schema's own definitions.
  std::string text = s.dump();
  std::regex ref_re("\"#/definitions/([a-z_]+)\"");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), ref_re); it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(s["definitions"].contains((*it)[1].str())) << (*it)[1];
  }
}

TEST(Schemas, RulesHoldForEveryFunction) {
  for (const FunctionDef& d : Functions()) {
    CheckSchemaRules(d.id, d.request_schema, true);
    CheckSchemaRules(d.id, d.response_schema, false);
  }
}

TEST(Schemas, RequiredFieldsExactly) {
  const std::map<std::string, std::set<std::string>> want = {
      {"sandbox::create", {}},  // anyOf image | snapshot, below
      {"sandbox::exec", {"sandbox_id"}},
      {"sandbox::stop", {"sandbox_id"}},
      {"sandbox::list", {}},
      {"sandbox::metrics", {"sandbox_id"}},
      {"sandbox::run", {"image"}},  // anyOf code+lang | argv, below
      {"sandbox::catalog::list", {}},
      {"sandbox::fs::ls", {"sandbox_id", "path"}},
      {"sandbox::fs::stat", {"sandbox_id", "path"}},
      {"sandbox::fs::mkdir", {"sandbox_id", "path"}},
      {"sandbox::fs::write", {"sandbox_id", "path"}},
      {"sandbox::fs::read", {"sandbox_id", "path"}},
      {"sandbox::fs::rm", {"sandbox_id", "path"}},
      {"sandbox::fs::chmod", {"sandbox_id", "path", "mode"}},
      {"sandbox::fs::mv", {"sandbox_id", "src", "dst"}},
      {"sandbox::fs::grep", {"sandbox_id", "path", "pattern"}},
      {"sandbox::fs::sed", {"sandbox_id", "pattern", "replacement"}},
      {"engine::functions::list", {}},
      {"engine::functions::info", {}},
      {"engine::channels::create", {}},
  };
  for (const auto& [id, req] : want) {
    const FunctionDef* d = FindFunction(id);
    ASSERT_NE(d, nullptr) << id;
    EXPECT_EQ(d->request_schema["required"].get<std::set<std::string>>(), req) << id;
  }
}

TEST(Schemas, RequiredFieldsAreEnforcedByHandlersToo) {
  // Removing any schema-required field from a documented example gives the
  // S001 missing-field message naming it: schemas and decoders agree.
  testing::FakeSandboxService manager;
  CallContext ctx{manager, nullptr};
  for (const FunctionDef& d : Functions()) {
    if (d.internal) continue;
    for (const auto& r : d.request_schema["required"]) {
      json ex = d.request_schema["examples"][0];
      ex.erase(r.get<std::string>());
      Result<json> res = d.handler(ex, ctx);
      ASSERT_FALSE(res.ok()) << d.id << " " << ex.dump();
      EXPECT_EQ(res.error().code(), Code::kS001);
      std::string want = "invalid request: missing required field '" + r.get<std::string>() + "'";
      EXPECT_EQ(res.error().message().rfind(want, 0), 0u) << d.id << ": " << res.error().message();
    }
  }
}

TEST(Schemas, RunNeedsCodeAndLangOrACommand) {
  const FunctionDef* d = FindFunction("sandbox::run");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->request_schema["anyOf"],
            json::array({{{"required", {"code", "lang"}}}, {{"required", {"argv"}}}}));
  EXPECT_TRUE(ValidateJsonSchema(d->request_schema, {{"image", "base"}, {"argv", {"true"}}}).empty());
  EXPECT_TRUE(
      ValidateJsonSchema(d->request_schema, {{"image", "base"}, {"code", "1"}, {"lang", "py"}}).empty());
  EXPECT_FALSE(ValidateJsonSchema(d->request_schema, {{"image", "base"}, {"code", "1"}}).empty());
}

TEST(Schemas, CreateNeedsAnImageOrASnapshot) {
  const FunctionDef* d = FindFunction("sandbox::create");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->request_schema["anyOf"],
            json::array({{{"required", {"image"}}}, {{"required", {"snapshot"}}}}));
  testing::FakeSandboxService manager;
  CallContext ctx{manager, nullptr};
  Result<json> neither = d->handler(json::object(), ctx);
  ASSERT_FALSE(neither.ok());
  EXPECT_EQ(neither.error().code(), Code::kS001);
  EXPECT_EQ(neither.error().message().rfind("invalid request: missing required field 'image'", 0), 0u)
      << neither.error().message();
}

TEST(Schemas, DefaultsEqualCodeConstants) {
  auto def = [](const std::string& id, const std::string& field) {
    return FindFunction(id)->request_schema["properties"][field]["default"];
  };
  EXPECT_EQ(def("sandbox::exec", "timeout_ms"), fn::kDefaultExecTimeoutMs);
  EXPECT_EQ(def("sandbox::run", "timeout_ms"), fn::kDefaultExecTimeoutMs);
  EXPECT_EQ(def("sandbox::fs::grep", "max_matches"), fn::kGrepDefaultMaxMatches);
  EXPECT_EQ(def("sandbox::fs::grep", "max_line_bytes"), fn::kGrepDefaultMaxLineBytes);
  EXPECT_EQ(def("sandbox::fs::mkdir", "mode"), std::string(fn::kDefaultDirMode));
  EXPECT_EQ(def("sandbox::fs::write", "mode"), std::string(fn::kDefaultFileMode));
  EXPECT_EQ(def("engine::channels::create", "buffer_size"), fn::kChannelBufferDefault);
  EXPECT_EQ(def("sandbox::create", "cpus"), Config{}.default_cpus);
  EXPECT_EQ(def("sandbox::create", "memory_mb"), Config{}.default_memory_mb);
  EXPECT_EQ(def("sandbox::create", "idle_timeout_secs"), Config{}.default_idle_timeout_secs);
  EXPECT_EQ(def("sandbox::fs::grep", "recursive"), true);
  EXPECT_EQ(def("sandbox::fs::sed", "regex"), true);
  EXPECT_EQ(def("sandbox::stop", "wait"), false);
  auto prop = [](const std::string& id, const std::string& field) {
    return FindFunction(id)->request_schema["properties"][field];
  };
  EXPECT_EQ(prop("sandbox::create", "cpus")["minimum"], fn::kMinCpus);
  EXPECT_EQ(prop("sandbox::create", "cpus")["maximum"], fn::kMaxCpus);
  EXPECT_EQ(prop("sandbox::create", "memory_mb")["minimum"], fn::kMinMemoryMb);
  EXPECT_EQ(prop("engine::functions::info", "function_ids")["maxItems"], fn::kInfoBatchMax);
}

TEST(Schemas, ExtensionFieldsAreLabelled) {
  auto desc = [](const std::string& id, const std::string& field, bool request) {
    const FunctionDef* d = FindFunction(id);
    const json& s = request ? d->request_schema : d->response_schema;
    return s["properties"][field]["description"].get<std::string>();
  };
  for (const char* f : {"network", "cpus", "memory_mb", "idle_timeout_secs", "isolation", "workdir"}) {
    EXPECT_EQ(desc("sandbox::run", f, true).rfind("Extension:", 0), 0u) << f;
  }
  EXPECT_EQ(desc("sandbox::create", "isolation", true).rfind("Extension:", 0), 0u);
  EXPECT_EQ(desc("sandbox::create", "isolation", false).rfind("Extension:", 0), 0u);
  EXPECT_EQ(desc("sandbox::exec", "stdout_truncated", false).rfind("Extension:", 0), 0u);
  EXPECT_EQ(desc("sandbox::run", "stderr_truncated", false).rfind("Extension:", 0), 0u);
  const json& defs = fn::AllDefinitions();
  for (const char* f : {"isolation", "created_at", "last_activity_at", "cpus", "memory_mb", "network"}) {
    EXPECT_EQ(defs["list_entry"]["properties"][f]["description"].get<std::string>().rfind("Extension:", 0),
              0u)
        << f;
  }
  EXPECT_EQ(defs["grep_match"]["properties"]["byte_offset"]["description"].get<std::string>().rfind(
                "Extension:", 0),
            0u);
  EXPECT_EQ(
      defs["catalog_entry"]["properties"]["allowed"]["description"].get<std::string>().rfind("Extension:", 0),
      0u);
  // Non-extension fields are not labelled.
  EXPECT_NE(desc("sandbox::exec", "cmd", true).rfind("Extension:", 0), 0u);
}

TEST(Schemas, SharedDefinitionsExist) {
  const json& defs = fn::AllDefinitions();
  for (const char* n : {"env", "channel_ref", "fs_entry", "grep_match", "sed_result", "list_entry",
                        "catalog_entry", "run_file"}) {
    EXPECT_TRUE(defs.contains(n)) << n;
  }
}

TEST(Schemas, OptionalRequestFieldsAcceptNull) {
  const json& s = FindFunction("sandbox::exec")->request_schema;
  EXPECT_TRUE(ValidateJsonSchema(
                  s, {{"sandbox_id", "x"}, {"cmd", nullptr}, {"env", nullptr}, {"timeout_ms", nullptr}})
                  .empty());
  EXPECT_FALSE(ValidateJsonSchema(s, {{"sandbox_id", nullptr}}).empty());
}

// The validator must be able to fail, or the example checks mean nothing.
TEST(Validator, RejectsViolations) {
  const json& exec = FindFunction("sandbox::exec")->request_schema;
  EXPECT_FALSE(ValidateJsonSchema(exec, json::object()).empty());                              // required
  EXPECT_FALSE(ValidateJsonSchema(exec, {{"sandbox_id", 1}}).empty());                         // type
  EXPECT_FALSE(ValidateJsonSchema(exec, {{"sandbox_id", "x"}, {"timeout_ms", -1}}).empty());   // minimum
  EXPECT_FALSE(ValidateJsonSchema(exec, {{"sandbox_id", "x"}, {"timeout_ms", 1.5}}).empty());  // integer
  EXPECT_FALSE(ValidateJsonSchema(exec, {{"sandbox_id", "x"}, {"env", {{"A", 1}}}}).empty());  // $ref/anyOf
  EXPECT_FALSE(ValidateJsonSchema(exec, {{"sandbox_id", "x"}, {"args", {1}}}).empty());        // items
  EXPECT_TRUE(ValidateJsonSchema(exec, {{"sandbox_id", "x"}, {"unknown", 1}}).empty());        // extra ok
  const json& create = FindFunction("sandbox::create")->request_schema;
  EXPECT_FALSE(ValidateJsonSchema(create, {{"image", "x"}, {"isolation", "docker"}}).empty());  // enum
  EXPECT_FALSE(ValidateJsonSchema(create, {{"image", "x"}, {"cpus", 256}}).empty());            // maximum
  const json& info = FindFunction("engine::functions::info")->request_schema;
  EXPECT_FALSE(ValidateJsonSchema(info, {{"function_ids", json::array()}}).empty());  // minItems
  const json& read = FindFunction("sandbox::fs::read")->response_schema;
  EXPECT_FALSE(ValidateJsonSchema(
                   read, {{"content", {{"channel_id", "c"}}}, {"size", 1}, {"mode", "0644"}, {"mtime", 1}})
                   .empty());  // nested required via $ref
  EXPECT_TRUE(
      ValidateJsonSchema(json::parse(R"({"oneOf":[{"type":"string"},{"type":"string"}]})"), "x").size() == 1);
}

// ---- docs ----

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kDocs = std::string(SKIFF_SOURCE_DIR) + "/docs/";

TEST(Docs, ApiMdIsGeneratedFromTheRegistry) {
  std::string file = ReadFile(kDocs + "api.md");
  ASSERT_FALSE(file.empty()) << "docs/api.md missing";
  EXPECT_TRUE(file == RenderApiDoc())
      << "docs/api.md is out of date: run `skiff-gendocs docs` from the repository root";
}

TEST(Docs, ErrorsMdIsGeneratedFromTheCodeTable) {
  std::string file = ReadFile(kDocs + "errors.md");
  ASSERT_FALSE(file.empty()) << "docs/errors.md missing";
  EXPECT_TRUE(file == RenderErrorsDoc())
      << "docs/errors.md is out of date: run `skiff-gendocs docs` from the repository root";
}

TEST(Docs, EveryFunctionDocumented) {
  std::string api = ReadFile(kDocs + "api.md");
  for (const FunctionDef& d : Functions()) {
    EXPECT_NE(api.find("### `" + d.id + "`"), std::string::npos) << d.id;
    EXPECT_NE(api.find("<a id=\"" + d.id + "\"></a>"), std::string::npos) << d.id;
    for (const auto& [name, p] : d.request_schema["properties"].items()) {
      EXPECT_NE(api.find("| `" + name + "` |"), std::string::npos) << d.id << " " << name;
    }
  }
  EXPECT_NE(api.find("## Differences from the agreed contract"), std::string::npos);
}

TEST(Docs, EveryCodeHasAnAnchor) {
  std::string errors = ReadFile(kDocs + "errors.md");
  for (const CodeInfo& c : AllCodes()) {
    std::string name(CodeName(c.code));
    EXPECT_NE(errors.find("<a id=\"" + name + "\"></a>"), std::string::npos) << name;
    if (!c.fix_note.empty()) {
      EXPECT_NE(errors.find(std::string(c.fix_note)), std::string::npos) << name;
    }
  }
  EXPECT_NE(errors.find(std::string(ParentsFixNote())), std::string::npos);
  // docs_url of every error points at one of these anchors
  for (const CodeInfo& c : AllCodes()) {
    std::string url = ErrorToWire(Error(c.code, "m"), "docs/errors.md")["docs_url"];
    std::string anchor = url.substr(url.find('#') + 1);
    EXPECT_NE(errors.find("<a id=\"" + anchor + "\"></a>"), std::string::npos);
  }
}

TEST(Docs, DocumentedExamplesValidate) {
  std::string api = ReadFile(kDocs + "api.md");
  // Split into function sections and validate each "Example request:" block.
  size_t checked = 0;
  for (const FunctionDef& d : Functions()) {
    size_t start = api.find("### `" + d.id + "`");
    ASSERT_NE(start, std::string::npos) << d.id;
    size_t end = api.find("\n### ", start + 1);
    std::string section = api.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const auto& [label, schema] : std::vector<std::pair<std::string, const json*>>{
             {"Example request:\n\n```json\n", &d.request_schema},
             {"Example response:\n\n```json\n", &d.response_schema}}) {
      size_t pos = 0;
      while ((pos = section.find(label, pos)) != std::string::npos) {
        pos += label.size();
        size_t close = section.find("\n```", pos);
        json ex = json::parse(section.substr(pos, close - pos));
        std::vector<std::string> errs = ValidateJsonSchema(*schema, ex);
        EXPECT_TRUE(errs.empty()) << d.id << " " << ex.dump() << " -> " << json(errs).dump();
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 2 * Functions().size());
}

TEST(Docs, LimitsInDocsEqualConstants) {
  std::string api = ReadFile(kDocs + "api.md");
  EXPECT_NE(
      api.find("| exec/run `timeout_ms` default | " + std::to_string(fn::kDefaultExecTimeoutMs) + " ms |"),
      std::string::npos);
  EXPECT_NE(api.find("| grep `max_matches` default | " + std::to_string(fn::kGrepDefaultMaxMatches) + " |"),
            std::string::npos);
  EXPECT_NE(
      api.find("| grep `max_line_bytes` default | " + std::to_string(fn::kGrepDefaultMaxLineBytes) + " |"),
      std::string::npos);
  EXPECT_NE(api.find("size < " + std::to_string(fn::kReadInlineLimit) + " bytes"), std::string::npos);
}

}  // namespace
}  // namespace skiff
