// The engine link's TLS and credential flags, shared by `skiff serve` and
// `skiff route` (docs/multihost.md#tls).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace skiff::cli {

void AddEngineLinkFlags(CLI::App* command, std::string& ca_file, std::string& token_file);

}  // namespace skiff::cli
