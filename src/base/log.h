// Minimal leveled logging to stderr. SKIFF_LOG=debug|info|warn|error.
// SKIFF_LOG_LIMITED is the same line for sites a caller can trigger at will
// (accept errors, per-connection events): at most kLimitedBurst lines per
// kLimitedInterval from one call site, and the next line that gets through
// says how many were suppressed.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string_view>

namespace skiff::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
bool Enabled(Level l);
void Write(Level l, std::string_view msg);

inline constexpr uint64_t kLimitedBurst = 10;
inline constexpr std::chrono::seconds kLimitedInterval{10};

// The budget of one log site: `burst` lines per `interval`. Thread-safe.
class RateLimit {
 public:
  using Clock = std::chrono::steady_clock;
  RateLimit(uint64_t burst, Clock::duration interval) : burst_(burst), interval_(interval) {}
  // Whether a line may be written at `now`; when it may, `*suppressed` is the
  // number of lines refused since the last one written (then reset).
  bool Allow(Clock::time_point now, uint64_t* suppressed);
  bool Allow(uint64_t* suppressed) { return Allow(Clock::now(), suppressed); }

 private:
  std::mutex mu_;
  const uint64_t burst_;
  const Clock::duration interval_;
  Clock::time_point window_start_{};
  uint64_t in_window_ = 0;
  uint64_t suppressed_ = 0;
};

class Line {
 public:
  explicit Line(Level l, uint64_t suppressed = 0) : level_(l), suppressed_(suppressed) {}
  ~Line() {
    if (suppressed_ > 0) os_ << " (" << suppressed_ << " similar lines suppressed)";
    Write(level_, os_.str());
  }
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  template <typename T>
  Line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  Level level_;
  uint64_t suppressed_;
  std::ostringstream os_;
};

}  // namespace skiff::log

#define SKIFF_LOG(lvl)                                                                             \
  for (bool _skiff_log_once = ::skiff::log::Enabled(::skiff::log::Level::k##lvl); _skiff_log_once; \
       _skiff_log_once = false)                                                                    \
  ::skiff::log::Line(::skiff::log::Level::k##lvl)

// The RateLimit of the call site this is expanded at: the lambda's type, and
// so its static, is unique to the site (and to each instantiation of a
// template around it).
#define SKIFF_LOG_SITE_BUDGET()                                                                         \
  ([]() -> ::skiff::log::RateLimit& {                                                                   \
    static ::skiff::log::RateLimit budget(::skiff::log::kLimitedBurst, ::skiff::log::kLimitedInterval); \
    return budget;                                                                                      \
  }())

#define SKIFF_LOG_LIMITED(lvl)                                                                               \
  for (uint64_t _skiff_log_supp = 0, _skiff_log_once = ::skiff::log::Enabled(::skiff::log::Level::k##lvl) && \
                                                       SKIFF_LOG_SITE_BUDGET().Allow(&_skiff_log_supp);      \
       _skiff_log_once != 0; _skiff_log_once = 0)                                                            \
  ::skiff::log::Line(::skiff::log::Level::k##lvl, _skiff_log_supp)
