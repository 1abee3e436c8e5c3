// `skiff serve`: the daemon in the foreground, configured by a file and flags.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "api/engine_link_options.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "sandbox/config.h"

namespace skiff::cli {
namespace {

struct ServeFlags {
  std::optional<uint32_t> port;
  std::string config_file, socket_path, engine_url, iii_namespace, engine_ca_file, engine_token_file;
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
    if (auto why = EngineUrlProblem(f.engine_url); !why.empty()) {
      std::fprintf(stderr, "skiff serve: --engine: %s\n", why.c_str());
      return kExitConfig;
    }
    config.engine_url = f.engine_url;
  }
  if (!f.engine_ca_file.empty()) config.engine_ca_file = f.engine_ca_file;
  if (!f.engine_token_file.empty()) config.engine_token_file = f.engine_token_file;
  if (auto why = EngineLinkProblem(config); !why.empty()) {
    std::fprintf(stderr, "skiff serve: %s\n", why.c_str());
    return kExitConfig;
  }
  if (config.engine_url) {  // the credential and CA files, read now so a mistake is a config error
    auto link =
        api::LoadEngineLinkOptions(*config.engine_url, config.engine_ca_file, config.engine_token_file);
    if (!link.ok()) {
      std::fprintf(stderr, "skiff serve: %s\n", link.error().message().c_str());
      return kExitConfig;
    }
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
  serve->add_option("--engine", f->engine_url,
                    "worker mode: join the iii engine at this URL (wss://, or ws:// on this machine)");
  AddEngineLinkFlags(serve, f->engine_ca_file, f->engine_token_file);
  serve->add_option("--iii-namespace", f->iii_namespace,
                    "worker mode as one host of a fleet: register in this engine namespace (skiff.<host>)");
  serve->callback([f, &rc, daemon] { rc = Serve(*f, daemon); });
}

}  // namespace skiff::cli
