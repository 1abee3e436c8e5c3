// The CLI's HTTP/1.1 client of a daemon, over a unix socket or TCP
// (Boost.Beast, which the daemon's server uses too: a daemon call loads no
// library the process has not already mapped).
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"

namespace skiff::cli {

struct Endpoint {
  std::string unix_socket;  // "" = TCP
  std::string base_url;     // "http://127.0.0.1:49134[/prefix]" (host part only a header for unix)
  std::string token;        // bearer token, "" = none
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

class Client {
 public:
  explicit Client(Endpoint ep) : ep_(std::move(ep)) {}

  // Errors here are transport failures (no daemon, connection lost: S300)
  // or a base URL that is not http:// (S001).
  Result<HttpResponse> Get(const std::string& path, long timeout_secs);
  Result<HttpResponse> Post(const std::string& path, const std::string& body);
  // Streams the response body to `out` when the status is 200; otherwise
  // the (error) body is returned in the response.
  Result<HttpResponse> Download(const std::string& path, std::FILE* out);
  // A GET whose 200 body is handed to `on_bytes` as it arrives (false
  // ends the transfer); any other status's body is returned in the response.
  // `keep_going`, when given, is asked about once a second even while no
  // byte arrives; false ends the transfer.
  Result<HttpResponse> Stream(const std::string& path, const std::function<bool(std::string_view)>& on_bytes,
                              const std::function<bool()>& keep_going = nullptr);
  // The same for a POST of a JSON body (POST /v1/run).
  Result<HttpResponse> PostStream(const std::string& path, const std::string& body,
                                  const std::function<bool(std::string_view)>& on_bytes,
                                  const std::function<bool()>& keep_going = nullptr);
  // Streams `in` as the request body (chunked).
  Result<HttpResponse> Upload(const std::string& path, std::FILE* in);

 private:
  Endpoint ep_;
};

}  // namespace skiff::cli
