#include "api/http_util.h"

#include <algorithm>
#include <memory>

namespace skiff::api {
std::optional<std::map<std::string, std::string>> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view part = query.substr(start, amp - start);
    if (!part.empty()) {
      size_t eq = part.find('=');
      auto key = PercentDecode(part.substr(0, eq), true);
      auto val = PercentDecode(eq == std::string_view::npos ? "" : part.substr(eq + 1), true);
      if (!key || !val) return std::nullopt;
      out.emplace(std::move(*key), std::move(*val));  // first occurrence wins
    }
    start = amp + 1;
  }
  return out;
}

std::optional<Target> SplitTarget(std::string_view target) {
  size_t q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  if (raw_path.empty() || raw_path.front() != '/') return std::nullopt;
  Target t;
  // Decode segment by segment so an encoded '/' (%2F) cannot fake a route.
  std::string path;
  size_t start = 1;
  path.push_back('/');
  while (start <= raw_path.size()) {
    size_t slash = raw_path.find('/', start);
    if (slash == std::string_view::npos) slash = raw_path.size();
    auto seg = PercentDecode(raw_path.substr(start, slash - start));
    if (!seg) return std::nullopt;
    if (seg->find('/') != std::string::npos) {
      // Keep the escape: the segment is a parameter that contains '/'.
      std::string esc;
      for (char c : *seg) {
        if (c == '/')
          esc += "%2F";
        else
          esc.push_back(c);
      }
      *seg = esc;
    }
    path += *seg;
    if (slash < raw_path.size()) path.push_back('/');
    start = slash + 1;
  }
  t.path = std::move(path);
  if (q != std::string_view::npos) t.query = std::string(target.substr(q + 1));
  return t;
}

RouteMatch MatchRoute(std::string_view p) {
  RouteMatch m;
  auto starts = [&](std::string_view pre) { return p.substr(0, pre.size()) == pre; };
  if (p == "/") {
    m.route = Route::kEngine;
  } else if (p == "/otel" || p == "/otel/") {
    m.route = Route::kOtel;
  } else if (p == "/healthz") {
    m.route = Route::kHealthz;
  } else if (p == "/metrics") {
    m.route = Route::kMetrics;
  } else if (p == "/openapi.json") {
    m.route = Route::kOpenApi;
  } else if (p == "/v1/run") {
    m.route = Route::kRun;
  } else if (p == "/v1/functions" || p == "/v1/functions/") {
    m.route = Route::kFunctionList;
  } else if (starts("/v1/functions/")) {
    std::string_view id = p.substr(std::string_view("/v1/functions/").size());
    if (!id.empty() && id.find('/') == std::string_view::npos) {
      m.route = Route::kFunctionCall;
      m.param = std::string(id);
    }
  } else if (starts("/v1/sandboxes/")) {
    std::string_view rest = p.substr(std::string_view("/v1/sandboxes/").size());
    size_t slash = rest.find('/');
    if (slash != std::string_view::npos && slash > 0 && rest.substr(slash) == "/files") {
      m.route = Route::kFiles;
      m.param = std::string(rest.substr(0, slash));
    } else if (slash != std::string_view::npos && slash > 0) {
      // {id}/processes/{pid}/output
      std::string_view tail = rest.substr(slash);
      constexpr std::string_view kPre = "/processes/";
      for (auto [post, route] : {std::pair{std::string_view("/output"), Route::kProcessOutput},
                                 std::pair{std::string_view("/tty"), Route::kProcessTty}}) {
        if (tail.size() > kPre.size() + post.size() && tail.substr(0, kPre.size()) == kPre &&
            tail.substr(tail.size() - post.size()) == post) {
          std::string_view pid = tail.substr(kPre.size(), tail.size() - kPre.size() - post.size());
          if (!pid.empty() && pid.find('/') == std::string_view::npos) {
            m.route = route;
            m.param = std::string(rest.substr(0, slash));
            m.param2 = std::string(pid);
          }
        }
      }
    }
  } else if (starts("/ws/channels/")) {
    std::string_view id = p.substr(std::string_view("/ws/channels/").size());
    if (!id.empty() && id.find('/') == std::string_view::npos) {
      m.route = Route::kChannel;
      m.param = std::string(id);
    }
  }
  return m;
}

std::optional<int64_t> ParseDecimal(std::string_view text, int64_t max) {
  if (text.empty()) return std::nullopt;
  int64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    int d = c - '0';
    if (n > (max - d) / 10) return std::nullopt;  // n * 10 + d would pass max
    n = n * 10 + d;
  }
  return n;
}

Result<nlohmann::json> ParsePayload(std::string_view body) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  if (std::all_of(body.begin(), body.end(), ws)) return nlohmann::json::object();
  if (JsonDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return InvalidRequest("payload is not valid JSON: nesting deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels");
  }
  try {
    return nlohmann::json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    if (!what.empty() && what.front() == '[') {
      size_t close = what.find("] ");
      if (close != std::string::npos) what = what.substr(close + 2);
    }
    return InvalidRequest("payload is not valid JSON: " + what);
  }
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// An output adapter that only counts what the serializer writes.
class CountingOutput : public nlohmann::detail::output_adapter_protocol<char> {
 public:
  explicit CountingOutput(size_t* n) : n_(n) {}
  void write_character(char /*c*/) override { ++*n_; }
  void write_characters(const char* /*s*/, std::size_t length) override { *n_ += length; }

 private:
  size_t* n_;
};

}  // namespace

size_t DumpedSize(const nlohmann::json& j) {
  size_t n = 0;
  nlohmann::detail::serializer<nlohmann::json> s(std::make_shared<CountingOutput>(&n), ' ',
                                                 nlohmann::json::error_handler_t::replace);
  s.dump(j, false, false, 0);
  return n;
}

std::optional<std::string_view> BearerToken(std::string_view h) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (h.size() <= kPrefix.size()) return std::nullopt;
  for (size_t i = 0; i < kPrefix.size(); ++i) {
    char c = h[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    char k = kPrefix[i];
    if (k >= 'A' && k <= 'Z') k = static_cast<char>(k - 'A' + 'a');
    if (c != k) return std::nullopt;
  }
  std::string_view tok = h.substr(kPrefix.size());
  while (!tok.empty() && tok.front() == ' ') tok.remove_prefix(1);
  while (!tok.empty() && tok.back() == ' ') tok.remove_suffix(1);
  if (tok.empty()) return std::nullopt;
  return tok;
}

std::optional<uint32_t> ParseModeString(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '7') return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(c - '0');
    if (v > 07777) return std::nullopt;
  }
  return static_cast<uint32_t>(v);
}

}  // namespace skiff::api
