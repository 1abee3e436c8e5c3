#include "base/log.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace skiff::log {
namespace {

Level Threshold() {
  static const Level level = [] {
    const char* e = std::getenv("SKIFF_LOG");
    std::string_view v = e ? e : "warn";
    if (v == "debug") return Level::kDebug;
    if (v == "info") return Level::kInfo;
    if (v == "error") return Level::kError;
    return Level::kWarn;
  }();
  return level;
}

}  // namespace

bool Enabled(Level l) { return l >= Threshold(); }

bool RateLimit::Allow(Clock::time_point now, uint64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_window_ == 0 || now - window_start_ >= interval_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

void Write(Level l, std::string_view msg) {
  static constexpr const char* kTag[] = {"debug", "info", "warn", "error"};
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char head[64];
  int n = snprintf(head, sizeof head, "%02d:%02d:%02d.%03ld skiff %s: ", t.tm_hour, t.tm_min, t.tm_sec,
                   ts.tv_nsec / 1000000, kTag[static_cast<int>(l)]);
  std::string line(head, static_cast<size_t>(n));
  line.append(msg).push_back('\n');
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace skiff::log
