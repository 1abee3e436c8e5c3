#include "e2b/basic_user.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "base/text.h"

namespace skiff::e2b {

bool IsUserName(std::string_view user) {
  if (user.size() > 32) return false;
  for (char c : user) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Result<std::string> BasicUser(const std::string& authorization) {
  if (authorization.empty()) return std::string();
  constexpr std::string_view kBasic = "Basic ";
  if (authorization.size() < kBasic.size() ||
      !std::equal(kBasic.begin(), kBasic.end(), authorization.begin(),
                  [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
    return InvalidRequest("Authorization: only Basic user selection is understood here");
  auto decoded = Base64Decode(std::string_view(authorization).substr(kBasic.size()));
  if (!decoded) return InvalidRequest("Authorization: not base64");
  std::string user = decoded->substr(0, decoded->find(':'));
  if (!IsUserName(user)) return InvalidRequest("Authorization: not a user name");
  return user;
}

}  // namespace skiff::e2b
