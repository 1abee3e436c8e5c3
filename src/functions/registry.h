// The function registry: each sandbox::* / engine::* function declares its
// id, description, request and response JSON Schemas (draft-07) and handler
// exactly once. Transports, generated docs and tests all read this table.
// The types it is made of are functions/function_def.h and
// functions/invocation.h; the S-code wire mapping is functions/errors.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "functions/function_def.h"
#include "functions/invocation.h"

namespace skiff {

// Looks the id up, reads a null/absent payload as {}, runs the handler and
// takes its engine fault, if any, from the CallContext. An unknown id gives
// EngineFault::FunctionNotFound.
Invocation Invoke(std::string_view id, const nlohmann::json& payload, CallContext& ctx);

const std::vector<FunctionDef>& Functions();
const FunctionDef* FindFunction(std::string_view id);

}  // namespace skiff
