// SHA-256 (FIPS 180-4), incremental. Used for recipe versions, store keys
// and OCI blob verification.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view bytes);
  void Update(const void* data, size_t n);
  // Finishes and returns the 64-character lowercase hex digest. The object
  // must not be updated afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string Sha256Hex(std::string_view bytes);

// True for exactly 64 lowercase hex characters.
bool IsHexDigest(std::string_view s);

// The digest of a whole file, read in 64 KiB chunks.
Result<std::string> Sha256File(const std::string& path);

}  // namespace skiff
