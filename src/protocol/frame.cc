#include "protocol/frame.h"

#include <algorithm>
#include <cstring>

namespace skiff::proto {
namespace {

void PutU32(std::string& out, uint32_t v) {
  char b[4] = {char(v & 0xFF), char((v >> 8) & 0xFF), char((v >> 16) & 0xFF), char(v >> 24)};
  out.append(b, 4);
}

uint32_t GetU32(const char* p) {
  auto u = [&](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  return u(0) | (u(1) << 8) | (u(2) << 16) | (u(3) << 24);
}

}  // namespace

bool IsKnownType(Type t) {
  auto v = static_cast<uint8_t>(t);
  return v >= 1 && v <= 9;
}

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kHello:
      return "HELLO";
    case Type::kOpen:
      return "OPEN";
    case Type::kData:
      return "DATA";
    case Type::kEnd:
      return "END";
    case Type::kMeta:
      return "META";
    case Type::kResult:
      return "RESULT";
    case Type::kError:
      return "ERROR";
    case Type::kCredit:
      return "CREDIT";
    case Type::kCancel:
      return "CANCEL";
  }
  return "UNKNOWN";
}

void EncodeHeader(char* out, uint32_t len, uint32_t stream, Type type, uint8_t flags) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<char>((stream >> (8 * i)) & 0xFF);
  out[8] = static_cast<char>(type);
  out[9] = static_cast<char>(flags);
  out[10] = out[11] = '\0';
}

void AppendFrame(std::string& out, uint32_t stream, Type type, uint8_t flags, std::string_view payload) {
  PutU32(out, static_cast<uint32_t>(payload.size()));
  PutU32(out, stream);
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  out.push_back('\0');
  out.push_back('\0');
  out.append(payload);
}

std::string EncodeFrame(uint32_t stream, Type type, uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  AppendFrame(out, stream, type, flags, payload);
  return out;
}

std::string EncodeCredit(uint32_t stream, uint8_t channel, uint32_t bytes) {
  std::string p;
  PutU32(p, bytes);
  return EncodeFrame(stream, Type::kCredit, channel, p);
}

std::optional<uint32_t> DecodeCredit(std::string_view payload) {
  if (payload.size() != 4) return std::nullopt;
  return GetU32(payload.data());
}

void Decoder::Compact() {
  if (pos_ > 0 && pos_ == end_) {
    end_ = pos_ = 0;
  } else if (pos_ > (1u << 20)) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
}

bool Decoder::Directing() const { return direct_ && direct_got_ < direct_->payload.size(); }

std::span<char> Decoder::Room(size_t n) {
  if (Directing()) {
    size_t left = direct_->payload.size() - direct_got_;
    return {direct_->payload.data() + direct_got_, std::min(n, left)};
  }
  // A finished direct frame waits for Next(); what follows it is buffered.
  Compact();
  if (buf_.size() < end_ + n) buf_.resize(end_ + n);
  return {buf_.data() + end_, n};
}

void Decoder::Commit(size_t k) {
  if (Directing()) {
    direct_got_ = std::min(direct_->payload.size(), direct_got_ + k);
    return;
  }
  end_ = std::min(buf_.size(), end_ + k);
}

void Decoder::Feed(std::string_view bytes) {
  while (!bytes.empty()) {
    std::span<char> room = Room(bytes.size());
    std::memcpy(room.data(), bytes.data(), room.size());
    Commit(room.size());
    bytes.remove_prefix(room.size());
  }
}

Result<std::optional<Frame>> Decoder::Next() {
  if (direct_) {
    if (direct_got_ < direct_->payload.size()) return std::optional<Frame>{};
    std::optional<Frame> f = std::move(direct_);
    direct_.reset();
    direct_got_ = 0;
    return f;
  }
  if (end_ - pos_ < kHeaderSize) return std::optional<Frame>{};
  const char* h = buf_.data() + pos_;
  uint32_t len = GetU32(h);
  if (len > kMaxPayload)
    return Error(Code::kS300, "protocol: frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                                  std::to_string(kMaxPayload));
  if (h[10] != 0 || h[11] != 0) return Error(Code::kS300, "protocol: reserved header bits set");
  Frame f;
  f.stream = GetU32(h + 4);
  f.type = static_cast<Type>(static_cast<uint8_t>(h[8]));
  f.flags = static_cast<uint8_t>(h[9]);
  size_t have = end_ - pos_ - kHeaderSize;
  if (have < len) {
    if (len < kDirectPayload) return std::optional<Frame>{};
    // The rest of this payload is read straight into the frame's own buffer.
    f.payload.resize(len);
    std::memcpy(f.payload.data(), h + kHeaderSize, have);
    pos_ = end_;
    direct_ = std::move(f);
    direct_got_ = have;
    return std::optional<Frame>{};
  }
  f.payload.assign(h + kHeaderSize, len);
  pos_ += kHeaderSize + len;
  return std::optional<Frame>(std::move(f));
}

}  // namespace skiff::proto
