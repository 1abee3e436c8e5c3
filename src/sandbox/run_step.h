// Pieces of sandbox::run (docs/api.md#sandboxrun) shared by the manager (which runs the
// steps) and the functions layer (which validates and documents them):
// the step-error wrapper and the `lang` table.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff {

// Step names used in the wrapped message and the fix context.
inline constexpr std::string_view kRunStepCreate = "create";
inline constexpr std::string_view kRunStepSiblingFile = "fs::write (sibling file)";
inline constexpr std::string_view kRunStepCode = "fs::write (code)";
inline constexpr std::string_view kRunStepExec = "exec";

// Wraps a failing step's error: same code and details; message
// "during sandbox::run step `<step>` (sandbox_id=<id>): <inner message>";
// fix {"context": "during sandbox::run step `<step>`", "sandbox_id": <id>,
// "inner_code": "<Sxxx>"}; fix_note null. For step `create` pass "" as id.
Error WrapRunStep(const Error& inner, std::string_view step, std::string_view sandbox_id);

// The `lang` table (exact, case-sensitive match).
struct RunLang {
  std::string program;  // "node", "python3", "/bin/sh", "/bin/bash" or the lang itself
  std::string file;     // "/tmp/run.js", ...
  bool bash = false;    // program is /bin/bash if the image has it, else /bin/sh
};
RunLang LangFor(std::string_view lang);

}  // namespace skiff
