// Parsing and validation of the daemon configuration (docs/configuration.md#keys).
//
// Every rule here fails closed: a value of the wrong type, out of range, or
// contradicting a security rule is a startup error whose message names the
// key. Unknown keys are not errors; they are collected as warnings that the
// daemon logs at start.
#include "sandbox/config.h"

#include <arpa/inet.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "base/find_executable.h"
#include "base/ws_url.h"

namespace skiff {
namespace {

const std::set<std::string> kPresets = {"python", "node", "base", "code-interpreter"};
// image_allowlist absent.
const std::vector<std::string> kDefaultAllowlist = {"python", "node", "code-interpreter"};

Error ConfigError(std::string_view key, std::string_view detail) {
  std::string msg = "invalid config: ";
  msg += key;
  msg += ": ";
  msg += detail;
  return Error(Code::kS001, std::move(msg));
}

// The dotted name of a nested key: "per_image_caps" + "python".
std::string KeyPath(std::string_view key, std::string_view name) {
  std::string path(key);
  path += '.';
  path += name;
  return path;
}

std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    default:
      return "an undefined value";
  }
}

Result<bool> GetBool(const YAML::Node& n, std::string_view key) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  return ConfigError(key, "expected a boolean (true or false), got " + Describe(n));
}

// An unsigned integer in [lo, hi]. Only plain decimal digits are accepted
// (no sign, fraction, exponent, hex or octal forms).
Result<uint64_t> GetUint(const YAML::Node& n, std::string_view key, uint64_t lo, uint64_t hi) {
  if (!n.IsScalar() || n.Tag() == "!") {
    return ConfigError(key, "expected an integer, got " + Describe(n));
  }
  const std::string& s = n.Scalar();
  if (s.empty() || s.size() > 20 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return ConfigError(key, "expected an integer >= " + std::to_string(lo) + ", got " + Describe(n));
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0' || v < lo || v > hi) {
    return ConfigError(
        key, "value " + s + " is out of range (" + std::to_string(lo) + "–" + std::to_string(hi) + ")");
  }
  return static_cast<uint64_t>(v);
}

Result<std::string> GetString(const YAML::Node& n, std::string_view key) {
  // A quoted scalar is a string whatever it looks like; an unquoted one is
  // accepted too (YAML has no separate string type for plain scalars).
  if (!n.IsScalar()) return ConfigError(key, "expected a string, got " + Describe(n));
  if (n.Scalar().find('\0') != std::string::npos) {
    return ConfigError(key, "must not contain NUL bytes");
  }
  return n.Scalar();
}

bool NodeIsNull(const YAML::Node& n) { return n.IsNull(); }

Result<std::optional<std::string>> GetOptString(const YAML::Node& n, std::string_view key) {
  if (NodeIsNull(n)) return std::optional<std::string>();
  SKIFF_ASSIGN_OR_RETURN(std::string s, GetString(n, key));
  return std::optional<std::string>(std::move(s));
}

Result<std::vector<std::string>> GetStringList(const YAML::Node& n, std::string_view key) {
  std::vector<std::string> out;
  if (NodeIsNull(n)) return out;
  if (!n.IsSequence()) return ConfigError(key, "expected a list of strings, got " + Describe(n));
  size_t i = 0;
  for (const auto& item : n) {
    std::string k = std::string(key) + "[" + std::to_string(i++) + "]";
    SKIFF_ASSIGN_OR_RETURN(std::string s, GetString(item, k));
    out.push_back(std::move(s));
  }
  return out;
}

bool ParseIp(const std::string& s, bool* v6) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, s.c_str(), buf) == 1) {
    if (v6) *v6 = false;
    return true;
  }
  if (inet_pton(AF_INET6, s.c_str(), buf) == 1) {
    if (v6) *v6 = true;
    return true;
  }
  return false;
}

// "example.com", "*.example.com": labels of [A-Za-z0-9-], not starting or
// ending with '-', 1–63 bytes each, 253 in total, at least two labels.
bool IsDomainPattern(std::string s) {
  if (s.rfind("*.", 0) == 0) s = s.substr(2);
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s.empty() || s.size() > 253) return false;
  size_t labels = 0;
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    if (dot == std::string::npos) dot = s.size();
    std::string_view label(s.data() + start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      if (!ok) return false;
    }
    ++labels;
    start = dot + 1;
    if (dot == s.size()) break;
  }
  return labels >= 1;
}

bool IsAllowEntry(const std::string& e) {
  if (e.empty()) return false;
  auto slash = e.find('/');
  if (slash != std::string::npos) {
    std::string addr = e.substr(0, slash);
    std::string len = e.substr(slash + 1);
    bool v6 = false;
    if (!ParseIp(addr, &v6)) return false;
    if (len.empty() || len.size() > 3 ||
        !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    int bits = std::stoi(len);
    return bits <= (v6 ? 128 : 32);
  }
  if (ParseIp(e, nullptr)) return true;
  // A bare dotted-number string that is not a valid IPv4 address (e.g.
  // "300.1.1.1") is a typo, not a domain.
  if (std::all_of(e.begin(), e.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    return false;
  }
  return IsDomainPattern(e);
}

bool IsLoopbackAddress(const std::string& a) { return IsLoopbackHost(a); }

// api_keys (docs/configuration.md#tenants): a list of {name, token}
// mappings. Names and tokens are unique and non-empty; a name is a short
// label (it appears in logs), a token is printable ASCII without spaces (it
// travels in an Authorization header). Messages never repeat a token.
Result<std::vector<ApiKey>> GetApiKeys(const YAML::Node& n, std::string_view key) {
  std::vector<ApiKey> keys;
  if (NodeIsNull(n)) return keys;
  if (!n.IsSequence()) {
    return ConfigError(key, "expected a list of {name, token} mappings, got " + Describe(n));
  }
  size_t i = 0;
  for (const auto& item : n) {
    std::string k = std::string(key) + "[" + std::to_string(i++) + "]";
    if (!item.IsMap()) return ConfigError(k, "expected a mapping {name, token}, got " + Describe(item));
    std::optional<std::string> name, token;
    for (const auto& f : item) {
      std::string field = f.first.Scalar();
      std::string fk = KeyPath(k, field);
      if (field == "name") {
        SKIFF_ASSIGN_OR_RETURN(name, GetString(f.second, fk));
      } else if (field == "token") {
        SKIFF_ASSIGN_OR_RETURN(token, GetString(f.second, fk));
      } else {
        return ConfigError(fk, "unknown key (an API key has only name and token)");
      }
    }
    if (!name) return ConfigError(k, "missing required key 'name'");
    if (!token) return ConfigError(k, "missing required key 'token'");
    std::string nk = KeyPath(k, "name"), tk = KeyPath(k, "token");
    if (name->empty()) return ConfigError(nk, "must not be empty");
    if (name->size() > 64) return ConfigError(nk, "longer than 64 bytes");
    for (char ch : *name) {
      bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '-' || ch == '_' || ch == '.';
      if (!ok) return ConfigError(nk, "names may contain only letters, digits, '-', '_' and '.'");
    }
    if (*name == kEngineTenant) {
      return ConfigError(nk, "'" + *name + "' is reserved for the calls of worker mode (engine_url)");
    }
    if (token->empty()) return ConfigError(tk, "an empty token would accept anyone");
    for (char ch : *token) {
      if (ch <= ' ' || ch > '~') return ConfigError(tk, "must be printable ASCII without spaces");
    }
    for (size_t j = 0; j < keys.size(); ++j) {
      std::string other = std::string(key) + "[" + std::to_string(j) + "]";
      if (keys[j].name == *name)
        return ConfigError(nk, "duplicate name '" + *name + "' (also " + other + ")");
      if (keys[j].token == *token)
        return ConfigError(tk, "the same token as " + other + " ('" + keys[j].name + "')");
    }
    keys.push_back(ApiKey{std::move(*name), std::move(*token)});
  }
  return keys;
}

}  // namespace

std::vector<ApiKey> Config::Keys() const {
  if (auth_token) return {ApiKey{"", *auth_token}};
  return api_keys;
}

bool QemuInstalled() {
  if (const char* q = std::getenv("SKIFF_QEMU"); q && *q) return ::access(q, X_OK) == 0;
#if defined(__aarch64__)
  return FindExecutable("qemu-system-aarch64").has_value();
#else
  return FindExecutable("qemu-system-x86_64").has_value();
#endif
}

bool Config::ImageAllowed(const std::string& name) const {
  if (allow_all_images) return true;
  const std::vector<std::string>& allowed = image_allowlist ? *image_allowlist : kDefaultAllowlist;
  return std::find(allowed.begin(), allowed.end(), name) != allowed.end();
}

images::ImagePolicy ImagePolicyFor(const Config& config) {
  images::ImagePolicy p;
  p.images_dir = config.images_dir;
  p.auto_install = config.auto_install;
  p.allow_all = config.allow_all_images;
  p.allowlist = config.image_allowlist ? *config.image_allowlist : kDefaultAllowlist;
  p.custom_images = config.custom_images;
  return p;
}

std::string IiiNamespaceProblem(const std::string& ns) {
  if (ns.empty()) return "must not be empty";
  if (ns.size() > 64) return "longer than 64 bytes";
  for (char ch : ns) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_' || ch == '.';
    if (!ok) return "'" + ns + "': a namespace may contain only letters, digits, '-', '_' and '.'";
  }
  if (ns == "default") return "'default' is the router's namespace; give each host its own (skiff.<host>)";
  return "";
}

std::string EngineUrlProblem(const std::string& url) {
  std::string why;
  auto u = ParseWsUrl(url, &why);
  if (!u) return "'" + url + "': " + why;
  if (!u->tls && !IsLoopbackHost(u->host)) {
    return "'" + url +
           "': ws:// carries every call and the credential in the clear, so it is taken only for an engine "
           "on "
           "this machine (localhost, 127.0.0.0/8, ::1); across a network use wss:// (docs/multihost.md#tls)";
  }
  return "";
}

std::string EngineLinkProblem(const Config& c) {
  if (!c.engine_url) {
    if (c.engine_ca_file) return "engine_ca_file needs worker mode: give the engine (engine_url, --engine)";
    if (c.engine_token_file)
      return "engine_token_file needs worker mode: give the engine (engine_url, --engine)";
    return "";
  }
  if (auto why = EngineUrlProblem(*c.engine_url); !why.empty()) return "engine_url: " + why;
  if (c.engine_ca_file && c.engine_url->rfind("wss://", 0) != 0)
    return "engine_ca_file is for a wss:// engine; engine_url is '" + *c.engine_url + "'";
  return "";
}

Result<Config> ParseConfig(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return ConfigError("yaml", std::string("malformed YAML: ") + e.what());
  }
  Config c;
  if (!root || root.IsNull()) return c;  // empty file: all defaults
  if (!root.IsMap()) {
    return ConfigError("(top level)", "expected a mapping of keys, got " + Describe(root));
  }

  // Collect keys first: a duplicate key is ambiguous, so refuse it.
  std::set<std::string> seen;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) return ConfigError("(top level)", "keys must be strings");
    const std::string& key = kv.first.Scalar();
    if (!seen.insert(key).second) return ConfigError(key, "key given twice");
  }
  if (seen.count("sandbox")) {
    return ConfigError("sandbox",
                       "the wrapped 'sandbox:' shape is not supported; move its keys to the top "
                       "level");
  }

  bool saw_exec_zero = false;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "auto_install") {
      SKIFF_ASSIGN_OR_RETURN(c.auto_install, GetBool(v, key));
    } else if (key == "image_allowlist") {
      if (NodeIsNull(v)) {
        // An explicit null is read as "empty": fail closed.
        c.image_allowlist = std::vector<std::string>{};
      } else {
        SKIFF_ASSIGN_OR_RETURN(auto list, GetStringList(v, key));
        for (size_t i = 0; i < list.size(); ++i) {
          if (list[i].empty()) {
            return ConfigError(key + "[" + std::to_string(i) + "]", "empty image name");
          }
        }
        c.image_allowlist = std::move(list);
      }
    } else if (key == "default_idle_timeout_secs") {
      SKIFF_ASSIGN_OR_RETURN(c.default_idle_timeout_secs,
                             GetUint(v, key, 0, std::numeric_limits<int64_t>::max() / 1000));
    } else if (key == "snapshot_dir") {
      SKIFF_ASSIGN_OR_RETURN(c.snapshot_dir, GetString(v, key));
      if (c.snapshot_dir.empty() || c.snapshot_dir[0] != '/')
        return ConfigError(key, "expected an absolute path");
    } else if (key == "snapshot_max_bytes") {
      SKIFF_ASSIGN_OR_RETURN(c.snapshot_max_bytes, GetUint(v, key, 0, std::numeric_limits<int64_t>::max()));
    } else if (key == "snapshot_max_count") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 0, 100000));
      c.snapshot_max_count = static_cast<uint32_t>(n);
    } else if (key == "max_concurrent_sandboxes") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 0, UINT32_MAX));
      c.max_concurrent_sandboxes = static_cast<uint32_t>(n);
    } else if (key == "max_concurrent_exec_per_sandbox") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 0, UINT32_MAX));
      c.max_concurrent_exec_per_sandbox = static_cast<uint32_t>(n);
      saw_exec_zero = n == 0;
    } else if (key == "max_exec_timeout_ms") {
      SKIFF_ASSIGN_OR_RETURN(c.max_exec_timeout_ms,
                             GetUint(v, key, 0, std::numeric_limits<int64_t>::max() / 1000));
      if (c.max_exec_timeout_ms == 0) c.warnings.push_back("max_exec_timeout_ms: 0 means 1 ms");
    } else if (key == "fs_timeout_ms") {
      SKIFF_ASSIGN_OR_RETURN(c.fs_timeout_ms, GetUint(v, key, 1, std::numeric_limits<int64_t>::max() / 1000));
    } else if (key == "max_calls_per_sandbox") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 1, 100000));
      c.max_calls_per_sandbox = static_cast<uint32_t>(n);
    } else if (key == "default_cpus") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 1, 255));
      c.default_cpus = static_cast<uint32_t>(n);
    } else if (key == "default_memory_mb") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 64, UINT32_MAX));
      c.default_memory_mb = static_cast<uint32_t>(n);
    } else if (key == "per_image_caps") {
      if (NodeIsNull(v)) continue;
      if (!v.IsMap()) return ConfigError(key, "expected a mapping, got " + Describe(v));
      for (const auto& img : v) {
        std::string name = img.first.Scalar();
        std::string k = KeyPath(key, name);
        if (name.empty()) return ConfigError(key, "empty image name");
        ImageCaps caps;
        if (!NodeIsNull(img.second)) {
          if (!img.second.IsMap()) {
            return ConfigError(k,
                               "expected a mapping {max_cpus, max_memory_mb}, got " + Describe(img.second));
          }
          for (const auto& f : img.second) {
            std::string fk = KeyPath(k, f.first.Scalar());
            if (f.first.Scalar() == "max_cpus") {
              if (NodeIsNull(f.second)) continue;  // omitted or null = no limit
              SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(f.second, fk, 0, UINT32_MAX));
              caps.max_cpus = static_cast<uint32_t>(n);
            } else if (f.first.Scalar() == "max_memory_mb") {
              if (NodeIsNull(f.second)) continue;
              SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(f.second, fk, 0, UINT32_MAX));
              caps.max_memory_mb = static_cast<uint32_t>(n);
            } else {
              c.warnings.push_back("unknown key ignored: " + fk);
            }
          }
        }
        c.per_image_caps[name] = caps;
      }
    } else if (key == "custom_images") {
      if (NodeIsNull(v)) continue;
      if (!v.IsMap()) return ConfigError(key, "expected a mapping name -> image, got " + Describe(v));
      for (const auto& img : v) {
        std::string name = img.first.Scalar();
        if (name.empty()) return ConfigError(key, "empty image name");
        std::string k = KeyPath(key, name);
        if (kPresets.count(name) || name == "host") {
          return ConfigError(k, "'" + name + "' is a built-in catalog name and cannot be redefined");
        }
        for (char ch : name) {
          bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '-' || ch == '_' || ch == '.';
          if (!ok) {
            return ConfigError(k, "image names may contain only letters, digits, '-', '_' and '.'");
          }
        }
        SKIFF_ASSIGN_OR_RETURN(std::string ref, GetString(img.second, k));
        if (ref.empty()) return ConfigError(k, "empty image reference");
        c.custom_images[name] = ref;
      }
    } else if (key == "listen_address") {
      SKIFF_ASSIGN_OR_RETURN(c.listen_address, GetString(v, key));
      if (c.listen_address != "localhost" && !ParseIp(c.listen_address, nullptr)) {
        return ConfigError(key, "expected an IP address or 'localhost', got '" + c.listen_address + "'");
      }
    } else if (key == "auth_token") {
      SKIFF_ASSIGN_OR_RETURN(c.auth_token, GetOptString(v, key));
      if (c.auth_token && c.auth_token->empty()) {
        return ConfigError(key, "an empty token would accept anyone; remove the key or set one");
      }
    } else if (key == "api_keys") {
      SKIFF_ASSIGN_OR_RETURN(c.api_keys, GetApiKeys(v, key));
    } else if (key == "listen_port") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 1, 65535));
      c.listen_port = static_cast<uint16_t>(n);
    } else if (key == "unix_socket") {
      SKIFF_ASSIGN_OR_RETURN(c.unix_socket, GetOptString(v, key));
    } else if (key == "max_connections") {
      SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(v, key, 1, 1u << 20));
      c.max_connections = static_cast<uint32_t>(n);
    } else if (key == "isolation") {
      SKIFF_ASSIGN_OR_RETURN(c.isolation, GetString(v, key));
      if (c.isolation != "auto" && c.isolation != "microvm" && c.isolation != "jail") {
        return ConfigError(key, "expected auto, microvm or jail, got '" + c.isolation + "'");
      }
    } else if (key == "pool") {
      if (NodeIsNull(v)) continue;
      if (!v.IsMap()) return ConfigError(key, "expected a mapping image -> count, got " + Describe(v));
      for (const auto& p : v) {
        std::string name = p.first.Scalar();
        SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(p.second, KeyPath(key, name), 0, 1024));
        c.pool[name] = static_cast<uint32_t>(n);
      }
    } else if (key == "network") {
      if (NodeIsNull(v)) continue;
      if (!v.IsMap()) return ConfigError(key, "expected a mapping, got " + Describe(v));
      for (const auto& f : v) {
        std::string fk = "network." + f.first.Scalar();
        if (f.first.Scalar() == "host_ports") {
          if (NodeIsNull(f.second)) continue;
          if (!f.second.IsSequence()) {
            return ConfigError(fk, "expected a list of ports, got " + Describe(f.second));
          }
          size_t i = 0;
          for (const auto& port : f.second) {
            SKIFF_ASSIGN_OR_RETURN(uint64_t n, GetUint(port, fk + "[" + std::to_string(i++) + "]", 1, 65535));
            c.network.host_ports.push_back(static_cast<uint16_t>(n));
          }
        } else if (f.first.Scalar() == "allow") {
          SKIFF_ASSIGN_OR_RETURN(auto list, GetStringList(f.second, fk));
          for (size_t i = 0; i < list.size(); ++i) {
            if (!IsAllowEntry(list[i])) {
              return ConfigError(fk + "[" + std::to_string(i) + "]",
                                 "not a domain, *.domain, IP address or CIDR: '" + list[i] + "'");
            }
          }
          c.network.allow = std::move(list);
        } else {
          c.warnings.push_back("unknown key ignored: " + fk);
        }
      }
    } else if (key == "images_dir") {
      SKIFF_ASSIGN_OR_RETURN(c.images_dir, GetString(v, key));
    } else if (key == "engine_url") {
      SKIFF_ASSIGN_OR_RETURN(c.engine_url, GetOptString(v, key));
      if (c.engine_url) {
        if (auto why = EngineUrlProblem(*c.engine_url); !why.empty()) return ConfigError(key, why);
      }
    } else if (key == "engine_ca_file") {
      SKIFF_ASSIGN_OR_RETURN(c.engine_ca_file, GetOptString(v, key));
      if (c.engine_ca_file && c.engine_ca_file->empty()) return ConfigError(key, "empty path");
    } else if (key == "engine_token_file") {
      SKIFF_ASSIGN_OR_RETURN(c.engine_token_file, GetOptString(v, key));
      if (c.engine_token_file && c.engine_token_file->empty()) return ConfigError(key, "empty path");
    } else if (key == "iii_namespace") {
      SKIFF_ASSIGN_OR_RETURN(c.iii_namespace, GetOptString(v, key));
      if (c.iii_namespace) {
        if (auto why = IiiNamespaceProblem(*c.iii_namespace); !why.empty()) return ConfigError(key, why);
      }
    } else if (key == "docs_base") {
      SKIFF_ASSIGN_OR_RETURN(c.docs_base, GetString(v, key));
    } else {
      c.warnings.push_back("unknown key ignored: " + key);
    }
  }

  if (saw_exec_zero) c.warnings.push_back("max_concurrent_exec_per_sandbox: 0 means 1");

  // Cross-key rules.
  if (c.auth_token && !c.api_keys.empty()) {
    return ConfigError("api_keys", "cannot be combined with auth_token; list that token as one of the keys");
  }
  if (!IsLoopbackAddress(c.listen_address) && c.Keys().empty()) {
    return ConfigError("listen_address", "'" + c.listen_address +
                                             "' is not a loopback address; set auth_token or api_keys to "
                                             "listen on it");
  }
  if (c.engine_url || c.engine_ca_file || c.engine_token_file) {
    if (auto why = EngineLinkProblem(c); !why.empty()) return ConfigError("engine_url", why);
  }
  auto known = [&](const std::string& name) {
    return kPresets.count(name) || name == "host" || c.custom_images.count(name);
  };
  for (const auto& [name, n] : c.pool) {
    if (!known(name) || !c.ImageAllowed(name)) {
      return ConfigError("pool." + name,
                         "'" + name + "' is not an allowlisted catalog image (image_allowlist)");
    }
  }
  if (c.image_allowlist) {
    for (const auto& name : *c.image_allowlist) {
      if (!known(name)) {
        c.warnings.push_back("image_allowlist: '" + name +
                             "' is not a catalog name (preset, host or custom_images)");
      }
    }
  }
  for (const auto& [name, caps] : c.per_image_caps) {
    if (!known(name)) {
      c.warnings.push_back("per_image_caps: '" + name + "' is not a catalog name");
    }
  }
  if (c.isolation == "microvm" && !QemuInstalled()) {
    return ConfigError("isolation",
                       "microvm needs QEMU (qemu-system-*), which is not installed on this host");
  }
  return c;
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ConfigError("--config", "cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return ConfigError("--config", "cannot read " + path);
  return ParseConfig(ss.str());
}

}  // namespace skiff
