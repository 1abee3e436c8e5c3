// Renders docs/api.md and docs/errors.md from the registry and the S-code
// table, so the published reference cannot drift from the code. The
// skiff-gendocs tool writes them; a unit test compares them with the files.
#pragma once

#include <string>

namespace skiff {

std::string RenderApiDoc();
std::string RenderErrorsDoc();

}  // namespace skiff
