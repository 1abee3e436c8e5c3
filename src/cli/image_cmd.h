#pragma once

#include <CLI/CLI.hpp>

namespace skiff::cli {
// Registers `skiff image build|import|pull|ls|inspect|rm|gc`; sets rc.
void AddImageCommands(CLI::App& app, int& rc);
}  // namespace skiff::cli
