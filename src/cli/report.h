// How the CLI shows an error to a person, and the exit status it maps to.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"

namespace skiff::cli {

// Writes all of `s` to `fd` (retrying short writes; gives up on an error).
void WriteAll(int fd, std::string_view s);

// Prints an error object (docs/errors.md) on stderr, with its hint and fix, and
// any output it carries on stdout/stderr; returns kExitTimeout for S200,
// else kExitSkiffError.
int ReportErrorObject(const nlohmann::json& err);
// ReportErrorObject of the wire form of `e`.
int ReportError(const Error& e);

}  // namespace skiff::cli
