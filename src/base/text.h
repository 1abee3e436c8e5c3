// Text helpers shared by daemon and agent: base64 decoding, UTF-8, UUIDs, times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff {

// RFC 4648 standard alphabet with '=' padding; no whitespace. On failure
// returns nullopt and sets *why (if given) to a short reason.
std::optional<std::string> Base64Decode(std::string_view text, std::string* why = nullptr);
// RFC 4648 base64 with padding.
std::string Base64Encode(std::string_view bytes);

bool IsValidUtf8(std::string_view s);
// Replaces each invalid UTF-8 sequence with U+FFFD.
std::string SanitizeUtf8(std::string_view s);

// A random version-4 UUID, canonical lowercase form.
std::string NewUuid();
// Parses canonical, 32-hex, {braced} and urn:uuid: forms, any case.
// Returns the canonical lowercase hyphenated form.
std::optional<std::string> CanonicalUuid(std::string_view in);
// 32 random bytes as 64 hex characters (access keys).
std::string RandomHex(size_t bytes);

// Percent-decodes `in` ("%3A" -> ":"). '+' is kept literally unless
// `plus_is_space`. nullopt for a malformed escape.
std::optional<std::string> PercentDecode(std::string_view in, bool plus_is_space = false);
std::string PercentEncode(std::string_view in);

// Compares in time independent of where the strings differ (API keys,
// access tokens, signatures).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// RFC 3339 UTC with milliseconds: "2026-09-01T12:34:56.789Z".
std::string Rfc3339Millis(int64_t unix_millis);
int64_t NowUnixMillis();
int64_t MonotonicMillis();

}  // namespace skiff
