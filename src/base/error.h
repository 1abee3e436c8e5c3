// One error type for all of skiff.
//
// An Error carries an S-code (the stable, documented contract code of
// docs/errors.md), a human message, and optionally the failing system call
// and its object ("mount(overlay, /run/skiff/…/root): EINVAL").  Codes are
// mapped to wire objects, HTTP statuses and fix hints in exactly one place
// (functions/errors.cc); everything below that layer only picks a code.
#pragma once

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace skiff {

enum class Code {
  kS001,  // validation: bad request
  kS002,  // sandbox not found
  kS003,  // exec concurrency cap
  kS004,  // sandbox stopping / stopped
  kS005,  // sandbox paused
  kS006,  // pause/resume in the wrong state
  kS007,  // snapshot not found
  kS008,  // snapshot in use
  kS100,  // image not in catalog / not allowed
  kS101,  // image not installed, auto_install off
  kS102,  // auto-install failed (retryable)
  kS200,  // exec timed out
  kS210,  // bad fs request (mode, sed form, ...)
  kS211,  // not found
  kS212,  // wrong type
  kS213,  // already exists
  kS214,  // directory not empty
  kS215,  // permission denied
  kS216,  // other fs / io error
  kS217,  // bad regex
  kS218,  // stream stalled / aborted (retryable)
  kS219,  // agent does not support the request
  kS220,  // live process not found
  kS221,  // live process in the wrong state (exited, no stdin, no terminal)
  kS222,  // nothing listens on the port in the sandbox (port.connect)
  kS300,  // platform failure
  kS301,  // the fleet host holding the sandbox is gone (router)
  kS400,  // resource limit
};

// "S211" for Code::kS211.
std::string_view CodeName(Code c);
// Inverse of CodeName; nullopt for an unknown string.
std::optional<Code> CodeFromName(std::string_view name);

// The S-code for an errno returned by a filesystem operation (docs/api.md#filesystem-rules-sandboxfs).
Code CodeForErrno(int err);
// The stable message prefix for a filesystem code ("file not found: ").
std::string_view FsPrefix(Code c);

class Error {
 public:
  Error(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  // A failed system call: "call(object): STRERRORNAME" with an explicit code.
  static Error Sys(Code code, std::string_view call, std::string_view object, int err);

  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Optional wire extras (docs/errors.md).
  const nlohmann::json& fix() const { return fix_; }
  Error& set_fix(nlohmann::json fix) {
    fix_ = std::move(fix);
    return *this;
  }
  const std::optional<std::string>& fix_note_override() const { return fix_note_; }
  Error& set_fix_note(std::optional<std::string> note) {
    fix_note_ = std::move(note);
    return *this;
  }
  const std::optional<nlohmann::json>& details() const { return details_; }
  Error& set_details(nlohmann::json d) {
    details_ = std::move(d);
    return *this;
  }

  // Adds what the caller was doing, keeping the code and extras:
  //   Error::Sys(kS300, "mount", dir, EINVAL).With("while starting the jail")
  //   → "while starting the jail: mount(dir): EINVAL".
  Error& With(std::string_view context) & {
    message_.insert(0, std::string(context) + ": ");
    return *this;
  }
  Error&& With(std::string_view context) && { return std::move(With(context)); }

  std::string ToString() const;

 private:
  Code code_;
  std::string message_;
  nlohmann::json fix_ = nullptr;
  std::optional<std::string> fix_note_;
  std::optional<nlohmann::json> details_;
};

// Shorthands.
Error InvalidRequest(std::string_view detail);                    // S001 "invalid request: <detail>"
Error Platform(std::string_view stage, std::string_view detail);  // S300

// "ENOENT" for 2; "E<n>" for an unknown number.
std::string_view ErrnoName(int err);

// Result<T>: a value or an Error (an std::expected stand-in for C++20).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;
inline Status OkStatus() { return Ok{}; }

}  // namespace skiff

// Propagate an error from an expression yielding Result<…>/Status.
#define SKIFF_CONCAT_INNER(a, b) a##b
#define SKIFF_CONCAT(a, b) SKIFF_CONCAT_INNER(a, b)
#define SKIFF_RETURN_IF_ERROR(expr)                           \
  do {                                                        \
    auto _skiff_st = (expr);                                  \
    if (!_skiff_st.ok()) return std::move(_skiff_st).error(); \
  } while (0)
// `lhs` is a declaration or an lvalue and `tmp` a name: neither can be
// parenthesised (expr is).
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SKIFF_ASSIGN_OR_RETURN(lhs, expr) \
  SKIFF_ASSIGN_OR_RETURN_IMPL(SKIFF_CONCAT(_skiff_r, __LINE__), lhs, expr)
#define SKIFF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).error();     \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
