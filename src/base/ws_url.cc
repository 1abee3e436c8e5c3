#include "base/ws_url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace skiff {

std::optional<WsUrl> ParseWsUrl(std::string_view url, std::string* why) {
  auto fail = [why](const char* reason) -> std::optional<WsUrl> {
    if (why) *why = reason;
    return std::nullopt;
  };
  WsUrl out;
  std::string_view rest;
  if (url.rfind("ws://", 0) == 0) {
    rest = url.substr(5);
  } else if (url.rfind("wss://", 0) == 0) {
    out.tls = true;
    rest = url.substr(6);
  } else {
    return fail("expected a ws:// or wss:// URL");
  }
  size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  out.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (hostport.find('@') != std::string_view::npos) return fail("user information in the URL is not taken");
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return fail("unclosed [ in the host");
    out.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("text after the ] of the host");
      port = after.substr(1);
      if (port.empty()) return fail("empty port");
    }
  } else {
    size_t colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) return fail("empty port");
      hostport = hostport.substr(0, colon);
    }
    out.host = std::string(hostport);
  }
  if (out.host.empty()) return fail("no host");
  if (!std::all_of(out.host.begin(), out.host.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '-' || c == ':' || c == '_';
      })) {
    return fail("the host has characters a host name or address cannot have");
  }
  if (port.empty()) {
    out.port = out.tls ? "443" : "80";
  } else {
    if (port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return fail("the port is not a number");
    unsigned long n = std::stoul(std::string(port));
    if (n == 0 || n > 65535) return fail("the port is out of range 1-65535");
    out.port = std::to_string(n);
  }
  return out;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  std::string h(host);
  unsigned char buf[16];
  if (inet_pton(AF_INET, h.c_str(), buf) == 1) return buf[0] == 127;
  if (inet_pton(AF_INET6, h.c_str(), buf) == 1) {
    static const unsigned char kLo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (std::memcmp(buf, kLo, 16) == 0) return true;
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};  // ::ffff:127.x.x.x
    return std::memcmp(buf, kMapped, 12) == 0 && buf[12] == 127;
  }
  return false;
}

}  // namespace skiff
