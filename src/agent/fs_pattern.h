// The RE2 options grep and sed compile their patterns with: errors are not
// logged, matching memory is bounded (64 MiB).
#pragma once

#include <re2/re2.h>

#include <memory>
#include <string>

namespace skiff::agent {

// Check ok() on the result: an invalid pattern is reported by the caller.
std::unique_ptr<RE2> CompilePattern(const std::string& pattern, bool ignore_case, bool literal);

}  // namespace skiff::agent
