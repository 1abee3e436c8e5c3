// The mapping of an errno to the spec's typed fs error (docs/api.md#filesystem-rules-sandboxfs), shared
// by the filesystem operations. Their requests are parsed by the types of
// protocol/fs_messages.h.
#pragma once

#include <string_view>

#include "base/error.h"

namespace skiff::agent {

// "<prefix><what>" for errno `err` (docs/api.md#filesystem-rules-sandboxfs); S216 appends the errno name.
Error FsError(int err, std::string_view what);

}  // namespace skiff::agent
