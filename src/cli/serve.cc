// `skiff serve`: the daemon in the foreground, configured by a file and flags.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli.h"
#include "cli/commands.h"
#include "sandbox/config.h"

namespace skiff::cli {
namespace {

struct ServeFlags {
  std::optional<uint32_t> port;
  std::string config_file, socket_path, engine_url, iii_namespace;
};

int Serve(const ServeFlags& f, DaemonMain daemon) {
  Config config;
  if (!f.config_file.empty()) {
    auto c = LoadConfigFile(f.config_file);
    if (!c.ok()) {
      std::fprintf(stderr, "skiff serve: %s\n", c.error().message().c_str());
      return kExitConfig;
    }
    config = std::move(*c);
  }
  if (f.port) {
    if (*f.port > 65535) {
      std::fprintf(stderr, "skiff serve: --port: out of range\n");
      return kExitConfig;
    }
    config.listen_port = static_cast<uint16_t>(*f.port);
  }
  if (!f.socket_path.empty()) config.unix_socket = f.socket_path;
  if (!f.engine_url.empty()) {
    if (f.engine_url.rfind("ws://", 0) != 0 || f.engine_url.size() <= 5) {  // no TLS: no wss://
      std::fprintf(stderr, "skiff serve: --engine: expected a ws:// URL\n");
      return kExitConfig;
    }
    config.engine_url = f.engine_url;
  }
  if (!f.iii_namespace.empty()) {
    if (auto why = IiiNamespaceProblem(f.iii_namespace); !why.empty()) {
      std::fprintf(stderr, "skiff serve: --iii-namespace: %s\n", why.c_str());
      return kExitConfig;
    }
    config.iii_namespace = f.iii_namespace;
  }
  if (config.iii_namespace && !config.engine_url) {
    std::fprintf(
        stderr,
        "skiff serve: --iii-namespace (iii_namespace) needs worker mode: give the engine with --engine "
        "(engine_url)\n");
    return kExitConfig;
  }
  return daemon(std::move(config));
}

}  // namespace

void AddServeCommand(CLI::App& app, int& rc, DaemonMain daemon) {
  auto* serve = app.add_subcommand("serve", "run the daemon (skiffd) in the foreground");
  auto f = std::make_shared<ServeFlags>();
  serve->add_option("--port", f->port, "listen port (overrides listen_port; 0 = any free port)");
  serve->add_option("--config", f->config_file, "YAML configuration file");
  serve->add_option("--socket", f->socket_path, "also listen on this unix socket");
  serve->add_option("--engine", f->engine_url, "worker mode: join the iii engine at this ws:// URL");
  serve->add_option("--iii-namespace", f->iii_namespace,
                    "worker mode as one host of a fleet: register in this engine namespace (skiff.<host>)");
  serve->callback([f, &rc, daemon] { rc = Serve(*f, daemon); });
}

}  // namespace skiff::cli
