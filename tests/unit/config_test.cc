// Config parsing and validation (docs/configuration.md#keys).
#include "sandbox/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace skiff {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Config MustParse(const std::string& y) {
  auto r = ParseConfig(y);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? r.value() : Config{};
}

std::string ErrorOf(const std::string& y) {
  auto r = ParseConfig(y);
  EXPECT_FALSE(r.ok()) << "accepted: " << y;
  return r.ok() ? "" : r.error().message();
}

TEST(ConfigTest, EmptyDocumentGivesDefaults) {
  Config c = MustParse("");
  EXPECT_TRUE(c.auto_install);
  EXPECT_FALSE(c.image_allowlist.has_value());
  EXPECT_EQ(c.default_idle_timeout_secs, 300u);
  EXPECT_EQ(c.max_concurrent_sandboxes, 32u);
  EXPECT_EQ(c.max_concurrent_exec_per_sandbox, 4u);
  EXPECT_EQ(c.max_exec_timeout_ms, 300000u);
  EXPECT_EQ(c.fs_timeout_ms, 120000u);
  EXPECT_EQ(c.max_calls_per_sandbox, 64u);
  EXPECT_EQ(c.default_cpus, 1u);
  EXPECT_EQ(c.default_memory_mb, 512u);
  EXPECT_EQ(c.listen_address, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 49134);
  EXPECT_EQ(c.max_connections, 1024u);
  EXPECT_EQ(c.isolation, "auto");
  EXPECT_FALSE(c.auth_token.has_value());
  EXPECT_FALSE(c.engine_url.has_value());
  EXPECT_EQ(c.docs_base, "docs/errors.md");
  EXPECT_TRUE(c.warnings.empty());
}

// code-interpreter too: it is what E2B's runCode SDK creates by default.
TEST(ConfigTest, DefaultAllowlistIsPythonNodeAndCodeInterpreterOnly) {
  Config c = MustParse("{}");
  EXPECT_TRUE(c.ImageAllowed("python"));
  EXPECT_TRUE(c.ImageAllowed("node"));
  EXPECT_TRUE(c.ImageAllowed("code-interpreter"));
  EXPECT_FALSE(c.ImageAllowed("base"));
  EXPECT_FALSE(c.ImageAllowed("host"));
  c.allow_all_images = true;
  EXPECT_TRUE(c.ImageAllowed("host"));
  EXPECT_TRUE(c.ImageAllowed("base"));
}

// The image policy allows exactly what Config::ImageAllowed allows and
// carries the store directory, custom images and auto_install over.
TEST(ConfigTest, ImagePolicyMatchesTheConfig) {
  const std::vector<std::string> names = {"python", "node", "base", "code-interpreter",
                                          "host",   "app",  "other"};
  auto expect_same = [&](const Config& c) {
    images::ImagePolicy p = ImagePolicyFor(c);
    for (const auto& n : names) EXPECT_EQ(p.Allowed(n), c.ImageAllowed(n)) << n;
  };
  Config c = MustParse("{}");
  expect_same(c);
  EXPECT_TRUE(ImagePolicyFor(c).Allowed("node"));
  EXPECT_FALSE(ImagePolicyFor(c).Allowed("base"));
  c.image_allowlist = std::vector<std::string>{};
  expect_same(c);
  c.image_allowlist = std::vector<std::string>{"base", "app"};
  expect_same(c);
  c.allow_all_images = true;
  expect_same(c);
  EXPECT_TRUE(ImagePolicyFor(c).Allowed("other"));

  c.images_dir = "/srv/images";
  c.auto_install = false;
  c.custom_images = {{"app", "registry.example/app:1"}};
  images::ImagePolicy p = ImagePolicyFor(c);
  EXPECT_EQ(p.images_dir, "/srv/images");
  EXPECT_FALSE(p.auto_install);
  EXPECT_EQ(p.custom_images, c.custom_images);
  EXPECT_TRUE(ImagePolicyFor(MustParse("{}")).auto_install);
  EXPECT_TRUE(ImagePolicyFor(MustParse("{}")).images_dir.empty());
}

TEST(ConfigTest, ExplicitEmptyAllowlistDeniesEverything) {
  Config c = MustParse("image_allowlist: []\n");
  ASSERT_TRUE(c.image_allowlist.has_value());
  EXPECT_FALSE(c.ImageAllowed("python"));
  EXPECT_FALSE(c.ImageAllowed("node"));
  Config n = MustParse("image_allowlist:\n");  // null: fail closed too
  EXPECT_FALSE(n.ImageAllowed("python"));
}

TEST(ConfigTest, SpecExampleParses) {
  Config c = MustParse(R"(
auto_install: true
image_allowlist: [python, node, ml]
default_idle_timeout_secs: 300
max_concurrent_sandboxes: 32
max_concurrent_exec_per_sandbox: 4
max_exec_timeout_ms: 300000
default_cpus: 1
default_memory_mb: 512
per_image_caps:
  ml: {max_cpus: 4, max_memory_mb: 8192}
custom_images:
  ml: ghcr.io/acme/ml:1.4
listen_address: 127.0.0.1
listen_port: 49134
isolation: auto
pool: {python: 2}
network:
  host_ports: [8080]
  allow: ["pypi.org", "*.pythonhosted.org", "203.0.113.0/24"]
)");
  EXPECT_TRUE(c.ImageAllowed("ml"));
  EXPECT_FALSE(c.ImageAllowed("base"));
  ASSERT_EQ(c.per_image_caps.count("ml"), 1u);
  EXPECT_EQ(c.per_image_caps["ml"].max_cpus, 4u);
  EXPECT_EQ(c.per_image_caps["ml"].max_memory_mb, 8192u);
  EXPECT_EQ(c.custom_images["ml"], "ghcr.io/acme/ml:1.4");
  EXPECT_EQ(c.pool["python"], 2u);
  EXPECT_EQ(c.network.host_ports, std::vector<uint16_t>{8080});
  EXPECT_EQ(c.network.allow.size(), 3u);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigTest, OmittedCapSubfieldMeansNoLimit) {
  Config c = MustParse("per_image_caps:\n  python: {max_cpus: 2}\n");
  EXPECT_EQ(c.per_image_caps["python"].max_cpus, 2u);
  EXPECT_FALSE(c.per_image_caps["python"].max_memory_mb.has_value());
}

TEST(ConfigTest, UnknownKeysAreWarningsNotErrors) {
  Config c = MustParse("colour: blue\nnetwork: {mtu: 1500}\n");
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_THAT(c.warnings[0], HasSubstr("colour"));
  EXPECT_THAT(c.warnings[1], HasSubstr("network.mtu"));
}

TEST(ConfigTest, MalformedYamlIsAnError) {
  EXPECT_THAT(ErrorOf("a: [1, 2\n"), HasSubstr("malformed YAML"));
  EXPECT_THAT(ErrorOf("- just\n- a list\n"), HasSubstr("mapping"));
}

TEST(ConfigTest, WrappedSandboxShapeIsRejected) {
  EXPECT_THAT(ErrorOf("sandbox:\n  auto_install: true\n"), HasSubstr("sandbox"));
}

TEST(ConfigTest, CustomImageMayNotShadowPresetsOrHost) {
  for (const char* name : {"python", "node", "base", "code-interpreter", "host"}) {
    std::string msg = ErrorOf(std::string("custom_images:\n  ") + name + ": x/y:1\n");
    EXPECT_THAT(msg, HasSubstr(std::string("custom_images.") + name));
  }
  EXPECT_THAT(ErrorOf("custom_images:\n  \"\": x/y:1\n"), HasSubstr("custom_images"));
}

TEST(ConfigTest, NonLoopbackListenNeedsToken) {
  EXPECT_THAT(ErrorOf("listen_address: 0.0.0.0\n"), HasSubstr("listen_address"));
  EXPECT_THAT(ErrorOf("listen_address: 192.168.1.4\n"), HasSubstr("auth_token"));
  Config c = MustParse("listen_address: 0.0.0.0\nauth_token: s3cret\n");
  EXPECT_EQ(*c.auth_token, "s3cret");
  MustParse("listen_address: ::1\n");
  MustParse("listen_address: 127.0.0.2\n");
  MustParse("listen_address: localhost\n");
  EXPECT_THAT(ErrorOf("listen_address: example.com\n"), HasSubstr("listen_address"));
  EXPECT_THAT(ErrorOf("auth_token: \"\"\n"), HasSubstr("auth_token"));
}

TEST(ConfigTest, PoolMustNameAllowlistedCatalogImage) {
  MustParse("pool: {python: 1}\n");
  EXPECT_THAT(ErrorOf("pool: {base: 1}\n"), HasSubstr("pool.base"));
  EXPECT_THAT(ErrorOf("pool: {nope: 1}\n"), HasSubstr("pool.nope"));
  EXPECT_THAT(ErrorOf("image_allowlist: [node]\npool: {python: 1}\n"), HasSubstr("pool.python"));
  MustParse("image_allowlist: [ml]\ncustom_images: {ml: a/b:1}\npool: {ml: 2}\n");
}

TEST(ConfigTest, NetworkAllowEntries) {
  Config c = MustParse(
      "network:\n  allow: [example.com, \"*.example.org\", 10.0.0.0/8, 2001:db8::/32, "
      "203.0.113.7, \"::1\"]\n");
  EXPECT_EQ(c.network.allow.size(), 6u);
  for (const char* bad : {"\"\"", "10.0.0.0/33", "300.1.1.1", "\"bad domain\"", "\"-x.com\"", "1.2.3.4/",
                          "\"*.\"", "fe80::/129", "\"exa_mple.com\""}) {
    std::string msg = ErrorOf(std::string("network:\n  allow: [") + bad + "]\n");
    EXPECT_THAT(msg, HasSubstr("network.allow[0]")) << bad;
  }
}

TEST(ConfigTest, PortsMustBeInRange) {
  EXPECT_THAT(ErrorOf("listen_port: 0\n"), HasSubstr("listen_port"));
  EXPECT_THAT(ErrorOf("listen_port: 65536\n"), HasSubstr("listen_port"));
  EXPECT_THAT(ErrorOf("listen_port: -1\n"), HasSubstr("listen_port"));
  EXPECT_THAT(ErrorOf("network: {host_ports: [80, 70000]}\n"), HasSubstr("network.host_ports[1]"));
  EXPECT_EQ(MustParse("listen_port: 65535\n").listen_port, 65535);
}

TEST(ConfigTest, MaxConnectionsIsAtLeastOne) {
  EXPECT_EQ(MustParse("max_connections: 64\n").max_connections, 64u);
  EXPECT_THAT(ErrorOf("max_connections: 0\n"), HasSubstr("max_connections"));
  EXPECT_THAT(ErrorOf("max_connections: many\n"), HasSubstr("max_connections"));
}

TEST(ConfigTest, TypesAreChecked) {
  EXPECT_THAT(ErrorOf("auto_install: maybe\n"), HasSubstr("auto_install"));
  EXPECT_THAT(ErrorOf("max_concurrent_sandboxes: 1.5\n"), HasSubstr("max_concurrent_sandboxes"));
  EXPECT_THAT(ErrorOf("max_concurrent_sandboxes: 4294967296\n"), HasSubstr("max_concurrent_sandboxes"));
  EXPECT_THAT(ErrorOf("max_concurrent_sandboxes: [1]\n"), HasSubstr("max_concurrent_sandboxes"));
  EXPECT_THAT(ErrorOf("default_idle_timeout_secs: -5\n"), HasSubstr("default_idle_timeout_secs"));
  EXPECT_THAT(ErrorOf("default_cpus: 0\n"), HasSubstr("default_cpus"));
  EXPECT_THAT(ErrorOf("default_cpus: 256\n"), HasSubstr("default_cpus"));
  EXPECT_THAT(ErrorOf("default_memory_mb: 32\n"), HasSubstr("default_memory_mb"));
  EXPECT_THAT(ErrorOf("image_allowlist: python\n"), HasSubstr("image_allowlist"));
  EXPECT_THAT(ErrorOf("image_allowlist: [[python]]\n"), HasSubstr("image_allowlist[0]"));
  EXPECT_THAT(ErrorOf("isolation: docker\n"), HasSubstr("isolation"));
  EXPECT_THAT(ErrorOf("per_image_caps: {python: {max_cpus: x}}\n"),
              HasSubstr("per_image_caps.python.max_cpus"));
  EXPECT_THAT(ErrorOf("engine_url: http://x\n"), HasSubstr("engine_url"));
  EXPECT_THAT(ErrorOf("custom_images: [a]\n"), HasSubstr("custom_images"));
  EXPECT_THAT(ErrorOf("auto_install: true\nauto_install: false\n"), HasSubstr("auto_install"));
}

TEST(ConfigTest, CallBoundsAreRangeChecked) {
  Config c = MustParse("fs_timeout_ms: 250\nmax_calls_per_sandbox: 3\n");
  EXPECT_EQ(c.fs_timeout_ms, 250u);
  EXPECT_EQ(c.max_calls_per_sandbox, 3u);
  EXPECT_THAT(ErrorOf("fs_timeout_ms: 0\n"), HasSubstr("fs_timeout_ms"));
  EXPECT_THAT(ErrorOf("fs_timeout_ms: soon\n"), HasSubstr("fs_timeout_ms"));
  EXPECT_THAT(ErrorOf("max_calls_per_sandbox: 0\n"), HasSubstr("max_calls_per_sandbox"));
  EXPECT_THAT(ErrorOf("max_calls_per_sandbox: 100001\n"), HasSubstr("max_calls_per_sandbox"));
}

TEST(ConfigTest, ZeroCapsMeanOneWithWarning) {
  Config c = MustParse("max_concurrent_exec_per_sandbox: 0\nmax_exec_timeout_ms: 0\n");
  EXPECT_EQ(c.exec_cap(), 1u);
  EXPECT_EQ(c.exec_timeout_cap(), 1u);
  EXPECT_EQ(c.warnings.size(), 2u);
}

TEST(ConfigTest, MicrovmNeedsQemu) {
  if (QemuInstalled()) {
    EXPECT_EQ(MustParse("isolation: microvm\n").isolation, "microvm");
  }
  // Point the lookup at a file that does not exist: now it must refuse.
  ::setenv("SKIFF_QEMU", "/nonexistent/qemu-system-test", 1);
  EXPECT_THAT(ErrorOf("isolation: microvm\n"), HasSubstr("isolation"));
  ::unsetenv("SKIFF_QEMU");
  EXPECT_EQ(MustParse("isolation: jail\n").isolation, "jail");
}

TEST(ConfigTest, LoadConfigFile) {
  std::string path = testing::TempDir() + "/skiff_config_test.yaml";
  {
    std::ofstream out(path);
    out << "listen_port: 4000\nengine_url: ws://127.0.0.1:49135\n";
  }
  auto r = LoadConfigFile(path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->listen_port, 4000);
  EXPECT_EQ(*r->engine_url, "ws://127.0.0.1:49135");
  std::remove(path.c_str());
  auto missing = LoadConfigFile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message(), HasSubstr(path));
}

// The engine link (docs/multihost.md#tls): wss:// anywhere, ws:// only to
// this machine, the CA file only with wss://, neither file without an engine.
TEST(ConfigTest, EngineLinkKeys) {
  Config c = MustParse(
      "engine_url: wss://engine.example:8443/ws\nengine_ca_file: /etc/skiff/ca.pem\n"
      "engine_token_file: /etc/skiff/engine.token\n");
  EXPECT_EQ(*c.engine_url, "wss://engine.example:8443/ws");
  EXPECT_EQ(*c.engine_ca_file, "/etc/skiff/ca.pem");
  EXPECT_EQ(*c.engine_token_file, "/etc/skiff/engine.token");
  EXPECT_TRUE(MustParse("engine_url: ws://localhost:49135\n").engine_url.has_value());
  EXPECT_TRUE(MustParse("engine_url: 'ws://[::1]:49135'\n").engine_url.has_value());
  EXPECT_THAT(ErrorOf("engine_url: ws://10.0.0.5:49135\n"), HasSubstr("use wss://"));
  EXPECT_THAT(ErrorOf("engine_url: ws://engine.example:49135\n"), HasSubstr("use wss://"));
  EXPECT_THAT(ErrorOf("engine_url: wss://\n"), HasSubstr("no host"));
  EXPECT_THAT(ErrorOf("engine_url: wss://e:99999\n"), HasSubstr("port"));
  EXPECT_THAT(ErrorOf("engine_url: ws://127.0.0.1:1\nengine_ca_file: /ca.pem\n"), HasSubstr("wss://"));
  EXPECT_THAT(ErrorOf("engine_ca_file: /ca.pem\n"), HasSubstr("needs worker mode"));
  EXPECT_THAT(ErrorOf("engine_token_file: /t\n"), HasSubstr("needs worker mode"));
  EXPECT_THAT(ErrorOf("engine_url: wss://e\nengine_token_file: ''\n"), HasSubstr("engine_token_file"));
}

TEST(ConfigTest, ShippedExampleConfigParses) {
  auto r = LoadConfigFile(std::string(SKIFF_SOURCE_DIR) + "/configs/skiff.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->warnings.empty());
}

// api_keys (docs/configuration.md#tenants): a list of {name, token}.
TEST(ConfigTest, ApiKeysParseAndTurnTenancyOn) {
  Config c = MustParse(
      "api_keys:\n"
      "  - {name: alice, token: tok-a}\n"
      "  - name: bob\n"
      "    token: \"tok-b\"\n");
  ASSERT_EQ(c.api_keys.size(), 2u);
  EXPECT_EQ(c.api_keys[0].name, "alice");
  EXPECT_EQ(c.api_keys[0].token, "tok-a");
  EXPECT_EQ(c.api_keys[1].name, "bob");
  EXPECT_EQ(c.api_keys[1].token, "tok-b");
  EXPECT_TRUE(c.tenancy());
  ASSERT_EQ(c.Keys().size(), 2u);
  EXPECT_EQ(c.Keys()[1].token, "tok-b");
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigTest, OneKeyOrNoneLeavesTenancyOff) {
  Config one = MustParse("api_keys: [{name: solo, token: t0k}]\n");
  EXPECT_FALSE(one.tenancy());
  ASSERT_EQ(one.Keys().size(), 1u);
  EXPECT_EQ(one.Keys()[0].token, "t0k");
  Config legacy = MustParse("auth_token: s3cret\n");
  EXPECT_FALSE(legacy.tenancy());
  ASSERT_EQ(legacy.Keys().size(), 1u);
  EXPECT_EQ(legacy.Keys()[0].token, "s3cret");
  EXPECT_FALSE(MustParse("api_keys: null\n").tenancy());
  EXPECT_TRUE(MustParse("api_keys: []\n").Keys().empty());
  EXPECT_TRUE(MustParse("").Keys().empty());
}

TEST(ConfigTest, ApiKeysOfTheWrongShapeAreRefused) {
  EXPECT_THAT(ErrorOf("api_keys: tok\n"), HasSubstr("api_keys: expected a list"));
  EXPECT_THAT(ErrorOf("api_keys: {name: a, token: b}\n"), HasSubstr("api_keys: expected a list"));
  EXPECT_THAT(ErrorOf("api_keys: [tok]\n"), HasSubstr("api_keys[0]: expected a mapping"));
  EXPECT_THAT(ErrorOf("api_keys: [[a, b]]\n"), HasSubstr("api_keys[0]: expected a mapping"));
  EXPECT_THAT(ErrorOf("api_keys: [{token: t}]\n"), HasSubstr("api_keys[0]: missing required key 'name'"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a}]\n"), HasSubstr("api_keys[0]: missing required key 'token'"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a, token: t, tokn: u}]\n"),
              HasSubstr("api_keys[0].tokn: unknown key"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: [a], token: t}]\n"),
              HasSubstr("api_keys[0].name: expected a string"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a, token: {x: 1}}]\n"),
              HasSubstr("api_keys[0].token: expected a string"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a, token: null}]\n"),
              HasSubstr("api_keys[0].token: expected a string"));
}

TEST(ConfigTest, ApiKeysMustBeNonEmptyAndUnique) {
  EXPECT_THAT(ErrorOf("api_keys: [{name: \"\", token: t}]\n"),
              HasSubstr("api_keys[0].name: must not be empty"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a, token: \"\"}]\n"),
              HasSubstr("api_keys[0].token: an empty token"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a, token: t1}, {name: a, token: t2}]\n"),
              HasSubstr("api_keys[1].name: duplicate name 'a' (also api_keys[0])"));
  std::string dup = ErrorOf("api_keys: [{name: a, token: same-secret}, {name: b, token: same-secret}]\n");
  EXPECT_THAT(dup, HasSubstr("api_keys[1].token: the same token as api_keys[0] ('a')"));
  EXPECT_THAT(dup, Not(HasSubstr("same-secret")));  // a message never repeats a token
  EXPECT_THAT(ErrorOf("api_keys: [{name: a b, token: t}]\n"),
              HasSubstr("api_keys[0].name: names may contain"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: a, token: \"t t\"}]\n"),
              HasSubstr("api_keys[0].token: must be printable ASCII"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: engine, token: t}]\n"),
              HasSubstr("api_keys[0].name: 'engine' is reserved"));
  EXPECT_THAT(ErrorOf("api_keys: [{name: " + std::string(65, 'n') + ", token: t}]\n"),
              HasSubstr("api_keys[0].name: longer than 64 bytes"));
}

TEST(ConfigTest, ApiKeysAndAuthTokenAreExclusive) {
  EXPECT_THAT(ErrorOf("auth_token: s3cret\napi_keys: [{name: a, token: t}]\n"),
              HasSubstr("api_keys: cannot be combined with auth_token"));
  // An empty list is no keys: auth_token alone applies.
  EXPECT_EQ(*MustParse("auth_token: s3cret\napi_keys: []\n").auth_token, "s3cret");
}

TEST(ConfigTest, ApiKeysAllowANonLoopbackListen) {
  Config c = MustParse("listen_address: 0.0.0.0\napi_keys: [{name: a, token: t1}, {name: b, token: t2}]\n");
  EXPECT_EQ(c.listen_address, "0.0.0.0");
  EXPECT_THAT(ErrorOf("listen_address: 0.0.0.0\napi_keys: []\n"), HasSubstr("listen_address"));
}

}  // namespace
}  // namespace skiff
