#include "sandbox/command_env.h"

#include <algorithm>
#include <set>
#include <utility>

namespace skiff {

namespace {
const char* kBasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}  // namespace

std::vector<std::string> LayeredEnv(const Sandbox& sb, const Env& call_env) {
  std::vector<std::pair<std::string, std::string>> layered = {{"PATH", kBasePath}, {"HOME", "/root"}};
  for (const auto& kv : sb.image_env) {
    auto eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) layered.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& kv : sb.env) layered.push_back(kv);
  for (const auto& kv : call_env) layered.push_back(kv);
  std::vector<std::string> env;
  std::set<std::string> seen;
  for (auto it = layered.rbegin(); it != layered.rend(); ++it)
    if (seen.insert(it->first).second) env.push_back(it->first + "=" + it->second);
  std::reverse(env.begin(), env.end());
  return env;
}

std::string CommandCwd(const Sandbox& sb, const std::optional<std::string>& call_cwd) {
  return call_cwd.value_or(sb.image_workdir.empty() ? "/" : sb.image_workdir);
}

std::optional<std::string> ImageUser(const Sandbox& sb) {
  const std::string& u = sb.image_user;
  if (u.empty() || u == "root" || u == "0" || u == "0:0") return std::nullopt;
  return u;
}

}  // namespace skiff
