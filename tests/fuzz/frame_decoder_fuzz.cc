// Fuzzes proto::Decoder: arbitrary bytes, fed in arbitrary pieces. Every
// frame it returns re-encodes to exactly the bytes it was decoded from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace skiff::proto;
  if (size == 0) return 0;
  // The first byte picks the piece size, so frames straddle Feed calls.
  const size_t piece = 1 + data[0] % 32;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  Decoder d;
  std::string reencoded;
  size_t fed = 0;
  bool corrupt = false;
  while (fed < in.size() && !corrupt) {
    std::string_view chunk = in.substr(fed, piece);
    if (fed % 2 == 0) {
      d.Feed(chunk);
    } else {
      std::span<char> room = d.Room(chunk.size());
      chunk = chunk.substr(0, room.size());  // a direct payload's room ends with it
      chunk.copy(room.data(), chunk.size());
      d.Commit(chunk.size());
    }
    fed += chunk.size();
    while (true) {
      auto f = d.Next();
      if (!f.ok()) {
        corrupt = true;
        break;
      }
      if (!*f) break;
      const Frame& fr = **f;
      if (fr.payload.size() > kMaxPayload) std::abort();
      AppendFrame(reencoded, fr.stream, fr.type, fr.flags, fr.payload);
      if (fr.type == Type::kCredit) (void)DecodeCredit(fr.payload);
      (void)TypeName(fr.type);
    }
  }
  // The frames decoded are a prefix of the input, byte for byte, and what
  // is left buffered is the rest of what was fed.
  if (in.substr(0, reencoded.size()) != reencoded) std::abort();
  if (!corrupt && reencoded.size() + d.buffered() != fed) std::abort();
  return 0;
}
