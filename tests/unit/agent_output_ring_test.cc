// The live-process output ring: absolute offsets, overwriting, reads across
// the wrap and of overwritten bytes, lazy storage.
#include "agent/output_ring.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>

namespace skiff::agent {
namespace {

// Bytes k..k+n-1 of a stream whose byte k is 'a' + k % 26.
std::string Stream(int64_t from, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>('a' + (from + static_cast<int64_t>(i)) % 26);
  return s;
}

TEST(OutputRing, EmptyRing) {
  OutputRing r(16);
  EXPECT_EQ(r.start(), 0);
  EXPECT_EQ(r.end(), 0);
  EXPECT_EQ(r.capacity(), 16u);
  EXPECT_EQ(r.allocated(), 0u);
  EXPECT_EQ(r.Read(0, 10), "");
  EXPECT_TRUE(r.View(0, 10).empty());
  r.Append("");
  EXPECT_EQ(r.end(), 0);
}

TEST(OutputRing, AppendsBeforeTheWrapKeepEverything) {
  OutputRing r(16);
  r.Append("hello");
  r.Append(" world");
  EXPECT_EQ(r.start(), 0);
  EXPECT_EQ(r.end(), 11);
  EXPECT_EQ(r.Read(0, 100), "hello world");
  EXPECT_EQ(r.Read(6, 3), "wor");
  EXPECT_EQ(r.Read(11, 3), "");  // at the end
  EXPECT_EQ(r.Read(12, 3), "");  // beyond it
}

TEST(OutputRing, WraparoundOverwritesTheOldest) {
  OutputRing r(16);
  r.Append(Stream(0, 10));
  r.Append(Stream(10, 10));  // 20 bytes through a 16-byte ring
  EXPECT_EQ(r.start(), 4);
  EXPECT_EQ(r.end(), 20);
  EXPECT_EQ(r.Read(4, 100), Stream(4, 16));
  // Reads across the wrap: the piece view stops at the storage's end, Read
  // continues from the front.
  std::string_view v = r.View(10, 100);
  EXPECT_EQ(v, Stream(10, 6));
  EXPECT_EQ(r.View(16, 100), Stream(16, 4));
  EXPECT_EQ(r.Read(10, 8), Stream(10, 8));
  EXPECT_EQ(r.Read(14, 4), Stream(14, 4));
}

TEST(OutputRing, ReadsOfOverwrittenOffsetsGiveNothing) {
  OutputRing r(8);
  r.Append(Stream(0, 30));
  EXPECT_EQ(r.start(), 22);
  EXPECT_EQ(r.end(), 30);
  EXPECT_EQ(r.Read(0, 8), "");
  EXPECT_EQ(r.Read(21, 8), "");
  EXPECT_TRUE(r.View(21, 8).empty());
  EXPECT_EQ(r.Read(22, 8), Stream(22, 8));
}

TEST(OutputRing, OneAppendLargerThanTheRing) {
  OutputRing r(8);
  r.Append(Stream(0, 3));
  r.Append(Stream(3, 100));
  EXPECT_EQ(r.end(), 103);
  EXPECT_EQ(r.start(), 95);
  EXPECT_EQ(r.Read(95, 100), Stream(95, 8));
  r.Append(Stream(103, 5));
  EXPECT_EQ(r.start(), 100);
  EXPECT_EQ(r.Read(100, 100), Stream(100, 8));
}

TEST(OutputRing, ManySmallAppendsMatchTheStream) {
  OutputRing r(1000);
  int64_t off = 0;
  for (int i = 0; i < 5000; ++i) {
    size_t n = static_cast<size_t>(i % 37);
    r.Append(Stream(off, n));
    off += static_cast<int64_t>(n);
    ASSERT_EQ(r.end(), off);
    ASSERT_EQ(r.start(), std::max<int64_t>(0, off - 1000));
  }
  EXPECT_EQ(r.Read(r.start(), 2000), Stream(r.start(), 1000));
  for (int64_t from = r.start(); from < r.end(); from += 97)
    EXPECT_EQ(r.Read(from, 50), Stream(from, static_cast<size_t>(std::min<int64_t>(50, r.end() - from))));
}

TEST(OutputRing, StorageGrowsOnlyAsNeeded) {
  OutputRing r(size_t{16} << 20);
  r.Append("x");
  EXPECT_LE(r.allocated(), 4096u);
  r.Append(std::string(10000, 'y'));
  EXPECT_GE(r.allocated(), 10001u);
  EXPECT_LE(r.allocated(), 20002u);
  EXPECT_EQ(r.Read(0, 2), "xy");
  r.Append(std::string(size_t{20} << 20, 'z'));
  EXPECT_EQ(r.allocated(), size_t{16} << 20);
  EXPECT_EQ(r.end() - r.start(), int64_t{16} << 20);
}

// Reading straight into the ring: offered only once the storage is all
// there; pieces split at the wrap; Commit appends what was written, as
// Append would have.
TEST(OutputRing, WritableRoomMatchesAppend) {
  OutputRing big(size_t{1} << 20);
  EXPECT_TRUE(big.Writable(100).first.empty()) << "no storage yet: read through a buffer";
  big.Append(Stream(0, 500));
  EXPECT_TRUE(big.Writable(100).first.empty()) << "storage not all allocated yet";

  OutputRing r(1000);
  r.Append(Stream(0, 500));
  r.Append(Stream(500, 700));  // storage full, wrapped: end 1200
  ASSERT_EQ(r.allocated(), 1000u);
  int64_t off = r.end();
  for (size_t n : {50u, 300u, 999u, 1000u, 7u, 650u}) {
    OutputRing::Room room = r.Writable(n);
    size_t total = room.first.size() + room.second.size();
    ASSERT_EQ(total, std::min<size_t>(n, 1000));
    std::string bytes = Stream(off, total);
    std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(room.first.size()),
              room.first.data());
    std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(room.first.size()), bytes.end(),
              room.second.data());
    r.Commit(total);
    off += static_cast<int64_t>(total);
    ASSERT_EQ(r.end(), off);
    ASSERT_EQ(r.start(), off - 1000);
    ASSERT_EQ(r.Read(r.start(), 1000), Stream(r.start(), 1000));
  }
  // A short read commits only what it wrote; the rest of the room is
  // still held output.
  int64_t start = r.start();
  OutputRing::Room room = r.Writable(200);
  std::string ten = Stream(off, 10);
  std::copy(ten.begin(), ten.end(), room.first.data());
  r.Commit(10);
  EXPECT_EQ(r.start(), start + 10);
  EXPECT_EQ(r.Read(r.start(), 1000), Stream(r.start(), 1000));
}

}  // namespace
}  // namespace skiff::agent
