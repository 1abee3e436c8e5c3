// The HTTP side of the E2B-compatible API (docs/e2b.md): which requests are
// E2B's (the /e2b prefix), the e2b::Request a request's header becomes, and
// the ResponseWriter that carries an answer from the worker thread through
// a bounded channel to the connection (a meta frame with the status and
// headers, then the body's pieces, each sent as it comes).
#pragma once

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels.h"
#include "e2b/exchange.h"
#include "e2b/http_forward.h"

namespace skiff::api {

// "/e2b" and everything below it (and, at the root, a signed /files URL:
// e2b::Api::IsSignedUrl).
inline bool IsE2bPath(std::string_view path) { return path == "/e2b" || path.rfind("/e2b/", 0) == 0; }

// A request whose Host is E2B's `{port}-{sandboxId}.{domain}` (what the
// SDK's getHost(port) names) is that sandbox's traffic whatever its path:
// routed as if it carried E2b-Sandbox-Id and E2b-Sandbox-Port.
template <class Fields>
std::optional<e2b::SandboxHost> SandboxHostOf(const boost::beast::http::request_header<Fields>& h) {
  auto host = h[boost::beast::http::field::host];
  return e2b::ParseSandboxHost(std::string_view(host.data(), host.size()));
}

// `path` is the target's path; `route`, a sandbox host's (the path is then
// the sandbox's own, kept whole).
template <class Fields>
e2b::Request E2bRequestOf(const boost::beast::http::request_header<Fields>& h, std::string_view path,
                          const std::map<std::string, std::string>& query, bool root_level,
                          const e2b::SandboxHost* route = nullptr) {
  e2b::Request r;
  r.method = std::string(h.method_string());
  r.root_level = root_level;
  std::string_view target(h.target().data(), h.target().size());
  if (route != nullptr) {
    r.path = std::string(path);
    r.target = std::string(target);
  } else {
    // Below the prefix, with doubled slashes collapsed (the code interpreter
    // SDK joins "…/e2b/" and "/execute").
    std::string_view rest = root_level ? path : path.substr(4);
    for (char c : rest)
      if (!(c == '/' && !r.path.empty() && r.path.back() == '/')) r.path.push_back(c);
    std::string_view target_rest = root_level ? target : target.substr(std::min<size_t>(4, target.size()));
    r.target = target_rest.empty() || target_rest[0] != '/' ? "/" + std::string(target_rest)
                                                            : std::string(target_rest);
  }
  if (r.path.empty()) r.path = "/";
  r.query = query;
  if (route != nullptr) {
    r.headers["e2b-sandbox-id"] = route->sandbox_id;
    r.headers["e2b-sandbox-port"] = std::to_string(route->port);
  }
  for (const auto& f : h) {
    std::string name(f.name_string());
    r.raw_headers.emplace_back(name, std::string(f.value()));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers.emplace(std::move(name), std::string(f.value()));  // first occurrence wins
  }
  return r;
}

// Carries one answer into `ch` (the session's download channel).
class ChannelResponseWriter final : public e2b::ResponseWriter {
 public:
  explicit ChannelResponseWriter(std::shared_ptr<Channel> ch) : ch_(std::move(ch)) {}

  bool Start(int status, std::string_view content_type, const e2b::Headers& headers) override {
    if (started_ || dropped_) return false;
    nlohmann::json meta = {
        {"status", status}, {"content_type", content_type}, {"headers", nlohmann::json::array()}};
    for (const auto& [k, v] : headers) {
      if (boost::beast::iequals(k, "content-length")) {
        meta["length"] = std::stoull(v);
      } else {
        meta["headers"].push_back({k, v});
      }
    }
    started_ = ch_->PushBlocking(Frame{false, meta.dump()}).ok();
    return started_;
  }
  bool Write(std::string_view bytes) override {
    if (!started_ || dropped_) return false;
    while (!bytes.empty()) {
      size_t n = std::min(bytes.size(), kMaxPiece);
      if (!ch_->PushBlocking(Frame{true, std::string(bytes.substr(0, n))}).ok()) return false;
      bytes.remove_prefix(n);
    }
    return true;
  }
  bool Alive() override { return !dropped_ && !ch_->Finished(); }
  void Drop() override {
    dropped_ = true;
    ch_->Abort("the sandbox went away");
  }
  // After the handler returned: the answer's end.
  void Finish() {
    if (dropped_) return;
    if (started_) {
      ch_->CloseWrite();
    } else {
      ch_->Abort("no answer");
    }
  }

 private:
  static constexpr size_t kMaxPiece = size_t{1} << 20;
  std::shared_ptr<Channel> ch_;
  bool started_ = false, dropped_ = false;
};

}  // namespace skiff::api
