// SandboxManager::Run (docs/api.md#sandboxrun): create, write the sibling files and the
// code, exec the interpreter the `lang` table names, stop unless kept. A
// failing step comes back wrapped (run_step.h).
#include <memory>

#include "protocol/ops.h"
#include "sandbox/manager.h"
#include "sandbox/run_step.h"

namespace skiff {

Result<ExecResult> SandboxManager::Run(const RunSpec& spec, OutputSink* sink) {
  RunLang lang = LangFor(spec.lang);

  CreateSpec cs = spec.create;
  auto created = Create(cs);
  if (!created.ok()) return WrapRunStep(created.error(), kRunStepCreate, "");
  std::string id = created->sandbox_id;
  auto finish = [&](Result<ExecResult> r) -> Result<ExecResult> {
    if (!spec.keep_sandbox) (void)Stop(id, /*wait=*/false);
    return r;
  };
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
    if (!w.ok()) return finish(WrapRunStep(w.error(), kRunStepSiblingFile, id));
  }
  auto w = FsWrite(id, lang.file, 0644, /*parents=*/true, once(spec.code), {});
  if (!w.ok()) return finish(WrapRunStep(w.error(), kRunStepCode, id));
  if (lang.bash) {
    auto st = Fs(id, proto::FsStatRequest{"/bin/bash"});
    if (!st.ok()) lang.program = "/bin/sh";
  }
  ExecSpec es;
  es.sandbox_id = id;
  es.argv = {lang.program, lang.file};
  es.env = spec.create.env;
  es.stdin_bytes = spec.stdin_bytes;
  es.timeout_ms = spec.timeout_ms;
  es.workdir = spec.workdir;
  auto r = Exec(es, sink);
  if (!r.ok()) return finish(WrapRunStep(r.error(), kRunStepExec, id));
  if (spec.keep_sandbox) r->sandbox_id = id;
  return finish(std::move(r));
}

}  // namespace skiff
