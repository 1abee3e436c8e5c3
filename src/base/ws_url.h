// WebSocket URLs (ws:// and wss://) as the engine link takes them, and
// which host names are this machine's loopback.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace skiff {

struct WsUrl {
  bool tls = false;  // wss://
  std::string host;  // without the [] of an IPv6 literal
  std::string port;  // digits, 1-65535; the scheme's default when absent
  std::string path;  // "/" when absent; query kept
};

// Parses ws://host[:port][/path] and wss://…; nullopt for anything else,
// with a short reason in *why (if given).
std::optional<WsUrl> ParseWsUrl(std::string_view url, std::string* why = nullptr);

// "localhost", 127.0.0.0/8, ::1 and ::ffff:127.x.x.x.
bool IsLoopbackHost(std::string_view host);

}  // namespace skiff
