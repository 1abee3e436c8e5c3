// A bounded byte ring addressed by absolute offsets: the recent output of a
// live process. Byte k of the stream (k = 0 is the first byte ever
// appended) is held while start() <= k < end(); appending beyond the
// capacity overwrites the oldest bytes, so start() only moves forward.
// Storage grows on demand up to the capacity: a process that writes little
// costs little memory, whatever ring size it asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::agent {

class OutputRing {
 public:
  explicit OutputRing(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  size_t capacity() const { return capacity_; }
  // First byte still held, and one past the last byte appended.
  int64_t start() const { return end_ - static_cast<int64_t>(held_); }
  int64_t end() const { return end_; }
  // Bytes of storage allocated (<= capacity()).
  size_t allocated() const { return buf_.size(); }

  // Appends `bytes`, overwriting the oldest held bytes when full.
  void Append(std::string_view bytes);

  // Reading straight into the ring: up to `max` bytes of storage where the
  // next appended bytes go, in at most two pieces (the second after the
  // wrap); Commit(n) then appends the n bytes written there (n <= their
  // sizes' sum). Offered only once the storage is fully allocated, so a
  // quiet process's ring stays small: before that both pieces are empty
  // and the caller reads into a buffer and Appends. The bytes the pieces
  // cover are the oldest held ones; they count as overwritten only by
  // Commit.
  struct Room {
    std::span<char> first, second;
  };
  Room Writable(size_t max);
  void Commit(size_t n);

  // The held bytes from offset `from` on, at most `max`, as one contiguous
  // piece of storage: fewer than asked for when the run wraps (read again
  // from the returned end). Empty when `from` is outside [start(), end()).
  // Valid until the next Append.
  std::string_view View(int64_t from, size_t max) const;
  // Up to `max` held bytes from `from` on, across the wrap; empty when
  // `from` was overwritten or is at or beyond end().
  std::string Read(int64_t from, size_t max) const;

 private:
  size_t Pos(int64_t offset) const { return static_cast<size_t>(offset % static_cast<int64_t>(capacity_)); }
  // Makes the storage cover positions [0, need) (need <= capacity_).
  void Reserve(size_t need);

  size_t capacity_;
  std::vector<char> buf_;  // byte k lives at Pos(k) once allocated
  int64_t end_ = 0;
  size_t held_ = 0;
};

}  // namespace skiff::agent
