// A process's or a run's streamed output written to this process's own:
// stdout to fd 1, stderr to fd 2, a lost range (a process whose output
// buffer wrapped) said on stderr. Used by `skiff logs` and `skiff run`.
#pragma once

#include <cstdio>

#include "cli/report.h"
#include "sandbox/types.h"

namespace skiff::cli {

class StdSink final : public ProcessOutputSink {
 public:
  bool OnStart(int64_t, int64_t) override { return true; }
  bool OnData(uint8_t channel, int64_t, std::string_view bytes) override {
    WriteAll(channel == 2 ? 2 : 1, bytes);
    return true;
  }
  bool OnGap(uint8_t channel, int64_t from, int64_t to) override {
    std::fprintf(stderr, "skiff: %lld bytes of %s were lost (the process's output buffer wrapped)\n",
                 static_cast<long long>(to - from), channel == 2 ? "stderr" : "stdout");
    return true;
  }
};

}  // namespace skiff::cli
