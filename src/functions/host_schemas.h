// The schemas of the host functions a fleet router calls
// (skiff::host::status, skiff::host::has), in the vocabulary of
// functions/schema_builders.h.
#pragma once

#include <string_view>

#include "functions/schemas.h"

namespace skiff::fn {

// True when `id` is one of the host functions; then *s is set.
bool HostSchemas(std::string_view id, FunctionSchemas* s);

}  // namespace skiff::fn
