// Minimal leveled logging to stderr. SKIFF_LOG=debug|info|warn|error.
#pragma once

#include <sstream>
#include <string_view>

namespace skiff::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
bool Enabled(Level l);
void Write(Level l, std::string_view msg);

class Line {
 public:
  explicit Line(Level l) : level_(l) {}
  ~Line() { Write(level_, os_.str()); }
  template <typename T>
  Line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  Level level_;
  std::ostringstream os_;
};

}  // namespace skiff::log

#define SKIFF_LOG(lvl)                                                                             \
  for (bool _skiff_log_once = ::skiff::log::Enabled(::skiff::log::Level::k##lvl); _skiff_log_once; \
       _skiff_log_once = false)                                                                    \
  ::skiff::log::Line(::skiff::log::Level::k##lvl)
