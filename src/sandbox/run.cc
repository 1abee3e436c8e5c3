// SandboxManager::Run (docs/api.md#sandboxrun): create, write the sibling files and the
// code, exec the interpreter the `lang` table names (or the command `argv`),
// stop unless kept. A failing step of a code run comes back wrapped
// (run_step.h); a command's are its steps' own errors, as create, exec and
// stop would give them.
#include <memory>

#include "protocol/ops.h"
#include "sandbox/manager.h"
#include "sandbox/run_step.h"

namespace skiff {

Result<ExecResult> SandboxManager::Run(const RunSpec& spec, OutputSink* sink) {
  const bool command = !spec.argv.empty();
  auto wrap = [command](const Error& e, std::string_view step, const std::string& id) {
    return command ? e : WrapRunStep(e, step, id);
  };
  CreateSpec cs = spec.create;
  auto created = Create(cs);
  if (!created.ok()) return wrap(created.error(), kRunStepCreate, "");
  std::string id = created->sandbox_id;
  auto finish = [&](Result<ExecResult> r) -> Result<ExecResult> {
    if (!spec.keep_sandbox) (void)Stop(id, /*wait=*/false);
    return r;
  };
  if (sink && !sink->OnSandbox(id))
    return finish(Error(Code::kS300, "run cancelled: its output's reader went away"));
  auto once = [](const std::string& body) {
    auto done = std::make_shared<bool>(false);
    return ByteSource([done, &body]() -> Result<std::string> {
      if (*done) return std::string();
      *done = true;
      return body;
    });
  };
  for (const auto& f : spec.files) {
    auto w = FsWrite(id, f.path, 0644, /*parents=*/true, once(f.content), {});
    if (!w.ok()) return finish(wrap(w.error(), kRunStepSiblingFile, id));
  }
  ExecSpec es;
  es.sandbox_id = id;
  if (command) {
    es.argv = spec.argv;
  } else {
    RunLang lang = LangFor(spec.lang);
    auto w = FsWrite(id, lang.file, 0644, /*parents=*/true, once(spec.code), {});
    if (!w.ok()) return finish(WrapRunStep(w.error(), kRunStepCode, id));
    if (lang.bash) {
      auto st = Fs(id, proto::FsStatRequest{"/bin/bash"});
      if (!st.ok()) lang.program = "/bin/sh";
    }
    es.argv = {lang.program, lang.file};
  }
  es.env = spec.create.env;
  es.stdin_bytes = spec.stdin_bytes;
  es.timeout_ms = spec.timeout_ms;
  es.workdir = spec.workdir;
  auto r = Exec(es, sink);
  if (!r.ok()) return finish(wrap(r.error(), kRunStepExec, id));
  if (spec.keep_sandbox) r->sandbox_id = id;
  return finish(std::move(r));
}

}  // namespace skiff
