// skiff-agent: PID 1 of every sandbox.
//
//   skiff-agent --fd N   serve the protocol on inherited fd N (jail backend)
//   skiff-agent          as PID 1 of a microVM guest: VmInit() brings the
//                        guest up and returns the channel fd
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "agent/agent.h"
#include "agent/vm_init.h"
#include "base/log.h"
#include "confine/confine.h"

namespace {

int Run(int argc, char** argv) {
  int fd = -1;
  bool vm = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fd") == 0 && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || v < 0 || v > 1 << 20) {
        std::fprintf(stderr, "skiff-agent: --fd needs a descriptor number\n");
        return 2;
      }
      fd = static_cast<int>(v);
    } else if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("%s\n", skiff::agent::AgentName().c_str());
      return 0;
    } else {
      std::fprintf(stderr, "usage: skiff-agent --fd N\n");
      return 2;
    }
  }
  if (fd < 0) {
    if (!skiff::agent::IsVmGuestInit()) {
      std::fprintf(stderr, "usage: skiff-agent --fd N (or run as PID 1 of a VM)\n");
      return 2;
    }
    auto r = skiff::agent::VmInit();
    if (!r.ok()) {
      SKIFF_LOG(Error) << r.error().ToString();
      return 1;
    }
    fd = *r;
    vm = true;
  }
  // After VmInit (which sets its own umask and root).
  if (auto st = skiff::agent::PrepareProcess(); !st.ok()) {
    SKIFF_LOG(Error) << "cannot prepare the agent process: " << st.error().ToString();
    return 1;
  }
  // Built once; every exec'd child installs it (fail closed if it cannot).
  static auto policy = skiff::confine::BuildChildPolicy();
  if (!policy.ok()) {
    SKIFF_LOG(Error) << "cannot build the child confinement: " << policy.error().ToString();
    return 1;
  }
  // What every child would repeat (bounding set, no_new_privs, ...) is done
  // once here and inherited.
  if (auto r = skiff::confine::ApplyToParent(*policy); !r.ok()) {
    SKIFF_LOG(Error) << "cannot confine the agent for its children: " << r.step << ": "
                     << skiff::ErrnoName(r.err);
    return 1;
  }
  skiff::agent::AgentOptions opt;
  opt.child_policy = &*policy;
  opt.vm = vm;
  return skiff::agent::RunAgent(skiff::UniqueFd(fd), opt);
}

}  // namespace

// An exception out of the agent would end PID 1 in std::terminate, with no
// word of why: it is logged and the agent exits with status 1.
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    SKIFF_LOG(Error) << "uncaught exception: " << e.what();
  } catch (...) {
    SKIFF_LOG(Error) << "uncaught exception of unknown type";
  }
  return 1;
}
