// The CLI's HTTP client of a daemon (libcurl, TCP or unix socket), and
// daemon discovery: SKIFF_URL / --url, else the per-user socket, else the
// default loopback port, else a daemon started in the background.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace skiff::cli {

struct Endpoint {
  std::string unix_socket;  // "" = TCP
  std::string base_url;     // "http://127.0.0.1:49134" (host part unused for unix)
  std::string token;        // bearer token, "" = none
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

class Client {
 public:
  explicit Client(Endpoint ep) : ep_(std::move(ep)) {}
  const Endpoint& endpoint() const { return ep_; }

  // Errors here are transport failures (no daemon, connection lost).
  Result<HttpResponse> Get(const std::string& path, long timeout_secs = 10);
  Result<HttpResponse> Post(const std::string& path, const std::string& body);
  // Streams the response body to `out` when the status is 200; otherwise
  // the (error) body is returned in the response.
  Result<HttpResponse> Download(const std::string& path, std::FILE* out);
  // Streams `in` as the request body (chunked).
  Result<HttpResponse> Upload(const std::string& path, std::FILE* in);

 private:
  Endpoint ep_;
};

// The socket a background daemon of this user listens on.
std::string DefaultSocket();
// Finds a daemon; starts one in the background when none answers and
// `autostart` is set (saying so on stderr).
Result<Endpoint> FindDaemon(const std::string& url_flag, bool autostart);

}  // namespace skiff::cli
