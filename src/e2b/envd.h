// The sandbox an envd request of the E2B API reached (api.cc resolves it
// from E2B's routing headers and checks its access token), and the path
// and environment rules envd applies for the request's user.
#pragma once

#include <string>

#include "e2b/sandbox_book.h"

namespace skiff::e2b {

struct Api::Envd {
  SandboxRecord record;
  std::string user;  // from Authorization: Basic, "" for the sandbox's default
  // Where relative paths resolve: the user's home directory.
  std::string Home() const { return user.empty() || user == "root" ? "/root" : "/home/" + user; }
  std::string Resolve(const std::string& path) const {
    if (!path.empty() && path[0] == '/') return path;
    if (path.empty() || path == ".") return Home();
    return Home() + "/" + path;
  }
};

// The user an `Authorization: Basic base64("user:")` header names, "" when
// there is none; an error message for a malformed one.
Result<std::string> BasicUser(const std::string& authorization);

}  // namespace skiff::e2b
