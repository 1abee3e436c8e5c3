// What the engine link needs before it can connect (docs/multihost.md#tls):
// the parsed URL, for wss:// a TLS context that trusts the configured CA
// (else the system's store) and verifies the engine's certificate, and the
// credential read from its file. Everything that can be wrong is found
// here, at start, not on the first connect.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/ws_url.h"

namespace boost::asio::ssl {
class context;
}

namespace skiff::api {

struct EngineLinkOptions {
  std::string url;  // as given, for logs
  WsUrl parsed;
  std::shared_ptr<boost::asio::ssl::context> tls;  // set for wss://
  std::string token;                               // "" = send no credential
};

// url: ws:// (loopback only) or wss://; ca_file: PEM certificates to trust
// (wss:// only); token_file: the credential, one line, not readable by
// group or others. Errors are S001 naming the offending option.
Result<EngineLinkOptions> LoadEngineLinkOptions(const std::string& url,
                                                const std::optional<std::string>& ca_file,
                                                const std::optional<std::string>& token_file);

}  // namespace skiff::api
