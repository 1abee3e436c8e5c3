// Threads whose failures stay inside them. A daemon thread that lets an
// exception escape calls std::terminate and takes every sandbox with it,
// and std::thread's constructor itself throws std::system_error when the
// host is out of threads (EAGAIN). StartThread turns the second into an
// Error for the caller and logs-and-swallows the first.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "base/error.h"

namespace skiff {

// Starts `body` on a new thread. An exception escaping `body` is logged as
// "<name>: uncaught exception: <what>" and ends only that thread. Failure
// to create the thread is S300 naming `name`.
Result<std::thread> StartThread(const std::string& name, std::function<void()> body);

// Runs `body` here, with the same guard (for bodies run by a thread the
// caller did not create, such as an io_context's workers).
void RunGuarded(const std::string& name, const std::function<void()>& body) noexcept;

}  // namespace skiff
