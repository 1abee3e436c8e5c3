// The HTTP side of forwarding a request to a port inside a sandbox
// (docs/e2b.md#ports), free of sandboxes and transports: which sandbox and
// port a Host header names, the HTTP/1.1 request written to the server,
// and the reading of its answer as it streams back.
#pragma once

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace skiff::e2b {

// The sandbox and port of E2B's sandbox host names, `{port}-{sandboxId}.{domain}`
// (what the SDK's getHost(port) builds), with an optional `:port` suffix
// of the listener. The port is 1..65535 in plain decimal, the sandbox id a
// skiff id (a lower-case UUID), the domain anything non-empty. nullopt for
// every other host (the daemon's own name or address).
struct SandboxHost {
  uint16_t port = 0;
  std::string sandbox_id;
};
std::optional<SandboxHost> ParseSandboxHost(std::string_view host);

// Hop-by-hop headers (RFC 9110 §7.6.1): never forwarded, either way.
// `connection_tokens` are the names the message's own Connection header
// lists (lower-case).
bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_tokens = {});
// The lower-cased tokens of a Connection header's value.
std::vector<std::string> ConnectionTokens(std::string_view value);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The request written to the server inside the sandbox: the request line
// with `target` as it came, every header but the hop-by-hop ones and the
// body's framing, then Content-Length of `body` (for a body, or a method
// that carries one) and `Connection: close`. Values with CR, LF or NUL are
// refused (S001): nothing can smuggle a second request.
Result<std::string> SerializeRequest(std::string_view method, std::string_view target,
                                     const HeaderList& headers, std::string_view body);

// Reads the server's answer as its bytes arrive: the status and headers
// once complete (hop-by-hop ones and the body's framing removed), then the
// body's bytes as they are decoded (chunked or not). At most 64 KiB of
// header. Whether HEAD was asked decides that no body follows.
class ResponseReader {
 public:
  struct Head {
    int status = 0;
    std::string content_type;  // "" when none
    HeaderList headers;        // without content-type, content-length and hop-by-hop ones
  };
  using OnHead = std::function<bool(const Head&)>;
  using OnBody = std::function<bool(std::string_view)>;

  ResponseReader(bool head_request, OnHead on_head, OnBody on_body);

  // The next bytes from the server. An error is a malformed answer (S300);
  // false from a callback stops the reading (S216).
  Status Feed(std::string_view bytes);
  // The server closed its side: an answer whose body runs to the end of
  // the connection is complete; anything else cut short is S300.
  Status Finish();
  bool head_done() const { return head_sent_; }
  bool done() const { return parser_->is_done(); }

 private:
  using Parser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
  void Reset();
  Status SendHead();

  bool head_request_;
  std::optional<Parser> parser_;
  OnHead on_head_;
  OnBody on_body_;
  std::string pending_;  // bytes fed and not yet consumed by the parser
  bool head_sent_ = false;
};

}  // namespace skiff::e2b
