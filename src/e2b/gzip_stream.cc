#include "e2b/gzip_stream.h"

#include <zlib.h>

#include <algorithm>
#include <memory>

namespace skiff::e2b {

namespace {

constexpr size_t kOutPiece = size_t{256} * 1024;
constexpr int kGzipWindow = 15 + 16;  // gzip framing, not zlib's

}  // namespace

ByteSource Gunzip(ByteSource compressed) {
  struct Inflater {
    z_stream z{};
    bool ready = false, ended = false;
    std::string in;  // compressed bytes not yet consumed
    Inflater() { ready = inflateInit2(&z, kGzipWindow) == Z_OK; }
    ~Inflater() {
      if (ready) inflateEnd(&z);
    }
  };
  auto st = std::make_shared<Inflater>();
  return [st, compressed = std::move(compressed)]() -> Result<std::string> {
    if (!st->ready) return Error(Code::kS300, "zlib: inflateInit2 failed");
    std::string out(kOutPiece, '\0');
    while (true) {
      if (st->ended) {
        // Nothing may follow the gzip stream.
        if (!st->in.empty()) return InvalidRequest("gzip body: bytes after the end of the stream");
        auto more = compressed();
        if (!more.ok()) return more.error();
        if (!more->empty()) return InvalidRequest("gzip body: bytes after the end of the stream");
        return std::string();
      }
      if (st->in.empty()) {
        auto more = compressed();
        if (!more.ok()) return more.error();
        if (more->empty()) return InvalidRequest("gzip body: truncated");
        st->in = std::move(*more);
      }
      st->z.next_in = reinterpret_cast<Bytef*>(st->in.data());
      st->z.avail_in = static_cast<uInt>(st->in.size());
      st->z.next_out = reinterpret_cast<Bytef*>(out.data());
      st->z.avail_out = static_cast<uInt>(out.size());
      int rc = inflate(&st->z, Z_NO_FLUSH);
      st->in.erase(0, st->in.size() - st->z.avail_in);
      size_t produced = out.size() - st->z.avail_out;
      if (rc == Z_STREAM_END) {
        st->ended = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return InvalidRequest(std::string("gzip body: corrupt (") + (st->z.msg ? st->z.msg : "zlib error") +
                              ")");
      }
      if (produced > 0) {
        out.resize(produced);
        return out;
      }
    }
  };
}

struct GzipWriter::State {
  z_stream z{};
  bool ready = false;
};

GzipWriter::GzipWriter() : s_(std::make_unique<State>()) {
  s_->ready = deflateInit2(&s_->z, Z_BEST_SPEED, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) == Z_OK;
}

GzipWriter::~GzipWriter() {
  if (s_->ready) deflateEnd(&s_->z);
}

namespace {

Result<std::string> Deflate(z_stream& z, std::string_view in, int flush) {
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[64 * 1024];
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    int rc = deflate(&z, flush);
    if (rc == Z_STREAM_ERROR) return Error(Code::kS300, "zlib: deflate failed");
    out.append(buf, sizeof buf - z.avail_out);
  } while (z.avail_out == 0 || z.avail_in > 0);
  return out;
}

}  // namespace

Result<std::string> GzipWriter::Write(std::string_view in) {
  if (!s_->ready) return Error(Code::kS300, "zlib: deflateInit2 failed");
  return Deflate(s_->z, in, Z_NO_FLUSH);
}

Result<std::string> GzipWriter::Finish() {
  if (!s_->ready) return Error(Code::kS300, "zlib: deflateInit2 failed");
  return Deflate(s_->z, {}, Z_FINISH);
}

}  // namespace skiff::e2b
