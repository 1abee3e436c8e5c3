// gzip both ways for envd's /files (docs/e2b.md#files), streaming in
// bounded memory: an upload sent with `Content-Encoding: gzip` is
// inflated piece by piece as it is written, and a download whose client
// asked for gzip is deflated piece by piece as it is read.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "sandbox/types.h"

namespace skiff::e2b {

// The inflated bytes of the gzip stream `compressed` yields: no more than
// 256 KiB per call, "" at the end; an error (S001) for a corrupt or
// truncated stream or trailing bytes after it.
ByteSource Gunzip(ByteSource compressed);

// Deflates what it is given into gzip, a piece at a time.
class GzipWriter {
 public:
  GzipWriter();
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;
  // The compressed bytes `in` makes available now (maybe none).
  Result<std::string> Write(std::string_view in);
  // The rest of the stream, with gzip's trailer.
  Result<std::string> Finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace skiff::e2b
