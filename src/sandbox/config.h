// The daemon's configuration (docs/configuration.md#keys), as a plain value. Parsing and
// validation of YAML lives in sandbox/config.cc; everything else reads this.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "images/image_policy.h"

namespace skiff {

struct ImageCaps {
  std::optional<uint32_t> max_cpus;
  std::optional<uint32_t> max_memory_mb;
};

struct NetworkConfig {
  std::vector<uint16_t> host_ports;
  std::vector<std::string> allow;
};

// One API key (docs/configuration.md#tenants): the bearer token a caller
// presents and the tenant it names.
struct ApiKey {
  std::string name;
  std::string token;
};

// The tenant of worker mode's calls (docs/configuration.md#tenants); no
// API key may be named so.
inline constexpr std::string_view kEngineTenant = "engine";

struct Config {
  bool auto_install = true;
  // nullopt = key absent: the defaults {python, node}. Embedded `skiff run`
  // sets allow_all instead (the caller is the operator).
  std::optional<std::vector<std::string>> image_allowlist;
  bool allow_all_images = false;
  uint64_t default_idle_timeout_secs = 300;
  uint32_t max_concurrent_sandboxes = 32;
  uint32_t max_concurrent_exec_per_sandbox = 4;  // 0 means 1
  uint64_t max_exec_timeout_ms = 300000;         // 0 means 1
  // Host-side deadline of an fs call to an agent: a one-shot call must be
  // answered within it, a streamed transfer must make progress within it.
  uint64_t fs_timeout_ms = 120000;  // >= 1
  // Calls to one sandbox running or queued at once; beyond it S003.
  uint32_t max_calls_per_sandbox = 64;  // >= 1
  uint32_t default_cpus = 1;
  uint32_t default_memory_mb = 512;
  // Snapshots (docs/snapshots.md): where they are kept ("" = <data dir>/
  // snapshots), the bytes all of them may take, and how many there may be.
  std::string snapshot_dir;
  uint64_t snapshot_max_bytes = uint64_t{16} << 30;
  uint32_t snapshot_max_count = 64;
  std::map<std::string, ImageCaps> per_image_caps;
  std::map<std::string, std::string> custom_images;  // name -> OCI ref or archive path
  std::string listen_address = "127.0.0.1";
  std::optional<std::string> auth_token;
  // api_keys: names and tokens unique and non-empty; never together with
  // auth_token (ParseConfig refuses both).
  std::vector<ApiKey> api_keys;
  uint16_t listen_port = 49134;
  std::optional<std::string> unix_socket;
  // Open API connections (TCP and unix socket together); one beyond it is
  // answered 503 S400 and closed at once.
  uint32_t max_connections = 1024;
  std::string isolation = "auto";  // auto | microvm | jail
  std::map<std::string, uint32_t> pool;
  NetworkConfig network;
  std::string images_dir;  // "" = <data dir>/images
  std::optional<std::string> engine_url;
  // wss:// only: the CA certificates (PEM) the engine's certificate must
  // chain to; nullopt = the system's trust store.
  std::optional<std::string> engine_ca_file;
  // A file holding the credential sent to the engine on connect
  // (`Authorization: Bearer <token>`, checked by the engine's auth function);
  // read at start, refused when others may read it.
  std::optional<std::string> engine_token_file;
  // Worker mode as one host of a fleet (docs/multihost.md): the iii
  // namespace its functions are registered in; nullopt = the default one.
  std::optional<std::string> iii_namespace;
  std::string docs_base = "docs/errors.md";
  std::vector<std::string> warnings;  // unknown keys etc., logged at start

  uint32_t exec_cap() const {
    return max_concurrent_exec_per_sandbox == 0 ? 1 : max_concurrent_exec_per_sandbox;
  }
  uint64_t exec_timeout_cap() const { return max_exec_timeout_ms == 0 ? 1 : max_exec_timeout_ms; }
  bool ImageAllowed(const std::string& name) const;
  // The bearer tokens callers may present: auth_token as one unnamed key,
  // else api_keys. Empty: no authentication.
  std::vector<ApiKey> Keys() const;
  // More than one key: each key's caller sees only its own sandboxes.
  bool tenancy() const { return api_keys.size() > 1; }
};

// Parses and validates a YAML document (docs/configuration.md#keys). Errors name the key.
Result<Config> ParseConfig(const std::string& yaml_text);
Result<Config> LoadConfigFile(const std::string& path);
// Why `ns` cannot be an iii_namespace, or "" when it can: 1-64 letters,
// digits, '-', '_' and '.', and not "default".
std::string IiiNamespaceProblem(const std::string& ns);
// Why `url` cannot be the engine's URL, or "": ws:// or wss://, and ws://
// only to a loopback host (docs/multihost.md#tls).
std::string EngineUrlProblem(const std::string& url);
// The engine link's keys together (after flags are applied): the CA file
// only with wss://, neither file without an engine; "" when fine.
std::string EngineLinkProblem(const Config& c);
// What the image catalog and store need from `config`: the store directory,
// the allowlist as Config::ImageAllowed applies it, custom images and
// auto_install.
images::ImagePolicy ImagePolicyFor(const Config& config);
// Whether a QEMU system emulator for this architecture is on PATH (or at
// $SKIFF_QEMU). `isolation: microvm` without it is a startup error.
bool QemuInstalled();

}  // namespace skiff
