// A streaming, pull-style reader of multipart/form-data bodies (RFC 7578
// over the RFC 2046 framing), for the E2B-compatible file upload
// (`POST /files`). Pure: it reads the raw body from a ByteSource and never
// holds a whole part in memory; the HTTP transport feeds it, the handler
// pulls parts and their bytes.
//
//   SKIFF_ASSIGN_OR_RETURN(std::string boundary, MultipartBoundary(content_type));
//   MultipartReader reader(boundary, body);
//   for (;;) {
//     SKIFF_ASSIGN_OR_RETURN(auto part, reader.NextPart());  // in body order
//     if (!part) break;                                       // closing boundary
//     ... part->filename; reader.Read() until "" (or use it as a ByteSource) ...
//   }
//
// What it accepts, and what it refuses (every refusal an S001
// InvalidRequest "multipart body: …", a ByteSource error passed through):
//   - The delimiter is CRLF "--" boundary; the first one may open the body
//     without a CRLF. The preamble (at most kMultipartMaxPreamble bytes) is
//     skipped; transport padding (spaces, tabs) may follow a boundary; the
//     closing delimiter "--boundary--" ends the body and nothing after it
//     (the epilogue) is read.
//   - Lines end with CRLF. A body with LF-only line endings is refused:
//     accepting them would make a lone "\n--boundary" inside binary data a
//     delimiter, and every client of the E2B API (browsers, the SDKs'
//     HTTP libraries) writes CRLF.
//   - A delimiter followed by anything but "--" or padding and CRLF is
//     refused; bytes that merely start like one ("\r\n--bou" not followed
//     by the rest of the boundary) are data.
//   - Each part needs `Content-Disposition: form-data; name=…`. Header names
//     are case-insensitive, folded lines are joined, other headers are
//     ignored. Parameters are tokens or quoted strings, where `\"` and `\\`
//     are escapes and any other backslash is kept as is (browsers send
//     Windows paths unescaped). `filename*=` (RFC 5987, UTF-8 or
//     ISO-8859-1, percent-encoded) wins over `filename=`. The filename is
//     returned as sent: not basenamed, not checked as a path (the caller's
//     path rules apply).
//   - Limits: kMultipartMaxHeaderBytes per part's header block,
//     kMultipartMaxParts parts; Read() returns at most kMultipartMaxChunk
//     bytes and holds back only the bytes that could start a delimiter.
//   - A body that ends before the closing delimiter is refused (the bytes
//     of a truncated part are returned before the error).
// After an error every call returns that same error.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff::e2b {

// The same type as skiff::ByteSource (sandbox/types.h), spelled here so
// that this reader links only skiff_base: the next chunk of bytes, "" at
// the end of the stream, or an error.
using ByteSource = std::function<Result<std::string>()>;

inline constexpr size_t kMultipartMaxHeaderBytes = size_t{16} * 1024;  // one part's header block
inline constexpr size_t kMultipartMaxParts = 1000;
inline constexpr size_t kMultipartMaxChunk = size_t{256} * 1024;    // the most one Read() returns
inline constexpr size_t kMultipartMaxPreamble = size_t{64} * 1024;  // bytes before the first boundary

// The boundary parameter of a multipart/form-data Content-Type (quoted or
// not): 1 to 70 characters, printable ASCII or spaces, not ending in a space.
// An error for another media type or a missing or invalid boundary.
Result<std::string> MultipartBoundary(std::string_view content_type);

struct MultipartPart {
  std::string name;                     // the form field name
  std::optional<std::string> filename;  // as sent (not basenamed), absent when the part has none
  std::string content_type;             // the part's Content-Type, "" if none
};

class MultipartReader {
 public:
  MultipartReader(std::string boundary, ByteSource body);
  MultipartReader(const MultipartReader&) = delete;
  MultipartReader& operator=(const MultipartReader&) = delete;

  // The next part's headers; nullopt after the closing boundary; an error
  // for a malformed body. The rest of a part not read to its end is
  // skipped (read and dropped, never buffered).
  Result<std::optional<MultipartPart>> NextPart();

  // The current part's next bytes (at most kMultipartMaxChunk, whatever is
  // available): "" at the part's end (and before the first part, and after
  // the last); an error for a malformed or truncated body. Usable directly
  // as a ByteSource for one part: [&reader] { return reader.Read(); }.
  Result<std::string> Read();

 private:
  enum class State {
    kStart,           // before the first delimiter (the preamble)
    kBody,            // inside a part's body
    kAfterDelimiter,  // a delimiter consumed, what follows it not yet read
    kDone,            // the closing delimiter consumed
  };

  // The next bytes of the current body (or preamble) up to the next
  // delimiter, as a view into buf_ valid until the next call; empty once
  // the delimiter itself is consumed (state_ becomes kAfterDelimiter).
  Result<std::string_view> Scan();
  // Skips body (or preamble) bytes up to and including the next delimiter.
  Status SkipToDelimiter();
  // Pulls one chunk from the source into buf_ (eof_ at its end).
  Status Fill();
  // Fills until at least n bytes are buffered or the source ended.
  Status Need(size_t n);
  // One CRLF-terminated line without its CRLF, counted against *budget
  // (the part's header block).
  Result<std::string> ReadLine(size_t* budget);
  // The headers of the part whose boundary line was just read.
  Result<MultipartPart> ReadHeaders();
  // Records err as the reader's permanent outcome and returns it.
  Error Fail(Error err);

  std::string boundary_;
  std::string delimiter_;  // "\r\n--" + boundary_
  ByteSource source_;
  std::string buf_;  // unread bytes are buf_[pos_, size)
  size_t pos_ = 0;
  bool eof_ = false;
  State state_ = State::kStart;
  size_t parts_ = 0;  // parts begun so far
  std::optional<Error> failed_;
};

}  // namespace skiff::e2b
