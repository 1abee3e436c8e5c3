#include "agent/output_ring.h"

#include <algorithm>
#include <cstring>

namespace skiff::agent {

namespace {
// The first allocation: small enough for an idle process, big enough that a
// chatty one does not regrow at once.
constexpr size_t kFirstAlloc = 4096;
}  // namespace

void OutputRing::Reserve(size_t need) {
  if (need <= buf_.size()) return;
  // Until the ring first wraps, byte k is at position k: growing keeps
  // every held byte where it is. Doubling bounds the copies.
  size_t grown = std::max({need, buf_.size() * 2, kFirstAlloc});
  buf_.resize(std::min(grown, capacity_));
}

void OutputRing::Append(std::string_view bytes) {
  if (bytes.empty()) return;
  // Only the last capacity_ bytes can survive; skip the rest.
  if (bytes.size() > capacity_) {
    size_t skip = bytes.size() - capacity_;
    end_ += static_cast<int64_t>(skip);
    held_ = 0;
    bytes.remove_prefix(skip);
  }
  int64_t new_end = end_ + static_cast<int64_t>(bytes.size());
  // Storage is positions [0, capacity_) once the stream passed capacity_.
  Reserve(static_cast<size_t>(std::min<int64_t>(new_end, static_cast<int64_t>(capacity_))));
  size_t pos = Pos(end_);
  size_t first = std::min(bytes.size(), capacity_ - pos);
  std::memcpy(buf_.data() + pos, bytes.data(), first);
  if (first < bytes.size()) std::memcpy(buf_.data(), bytes.data() + first, bytes.size() - first);
  end_ = new_end;
  held_ = std::min(capacity_, held_ + bytes.size());
}

OutputRing::Room OutputRing::Writable(size_t max) {
  if (buf_.size() < capacity_) return {};
  max = std::min(max, capacity_);
  size_t pos = Pos(end_);
  size_t first = std::min(max, capacity_ - pos);
  return {{buf_.data() + pos, first}, {buf_.data(), max - first}};
}

void OutputRing::Commit(size_t n) {
  n = std::min(n, capacity_);
  end_ += static_cast<int64_t>(n);
  held_ = std::min(capacity_, held_ + n);
}

std::string_view OutputRing::View(int64_t from, size_t max) const {
  if (from < start() || from >= end_ || max == 0) return {};
  size_t pos = Pos(from);
  size_t n = std::min({max, static_cast<size_t>(end_ - from), capacity_ - pos});
  return {buf_.data() + pos, n};
}

std::string OutputRing::Read(int64_t from, size_t max) const {
  std::string out;
  while (out.size() < max) {
    std::string_view v = View(from, max - out.size());
    if (v.empty()) break;
    out.append(v);
    from += static_cast<int64_t>(v.size());
  }
  return out;
}

}  // namespace skiff::agent
