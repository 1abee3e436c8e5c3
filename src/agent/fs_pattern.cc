#include "agent/fs_pattern.h"

namespace skiff::agent {

std::unique_ptr<RE2> CompilePattern(const std::string& pattern, bool ignore_case, bool literal) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_case_sensitive(!ignore_case);
  o.set_literal(literal);
  o.set_max_mem(64 << 20);
  return std::make_unique<RE2>(pattern, o);
}

}  // namespace skiff::agent
