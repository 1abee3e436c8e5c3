#include "base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/find_executable.h"
#include "base/unique_fd.h"

extern char** environ;

namespace skiff {

Result<Process> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return Error(Code::kS300, "spawn: empty argv");
  std::optional<std::string> prog = FindExecutable(argv[0]);
  if (!prog) return Error::Sys(Code::kS300, "spawn", argv[0], ENOENT);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env) {
    envp.reserve(options.env->size() + 1);
    for (const auto& e : *options.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }

  UniqueFd devnull;
  if (options.stdin_fd < 0 || options.stdout_fd < 0 || options.stderr_fd < 0) {
    devnull.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!devnull) return Error::Sys(Code::kS300, "open", "/dev/null", errno);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  ScopedCleanup destroy([&] { posix_spawn_file_actions_destroy(&actions); });
  const int sources[3] = {options.stdin_fd, options.stdout_fd, options.stderr_fd};
  for (int target = 0; target < 3; ++target) {
    int src = sources[target] >= 0 ? sources[target] : devnull.get();
    // dup2 onto itself would keep close-on-exec set; adddup2 clears it.
    int rc = posix_spawn_file_actions_adddup2(&actions, src, target);
    if (rc != 0) return Error::Sys(Code::kS300, "posix_spawn_file_actions_adddup2", argv[0], rc);
  }
  pid_t pid = -1;
  int rc =
      ::posix_spawn(&pid, prog->c_str(), &actions, nullptr, args.data(), options.env ? envp.data() : environ);
  if (rc != 0) return Error::Sys(Code::kS300, "posix_spawn", *prog, rc);
  // The child is ours and unreaped, so its pid cannot be reused before the
  // pidfd pins it.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Error::Sys(Code::kS300, "pidfd_open", *prog, err);
  }
  return Process(pid, UniqueFd(pidfd));
}

}  // namespace skiff
