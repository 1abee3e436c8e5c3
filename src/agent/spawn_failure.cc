#include "agent/spawn_failure.h"

#include <cerrno>
#include <string>

#include "agent/fs_request.h"

namespace skiff::agent {
namespace {

SpawnOutcome ExecResult(int exit_code, const std::string& argv0, const char* what) {
  SpawnOutcome o;
  o.failure = {exit_code, "exec: " + argv0 + ": " + what + "\n"};
  return o;
}

// "call(object)", or "call" when the record names no object.
std::string What(const ChildFailure& f) {
  std::string s = f.call;
  if (f.object[0] != '\0') s += "(" + std::string(f.object) + ")";
  return s;
}

}  // namespace

Result<SpawnOutcome> SpawnFailureOutcome(const SpawnRequest& req, const ChildFailure& f) {
  const std::string a0 = req.argv.empty() ? std::string() : req.argv[0];
  const std::string err(ErrnoName(f.err));
  switch (static_cast<SpawnStep>(f.step)) {
    case SpawnStep::kWorkdir:
      if (f.err == ENOENT) return Error(Code::kS211, "file not found: workdir " + req.cwd);
      if (f.err == ENOTDIR) return Error(Code::kS212, "not a directory or wrong type: workdir " + req.cwd);
      return FsError(f.err, "workdir " + req.cwd);
    case SpawnStep::kExec:
      if (f.err == ENOENT || f.err == ENOTDIR) return ExecResult(127, a0, "not found");
      if (f.err == EACCES || f.err == EPERM || f.err == EISDIR)
        return ExecResult(126, a0, "permission denied");
      if (f.err == ENOEXEC) return ExecResult(126, a0, "exec format error");
      return Platform("exec", "execve(" + a0 + "): " + err);
    case SpawnStep::kCredentials:
      return Platform("exec", "switching to uid " + std::to_string(req.creds ? req.creds->uid : 0) + " for " +
                                  a0 + ": " + What(f) + ": " + err);
    case SpawnStep::kConfine:
      return Platform("exec", "confining " + a0 + ": " + What(f) + ": " + err);
    case SpawnStep::kSetup:
      return Platform("exec", "setting up " + a0 + ": " + What(f) + ": " + err);
  }
  return Platform("exec", "spawn of " + a0 + ": report of an unknown step " + std::to_string(f.step) + " (" +
                              What(f) + ": " + err + ")");
}

}  // namespace skiff::agent
