// The host <-> agent wire format, defined once and linked by both sides.
//
// A frame is a 12-byte little-endian header followed by a binary payload:
//
//   u32 payload_len | u32 stream_id | u8 type | u8 flags | u16 reserved (0)
//
// Stream 0 carries connection-level messages (HELLO). Every request opens its
// own stream (the host picks odd ids, increasing); many streams run at once
// over one channel. Control payloads (OPEN, META, RESULT, ERROR, HELLO) are
// JSON; DATA payloads are raw bytes, never base64. See docs/protocol.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff::proto {

inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderSize = 12;
// Largest payload a peer may send; larger lengths are a corrupt stream.
inline constexpr uint32_t kMaxPayload = 1u << 20;
// DATA chunk size used by writers (<= kMaxPayload).
inline constexpr uint32_t kChunk = 64u * 1024;
// Initial credit, in DATA payload bytes, per stream and channel and direction.
inline constexpr uint32_t kInitialWindow = 1u << 20;

enum class Type : uint8_t {
  kHello = 1,   // stream 0, JSON {"proto":1,...}; agent sends first, host answers
  kOpen = 2,    // host -> agent: JSON request, opens the stream
  kData = 3,    // raw bytes on channel `flags`
  kEnd = 4,     // end of channel `flags` (half close)
  kMeta = 5,    // agent -> host: JSON, intermediate (e.g. fs.read metadata)
  kResult = 6,  // agent -> host: JSON, final success; closes the stream
  kError = 7,   // agent -> host: JSON {"code":"Sxxx","message":...}; final
  kCredit = 8,  // u32 LE: more DATA bytes the sender may send on channel `flags`
  kCancel = 9,  // host -> agent: abandon the request (kill the exec)
};

// Channels for DATA / END / CREDIT (the `flags` byte).
enum Channel : uint8_t {
  kStdin = 0,   // exec stdin, fs.write body (host -> agent)
  kStdout = 1,  // exec stdout, fs.read body (agent -> host)
  kStderr = 2,  // exec stderr
};
inline constexpr uint8_t kChannels = 3;

struct Frame {
  uint32_t stream = 0;
  Type type = Type::kData;
  uint8_t flags = 0;
  std::string payload;
};

bool IsKnownType(Type t);
std::string_view TypeName(Type t);

// Writes the 12-byte header for a payload of `len` bytes to `out`.
void EncodeHeader(char* out, uint32_t len, uint32_t stream, Type type, uint8_t flags);
// Appends the encoded frame to `out`. payload must be <= kMaxPayload.
void AppendFrame(std::string& out, uint32_t stream, Type type, uint8_t flags, std::string_view payload);
std::string EncodeFrame(uint32_t stream, Type type, uint8_t flags, std::string_view payload);
std::string EncodeCredit(uint32_t stream, uint8_t channel, uint32_t bytes);
// Parses a CREDIT payload.
std::optional<uint32_t> DecodeCredit(std::string_view payload);

// Incremental decoder: feed it bytes as they arrive, pull whole frames.
// A frame of an unknown type is returned as is (the caller answers it with a
// per-request error); only a corrupt header (oversized length, non-zero
// reserved bits) is fatal for the connection, since it cannot resync.
class Decoder {
 public:
  void Feed(std::string_view bytes);
  // Zero-copy feeding: Room(n) returns where up to n bytes may be written
  // (valid until the next call on the decoder); Commit(k) then adds the
  // k <= size() bytes written there. The room is smaller than n while a
  // large frame's payload is read straight into that frame's own buffer: it
  // ends where the payload ends, so the bytes of a payload are copied once
  // (by the kernel) instead of twice.
  std::span<char> Room(size_t n);
  void Commit(size_t k);
  // A frame, nullopt if more bytes are needed, or an S300 error if corrupt.
  Result<std::optional<Frame>> Next();
  // Bytes fed and not yet returned as frames (a direct frame's header included).
  size_t buffered() const { return end_ - pos_ + (direct_ ? kHeaderSize + direct_got_ : 0); }
  // Payloads at least this large whose bytes have not all arrived are read
  // straight into their frame's buffer.
  static constexpr size_t kDirectPayload = size_t{16} * 1024;

 private:
  void Compact();
  bool Directing() const;  // a direct payload is still being read

  std::string buf_;
  size_t end_ = 0;  // bytes of buf_ holding data; the rest is Room() room
  size_t pos_ = 0;
  // A large frame whose header is read and whose payload is being read
  // into `direct_->payload` (its full size), `direct_got_` bytes so far.
  std::optional<Frame> direct_;
  size_t direct_got_ = 0;
};

}  // namespace skiff::proto
