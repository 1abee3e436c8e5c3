// The engine double's function registry: which live worker owns which
// function id in which namespace, and which worker name is taken in which
// namespace. Pure bookkeeping, no I/O; the double calls it from its event
// loop only. Each rule names the iii engine source it copies (engine/src/…,
// the engine repository at v0.23.0-rc.4; "0.22" means the iii/v0.22.1-rc.2 tag).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace skiff::e2e::engine_double {

// protocol.rs: DEFAULT_NAMESPACE, FUNCTION_NAMESPACE_CONFLICT,
// WORKER_NAMESPACE_CONFLICT, INVALID_NAMESPACE.
inline constexpr const char* kDefaultNamespace = "default";
inline constexpr const char* kFunctionConflict = "FUNCTION_NAMESPACE_CONFLICT";
inline constexpr const char* kWorkerConflict = "WORKER_NAMESPACE_CONFLICT";
inline constexpr const char* kInvalidNamespace = "INVALID_NAMESPACE";

// protocol.rs is_blank_namespace: named, but nothing but whitespace.
inline bool IsBlankNamespace(const nlohmann::json& ns) {
  if (!ns.is_string()) return false;
  const std::string& s = ns.get_ref<const std::string&>();
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

struct RegisteredFunction {
  std::string owner;  // worker id of the owning connection
  nlohmann::json description, request_format, response_format, metadata;
};

class Registry {
 public:
  using Key = std::pair<std::string, std::string>;  // (namespace, id or name)
  // Whether a worker id still names a live connection that is not tearing down.
  using IsLive = std::function<bool(const std::string& worker_id)>;

  // legacy: the engine up to 0.22, where there are no namespaces and a
  // registration never conflicts (mod.rs@0.22 claim_function: `insert` that
  // only warns "Function ownership transferred between two live workers").
  explicit Registry(bool legacy) : legacy_(legacy) {}
  bool legacy() const { return legacy_; }

  // Takes the (namespace, function_id) lease for `worker` (mod.rs claim_in):
  // free, held by the same worker, or held by a worker that is gone or tearing
  // down → taken; held by another live worker → the owner's id is returned and
  // nothing changes. In legacy mode the newcomer always takes it.
  std::optional<std::string> ClaimFunction(const std::string& ns, const std::string& id,
                                           const std::string& worker, RegisteredFunction f,
                                           const IsLive& live) {
    Key k{Ns(ns), id};
    auto it = functions_.find(k);
    if (!legacy_ && it != functions_.end() && it->second.owner != worker && live(it->second.owner)) {
      return it->second.owner;
    }
    f.owner = worker;
    functions_[k] = std::move(f);
    return std::nullopt;
  }

  // CAS release (mod.rs release_function_if_owner): removes the function only
  // while `worker` still owns it, so a worker that lost the id to a newer
  // registrant (0.22) or whose id was taken over after it died cannot remove
  // the live one.
  bool ReleaseFunction(const std::string& ns, const std::string& id, const std::string& worker) {
    auto it = functions_.find({Ns(ns), id});
    if (it == functions_.end() || it->second.owner != worker) return false;
    functions_.erase(it);
    return true;
  }

  const RegisteredFunction* Find(const std::string& ns, const std::string& id) const {
    auto it = functions_.find({Ns(ns), id});
    return it == functions_.end() ? nullptr : &it->second;
  }

  // function.rs namespaces_for: where else an id is registered, for the
  // function_not_found hint (mod.rs resolve_function).
  std::vector<std::string> NamespacesFor(const std::string& id) const {
    std::vector<std::string> out;
    for (auto& [k, f] : functions_) {
      if (k.second == id) out.push_back(k.first);
    }
    return out;
  }

  size_t CountOwnedBy(const std::string& worker) const {
    size_t n = 0;
    for (auto& [k, f] : functions_) n += f.owner == worker;
    return n;
  }

  // One live worker name per namespace (mod.rs claim_worker_name). Legacy
  // engines had no name leases.
  std::optional<std::string> ClaimWorkerName(const std::string& ns, const std::string& name,
                                             const std::string& worker, const IsLive& live) {
    if (legacy_) return std::nullopt;
    Key k{ns, name};
    auto it = names_.find(k);
    if (it != names_.end() && it->second != worker && live(it->second)) return it->second;
    names_[k] = worker;
    return std::nullopt;
  }
  // mod.rs release_worker_name_if_owner.
  void ReleaseWorkerName(const std::string& ns, const std::string& name, const std::string& worker) {
    auto it = names_.find({ns, name});
    if (it != names_.end() && it->second == worker) names_.erase(it);
  }

  // Every (namespace, id) → owner, for tests.
  std::map<Key, std::string> Owners() const {
    std::map<Key, std::string> out;
    for (auto& [k, f] : functions_) out[k] = f.owner;
    return out;
  }

 private:
  // 0.22 has one flat id space; filing everything under `default` keeps the
  // lookups the same.
  std::string Ns(const std::string& ns) const { return legacy_ ? kDefaultNamespace : ns; }

  bool legacy_;
  std::map<Key, RegisteredFunction> functions_;
  std::map<Key, std::string> names_;
};

}  // namespace skiff::e2e::engine_double
