#include "e2b/file_signature.h"

#include <string>

#include "base/sha256.h"
#include "base/text.h"

namespace skiff::e2b {

std::string FileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::optional<int64_t> expiry) {
  std::string raw;
  raw.append(path).append(":").append(operation).append(":").append(user).append(":").append(token);
  if (expiry) raw.append(":").append(std::to_string(*expiry));
  std::string hex = Sha256Hex(raw);
  std::string digest;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    digest.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  std::string b64 = Base64Encode(digest);
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "v1_" + b64;
}

}  // namespace skiff::e2b
