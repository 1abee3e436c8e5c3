#include "e2b/http_forward.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <cctype>
#include <limits>

#include "base/text.h"

namespace skiff::e2b {

namespace {

namespace http = boost::beast::http;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Headers about the body's framing: the forwarder sets its own.
bool IsFraming(std::string_view lower) { return lower == "content-length" || lower == "transfer-encoding"; }

constexpr size_t kMaxHeader = size_t{64} * 1024;

}  // namespace

std::optional<SandboxHost> ParseSandboxHost(std::string_view host) {
  // Without the listener's port; an IPv6 literal has no sandbox in it.
  if (host.empty() || host.front() == '[') return std::nullopt;
  if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    std::string_view p = host.substr(colon + 1);
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    host = host.substr(0, colon);
  }
  size_t dash = host.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 5) return std::nullopt;
  std::string_view port = host.substr(0, dash);
  if (port.find_first_not_of("0123456789") != std::string_view::npos || port[0] == '0') return std::nullopt;
  uint32_t n = 0;
  for (char c : port) n = n * 10 + static_cast<uint32_t>(c - '0');
  if (n < 1 || n > 65535) return std::nullopt;
  std::string_view rest = host.substr(dash + 1);
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot + 1 >= rest.size()) return std::nullopt;  // a domain is required
  std::string_view id = rest.substr(0, dot);
  if (CanonicalUuid(id) != std::optional<std::string>(id)) return std::nullopt;  // lowercase, hyphenated
  return SandboxHost{static_cast<uint16_t>(n), std::string(id)};
}

std::vector<std::string> ConnectionTokens(std::string_view value) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= value.size()) {
    size_t comma = value.find(',', at);
    std::string_view t =
        value.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    if (!t.empty()) out.push_back(Lower(t));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_tokens) {
  std::string n = Lower(name);
  static constexpr std::string_view kHop[] = {
      "connection", "keep-alive",         "proxy-connection",   "te", "trailer", "transfer-encoding",
      "upgrade",    "proxy-authenticate", "proxy-authorization"};
  for (std::string_view h : kHop)
    if (n == h) return true;
  for (const std::string& t : connection_tokens)
    if (n == t) return true;
  return false;
}

Result<std::string> SerializeRequest(std::string_view method, std::string_view target,
                                     const HeaderList& headers, std::string_view body) {
  auto clean = [](std::string_view s) {
    return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
  };
  if (method.empty() || method.find_first_of(" \t") != std::string_view::npos || !clean(method))
    return InvalidRequest("method: not a token");
  if (target.empty() || target.find_first_of(" \t") != std::string_view::npos || !clean(target))
    return InvalidRequest("request target: holds a space or a line break");
  std::vector<std::string> tokens;
  for (const auto& [k, v] : headers)
    if (Lower(k) == "connection") {
      auto t = ConnectionTokens(v);
      tokens.insert(tokens.end(), t.begin(), t.end());
    }
  std::string out;
  out.reserve(256 + body.size());
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  for (const auto& [k, v] : headers) {
    std::string lower = Lower(k);
    // The whole body is sent at once, so there is nothing to wait for.
    if (IsHopByHop(lower, tokens) || IsFraming(lower) || lower == "expect") continue;
    if (k.empty() || k.find_first_of(" \t:") != std::string::npos || !clean(k) || !clean(v))
      return InvalidRequest("header " + k + ": holds a line break");
    out.append(k).append(": ").append(v).append("\r\n");
  }
  bool carries_body = !body.empty() || method == "POST" || method == "PUT" || method == "PATCH";
  if (carries_body) out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  out.append("Connection: close\r\n\r\n");
  out.append(body);
  return out;
}

ResponseReader::ResponseReader(bool head_request, OnHead on_head, OnBody on_body)
    : head_request_(head_request), on_head_(std::move(on_head)), on_body_(std::move(on_body)) {
  Reset();
}

void ResponseReader::Reset() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(kMaxHeader));
  parser_->body_limit((std::numeric_limits<std::uint64_t>::max)());
  if (head_request_) parser_->skip(true);
}

Status ResponseReader::SendHead() {
  const auto& m = parser_->get();
  Head h;
  h.status = static_cast<int>(m.result_int());
  std::vector<std::string> tokens = ConnectionTokens([&] {
    auto v = m[http::field::connection];
    return std::string_view(v.data(), v.size());
  }());
  for (const auto& f : m) {
    std::string name(f.name_string());
    std::string lower = Lower(name);
    if (lower == "content-type") {
      h.content_type = std::string(f.value());
      continue;
    }
    if (IsHopByHop(lower, tokens) || IsFraming(lower)) continue;
    h.headers.emplace_back(std::move(name), std::string(f.value()));
  }
  head_sent_ = true;
  if (!on_head_(h)) return Error(Code::kS216, "the client went away");
  return OkStatus();
}

Status ResponseReader::Feed(std::string_view bytes) {
  pending_.append(bytes);
  char buf[16 * 1024];
  for (;;) {
    if (parser_->is_done()) {
      pending_.clear();  // past the answer's end: nothing more is read
      return OkStatus();
    }
    boost::beast::error_code ec;
    if (!parser_->is_header_done()) {
      size_t n = parser_->put(boost::asio::buffer(pending_.data(), pending_.size()), ec);
      pending_.erase(0, n);
      if (ec == http::error::need_more) return OkStatus();
      if (ec) return Error(Code::kS300, "the server's answer is not HTTP/1.1: " + ec.message());
      if (!parser_->is_header_done()) continue;
      int status = static_cast<int>(parser_->get().result_int());
      if (status >= 100 && status < 200 && status != 101) {
        // An interim answer (100 Continue, 103 Early Hints): the real one follows.
        if (!parser_->is_done()) return Error(Code::kS300, "the server's interim answer has a body");
        Reset();
        continue;
      }
      SKIFF_RETURN_IF_ERROR(SendHead());
      continue;
    }
    auto& body = parser_->get().body();
    body.data = buf;
    body.size = sizeof buf;
    size_t n = parser_->put(boost::asio::buffer(pending_.data(), pending_.size()), ec);
    pending_.erase(0, n);
    size_t got = sizeof buf - body.size;
    if (got > 0 && !on_body_(std::string_view(buf, got))) return Error(Code::kS216, "the client went away");
    if (ec == http::error::need_buffer) continue;
    if (ec == http::error::need_more) return OkStatus();
    if (ec) return Error(Code::kS300, "the server's answer is not HTTP/1.1: " + ec.message());
    if (n == 0 && got == 0) return OkStatus();
  }
}

Status ResponseReader::Finish() {
  if (parser_->is_done()) return OkStatus();
  if (!parser_->got_some()) return Error(Code::kS300, "the server closed the connection without an answer");
  boost::beast::error_code ec;
  parser_->put_eof(ec);
  if (ec || !parser_->is_header_done())
    return Error(Code::kS300, parser_->is_header_done()
                                  ? "the server closed the connection mid-answer"
                                  : "the server closed the connection without an answer");
  if (!head_sent_) SKIFF_RETURN_IF_ERROR(SendHead());
  return OkStatus();
}

}  // namespace skiff::e2b
