// The HTTP side of the E2B-compatible API (docs/e2b.md): which requests are
// E2B's (the /e2b prefix), the e2b::Request a request's header becomes, and
// the ResponseWriter that carries an answer from the worker thread through
// a bounded channel to the connection (a meta frame with the status and
// headers, then the body's pieces, each sent as it comes).
#pragma once

#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/channels.h"
#include "e2b/exchange.h"

namespace skiff::api {

// "/e2b" and everything below it (and, at the root, a signed /files URL:
// e2b::Api::IsSignedUrl).
inline bool IsE2bPath(std::string_view path) { return path == "/e2b" || path.rfind("/e2b/", 0) == 0; }

template <class Fields>
e2b::Request E2bRequestOf(const boost::beast::http::request_header<Fields>& h, std::string_view path,
                          const std::map<std::string, std::string>& query, bool root_level) {
  e2b::Request r;
  r.method = std::string(h.method_string());
  r.root_level = root_level;
  // Below the prefix, with doubled slashes collapsed (the code interpreter
  // SDK joins "…/e2b/" and "/execute").
  std::string_view rest = root_level ? path : path.substr(4);
  for (char c : rest)
    if (!(c == '/' && !r.path.empty() && r.path.back() == '/')) r.path.push_back(c);
  if (r.path.empty()) r.path = "/";
  r.query = query;
  for (const auto& f : h) {
    std::string name(f.name_string());
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
