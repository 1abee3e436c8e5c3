#include "base/thread.h"

#include <cerrno>
#include <exception>
#include <system_error>
#include <utility>

#include "base/log.h"

namespace skiff {

void RunGuarded(const std::string& name, const std::function<void()>& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    SKIFF_LOG(Error) << name << ": uncaught exception: " << e.what();
  } catch (...) {
    SKIFF_LOG(Error) << name << ": uncaught exception of unknown type";
  }
}

Result<std::thread> StartThread(const std::string& name, std::function<void()> body) {
  try {
    // `name` is copied, not moved: the catch below still needs it.
    return std::thread([name, body = std::move(body)]() mutable { RunGuarded(name, body); });
  } catch (const std::system_error& e) {
    int err = e.code().value() != 0 ? e.code().value() : EAGAIN;
    return Error::Sys(Code::kS300, "pthread_create", name, err);
  }
}

}  // namespace skiff
