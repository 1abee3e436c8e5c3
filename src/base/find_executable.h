// Finding a program on PATH, written once with one default search path.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace skiff {

// The search path used when PATH is unset or empty (the daemon may be
// started by an init system with a bare environment).
inline constexpr std::string_view kDefaultSearchPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The first executable regular file named `name` in the directories of
// `search_path` (PATH if nullopt, falling back to kDefaultSearchPath). A name
// with a '/' is checked as it is. Empty components are skipped, never taken
// to mean the current directory.
std::optional<std::string> FindExecutable(std::string_view name,
                                          std::optional<std::string_view> search_path = std::nullopt);

}  // namespace skiff
