// The S-code table of the contract (type, HTTP status, retryability, meaning,
// default fix_note) and what is derived from it: an error's wire object, its
// HTTP status, type and retryability.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

#include "base/error.h"

namespace skiff {

struct CodeInfo {
  Code code;
  std::string_view type;  // "validation", "filesystem", ...
  int http;               // HTTP status
  bool retryable;
  std::string_view meaning;   // when it is raised
  std::string_view fix_note;  // default note; "" = null
};

const CodeInfo& InfoFor(Code c);
std::span<const CodeInfo> AllCodes();
// The note sent with S211 when fix == {"parents": true}.
std::string_view ParentsFixNote();
// The fix_note the wire object carries for `e` (string or null).
//  - fix has "context" (a sandbox::run step): null;
//  - Error::fix_note_override() set: that text ("" means null);
//  - S211 with fix {"parents": true}: ParentsFixNote();
//  - otherwise the code's default note.
nlohmann::json FixNoteFor(const Error& e);
// S211 "parent directory not found: <parent>" with fix {"parents": true}.
Error ParentsMissing(std::string_view parent);

// The docs/errors.md wire object of an error (sorted keys), with docs_url built
// from `docs_base`.
nlohmann::json ErrorToWire(const Error& e, std::string_view docs_base);
// HTTP status for an S-code (docs/errors.md#codes / docs/architecture.md#transports-and-their-limits).
int HttpStatus(Code c);
// The type string ("validation", ...), retryability and default fix_note.
std::string_view ErrorType(Code c);
bool Retryable(Code c);

}  // namespace skiff
