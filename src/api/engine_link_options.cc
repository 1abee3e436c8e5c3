#include "api/engine_link_options.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <boost/asio/ssl.hpp>

#include "base/file_io.h"
#include "sandbox/config.h"

namespace skiff::api {

namespace ssl = boost::asio::ssl;

namespace {

// A configuration mistake, named by its key (as the config file's errors are).
Error Bad(std::string_view key, const std::string& detail) {
  return Error(Code::kS001, "invalid config: " + std::string(key) + ": " + detail);
}

// A credential is one line of visible ASCII: it goes into an HTTP header.
bool IsHeaderSafe(const std::string& t) {
  for (char c : t)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

Result<std::string> ReadToken(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Bad("engine_token_file", "cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Bad("engine_token_file", "'" + path + "' is not a regular file");
  if ((st.st_mode & 077) != 0) {
    return Bad("engine_token_file",
               "'" + path + "' may be read by group or others; chmod 600 it (the credential admits a host)");
  }
  if (st.st_size > 4096) return Bad("engine_token_file", "'" + path + "' is larger than 4096 bytes");
  auto text = ReadFile(path, 4096);
  if (!text.ok()) return Bad("engine_token_file", text.error().message());
  std::string t = std::move(*text);
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  if (t.empty()) return Bad("engine_token_file", "'" + path + "' is empty");
  if (!IsHeaderSafe(t)) {
    return Bad(
        "engine_token_file",
        "'" + path + "' must hold one line of printable ASCII without spaces (it is sent as a header)");
  }
  return t;
}

Result<std::shared_ptr<ssl::context>> TlsContext(const std::optional<std::string>& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  if (ec) return Platform("engine link", "TLS options: " + ec.message());
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (ec) return Platform("engine link", "TLS verify mode: " + ec.message());
  if (ca_file) {
    ctx->load_verify_file(*ca_file, ec);
    if (ec) {
      return Bad("engine_ca_file", "cannot load CA certificates from '" + *ca_file + "': " + ec.message());
    }
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) return Platform("engine link", "the system's CA store: " + ec.message());
  }
  return ctx;
}

}  // namespace

Result<EngineLinkOptions> LoadEngineLinkOptions(const std::string& url,
                                                const std::optional<std::string>& ca_file,
                                                const std::optional<std::string>& token_file) {
  EngineLinkOptions o;
  o.url = url;
  // The URL's rules are the config's (sandbox/config.h), stated once.
  if (auto why = EngineUrlProblem(url); !why.empty()) return Bad("engine_url", why);
  o.parsed = *ParseWsUrl(url);
  if (ca_file && !o.parsed.tls) return Bad("engine_ca_file", "only for a wss:// engine");
  if (o.parsed.tls) {
    SKIFF_ASSIGN_OR_RETURN(o.tls, TlsContext(ca_file));
  }
  if (token_file) {
    SKIFF_ASSIGN_OR_RETURN(o.token, ReadToken(*token_file));
  }
  return o;
}

}  // namespace skiff::api
