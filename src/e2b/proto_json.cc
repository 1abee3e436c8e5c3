#include "e2b/proto_json.h"

#include <charconv>
#include <system_error>

#include "base/json_limits.h"
#include "base/text.h"

namespace skiff::e2b {

const nlohmann::json* Member(const nlohmann::json& msg, std::string_view camel, std::string_view snake) {
  if (!msg.is_object()) return nullptr;
  for (std::string_view k : {camel, snake}) {
    if (k.empty()) continue;
    auto it = msg.find(k);
    if (it != msg.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

Result<std::optional<std::string>> OptString(const nlohmann::json& msg, std::string_view camel,
                                             std::string_view snake) {
  const nlohmann::json* v = Member(msg, camel, snake);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return InvalidRequest(std::string(camel) + ": expected a string");
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<uint64_t>> OptUint(const nlohmann::json& msg, std::string_view camel, uint64_t max,
                                        std::string_view snake) {
  const nlohmann::json* v = Member(msg, camel, snake);
  if (!v) return std::optional<uint64_t>();
  uint64_t n = 0;
  if (v->is_number_unsigned()) {
    n = v->get<uint64_t>();
  } else if (v->is_number_integer() && v->get<int64_t>() >= 0) {
    n = static_cast<uint64_t>(v->get<int64_t>());
  } else if (const std::string* t = v->get_ptr<const std::string*>();
             t && !t->empty() && t->find_first_not_of("0123456789") == std::string::npos &&
             std::from_chars(t->data(), t->data() + t->size(), n).ec == std::errc()) {
    // int64 as a string, as protobuf writes it (beyond 2^64 - 1: refused).
  } else {
    return InvalidRequest(std::string(camel) + ": expected a whole number >= 0");
  }
  if (n > max) return InvalidRequest(std::string(camel) + ": at most " + std::to_string(max));
  return std::optional<uint64_t>(n);
}

Result<std::optional<bool>> OptBool(const nlohmann::json& msg, std::string_view camel,
                                    std::string_view snake) {
  const nlohmann::json* v = Member(msg, camel, snake);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean()) return InvalidRequest(std::string(camel) + ": expected true or false");
  return std::optional<bool>(v->get<bool>());
}

Result<std::string> Bytes(const nlohmann::json& value, std::string_view field) {
  if (!value.is_string()) return InvalidRequest(std::string(field) + ": expected base64 bytes");
  std::string s = value.get<std::string>();
  for (char& c : s) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (s.size() % 4 != 0) s.push_back('=');
  std::string why;
  auto d = Base64Decode(s, &why);
  if (!d) return InvalidRequest(std::string(field) + ": not base64 (" + why + ")");
  return std::move(*d);
}

Result<nlohmann::json> ParseMessage(std::string_view text) {
  nlohmann::json j = ParseJsonBounded(text.empty() ? std::string_view("{}") : text);
  if (j.is_discarded() || !j.is_object()) return InvalidRequest("the request message is not a JSON object");
  return j;
}

}  // namespace skiff::e2b
