// Runs a shell command line and collects its stdout and exit code (for
// end-to-end tests of the CLI).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace skiff::testing_support {

struct ShellOut {
  std::string stdout_text;
  int exit_code = -1;  // 128+N when killed by signal N
};

inline ShellOut Shell(const std::string& cmd) {
  ShellOut o;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.stdout_text.append(buf.data(), n);
  int st = ::pclose(p);
  o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

}  // namespace skiff::testing_support
