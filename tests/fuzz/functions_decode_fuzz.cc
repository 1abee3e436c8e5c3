// Fuzzes the function layer's request decoders. The first byte picks the
// decoder, the rest is its input (JSON for the payload decoders).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "functions/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace skiff::fn;
  if (size == 0) return 0;
  const uint8_t which = data[0];
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto payload = [&] { return json::parse(text, nullptr, /*allow_exceptions=*/false); };
  switch (which % 10) {
    case 0: {
      json j = payload();
      if (j.is_discarded()) return 0;
      auto n = NormalizePayload(j);
      if (n.ok() && !n->is_object()) std::abort();
      (void)DecodeCreate(j);
      break;
    }
    case 1: {
      json j = payload();
      if (!j.is_discarded()) (void)DecodeExec(j);
      break;
    }
    case 2: {
      json j = payload();
      if (!j.is_discarded()) (void)DecodeRun(j);
      break;
    }
    case 3: {
      json j = payload();
      if (j.is_discarded()) return 0;
      auto env = ParseEnv(&j);
      // The object form admits only valid names; the array form, as iii,
      // takes any "NAME=value" split at its first '=' (a name like "]" is
      // passed on): a name is never empty and never holds '=' or NUL.
      if (env.ok())
        for (const auto& [name, value] : *env) {
          if (j.is_object() && !IsValidEnvName(name)) std::abort();
          if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos)
            std::abort();
          if (value.find('\0') != std::string::npos) std::abort();
        }
      break;
    }
    case 4: {
      ShlexResult r = ShlexSplit(text);
      if (!r.ok() && !r.words.empty() && r.error.empty()) std::abort();
      break;
    }
    case 5:
      (void)DecodeBase64Field(text, "content");
      break;
    case 6: {
      auto m = ParseMode(text);
      if (m.ok()) {
        // A mode that parses formats back to a mode that parses to itself.
        auto again = ParseMode(FormatMode(*m));
        if (!again.ok() || *again != (*m & 07777)) std::abort();
      }
      break;
    }
    case 7: {
      auto id = ParseSandboxId(text);
      if (id.ok()) {
        auto again = ParseSandboxId(*id);
        if (!again.ok() || *again != *id) std::abort();  // canonical is a fixed point
      }
      break;
    }
    case 8:
      (void)ContainsUnicodeWhitespace(text);
      (void)ValidateLang(text);
      break;
    case 9: {
      json j = payload();
      if (j.is_discarded() || !j.is_object()) return 0;
      Fields f(j);
      (void)ReadSandboxId(f);
      (void)f.OptUint("timeout_ms");
      (void)f.OptInt("offset");
      (void)f.OptStringArray("args");
      (void)f.OptPath("cwd");
      break;
    }
  }
  return 0;
}
