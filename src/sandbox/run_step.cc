#include "sandbox/run_step.h"

#include <nlohmann/json.hpp>

namespace skiff {

Error WrapRunStep(const Error& inner, std::string_view step, std::string_view sandbox_id) {
  std::string context = "during sandbox::run step `" + std::string(step) + "`";
  std::string message = context + " (sandbox_id=" + std::string(sandbox_id) + "): " + inner.message();
  Error out(inner.code(), std::move(message));
  out.set_fix(nlohmann::json{{"context", context},
                             {"sandbox_id", std::string(sandbox_id)},
                             {"inner_code", std::string(CodeName(inner.code()))}});
  // An explicit empty note: the wire object carries fix_note null.
  out.set_fix_note(std::string());
  if (inner.details()) out.set_details(*inner.details());
  return out;
}

RunLang LangFor(std::string_view lang) {
  if (lang == "node" || lang == "js" || lang == "javascript") return {"node", "/tmp/run.js", false};
  if (lang == "python" || lang == "py") return {"python3", "/tmp/run.py", false};
  if (lang == "shell" || lang == "sh") return {"/bin/sh", "/tmp/run.sh", false};
  if (lang == "bash") return {"/bin/bash", "/tmp/run.sh", true};
  return {std::string(lang), "/tmp/run.txt", false};
}

}  // namespace skiff
