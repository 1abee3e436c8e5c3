#include "cli/engine_flags.h"

namespace skiff::cli {

void AddEngineLinkFlags(CLI::App* command, std::string& ca_file, std::string& token_file) {
  command->add_option(
      "--engine-ca", ca_file,
      "wss:// only: trust the engine's certificate when it chains to these CA certificates (PEM)");
  command->add_option("--engine-token-file", token_file,
                      "send the credential in this file (mode 600) to the engine's auth function");
}

}  // namespace skiff::cli
