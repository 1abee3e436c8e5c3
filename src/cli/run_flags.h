// What `skiff run` was asked for: its flags, read by both ways a run goes
// (embedded in this process, or through a running daemon).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace skiff::cli {

struct RunFlags {
  std::string image;
  std::vector<std::string> command;
  std::string lang, code, file;
  std::optional<uint64_t> timeout_ms;
  std::vector<std::string> env;  // NAME=value, checked
  std::string isolation;
  std::optional<uint32_t> cpus, memory_mb;
  bool network = false;
  bool json_out = false;
  bool interactive = false;  // -i
  bool tty = false;          // -t
  bool embedded = false;     // --embedded: never a daemon
  std::string url;           // --url: this daemon, none other
};

// The program an interactive run starts when no command is given: the
// image's interpreter, else a shell.
inline std::vector<std::string> DefaultInteractive(const std::string& image) {
  if (image == "python") return {"python3"};
  if (image == "node") return {"node"};
  return {"sh"};
}

}  // namespace skiff::cli
