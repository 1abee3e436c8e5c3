// The E2B upload's multipart/form-data reader: the Content-Type's boundary;
// parts, their headers and bytes, in order, over the same body fed in every
// chunking (1, 2, 3, 7, 64, 4096 bytes, random, whole); delimiter
// look-alikes as data; preamble, padding, epilogue; every refusal (LF-only,
// truncation, limits, bad headers) as S001; ByteSource errors passed
// through; skipping an unread part; a 50 MiB part in bounded memory.
#include "e2b/multipart_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace skiff::e2b {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kBoundary = "----skiffBoundary7MA4YWxkTrZu0gW";

// A ByteSource handing out `body` in pieces of the sizes `next_size` picks.
ByteSource Pieces(std::string body, std::function<size_t()> next_size) {
  auto rest = std::make_shared<std::string>(std::move(body));
  auto at = std::make_shared<size_t>(0);
  return [rest, at, next_size]() -> Result<std::string> {
    size_t n = std::min(next_size(), rest->size() - *at);
    std::string piece = rest->substr(*at, n);
    *at += n;
    return piece;
  };
}

ByteSource Chunked(std::string body, size_t size) {
  return Pieces(std::move(body), [size] { return size; });
}

ByteSource RandomChunks(std::string body, unsigned seed) {
  auto rng = std::make_shared<std::mt19937>(seed);
  return Pieces(std::move(body), [rng] { return std::uniform_int_distribution<size_t>(1, 97)(*rng); });
}

// Every chunking the body is fed in, by name.
std::vector<std::pair<std::string, ByteSource>> Chunkings(const std::string& body) {
  std::vector<std::pair<std::string, ByteSource>> out;
  for (size_t size : {1, 2, 3, 7, 64, 4096})
    out.emplace_back("chunks of " + std::to_string(size), Chunked(body, size));
  for (unsigned seed = 1; seed <= 16; ++seed) {
    out.emplace_back("random chunks, seed " + std::to_string(seed), RandomChunks(body, seed));
  }
  out.emplace_back("one chunk", Chunked(body, body.size() + 1));
  return out;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// One part as a client writes it, its opening boundary line included; the
// CRLF after the data belongs to the next delimiter.
std::string Part(std::string_view name, std::optional<std::string> filename, std::string_view data,
                 std::string_view content_type = "application/octet-stream") {
  std::string out = "--" + std::string(kBoundary) + "\r\nContent-Disposition: form-data; name=" + Quote(name);
  if (filename) out += "; filename=" + Quote(*filename);
  out += "\r\n";
  if (!content_type.empty()) out += "Content-Type: " + std::string(content_type) + "\r\n";
  return out + "\r\n" + std::string(data) + "\r\n";
}

// A part with the given raw header lines (each without its CRLF).
std::string RawPart(const std::vector<std::string>& headers, std::string_view data) {
  std::string out = "--" + std::string(kBoundary) + "\r\n";
  for (const auto& h : headers) out += h + "\r\n";
  return out + "\r\n" + std::string(data) + "\r\n";
}

std::string Close() { return "--" + std::string(kBoundary) + "--\r\n"; }

struct Parsed {
  std::string name;
  std::optional<std::string> filename;
  std::string content_type;
  std::string data;
  bool operator==(const Parsed&) const = default;
};

void PrintTo(const Parsed& p, std::ostream* os) {
  *os << "{name=" << p.name << " filename=" << (p.filename ? "\"" + *p.filename + "\"" : "none")
      << " content_type=" << p.content_type << " data=" << p.data.size() << " bytes}";
}

// Every part and its bytes, NextPart then Read until "", to the end.
Result<std::vector<Parsed>> ReadAll(MultipartReader& reader) {
  std::vector<Parsed> out;
  for (;;) {
    SKIFF_ASSIGN_OR_RETURN(std::optional<MultipartPart> part, reader.NextPart());
    if (!part) return out;
    Parsed p{part->name, part->filename, part->content_type, ""};
    for (;;) {
      SKIFF_ASSIGN_OR_RETURN(std::string chunk, reader.Read());
      if (chunk.empty()) break;
      p.data += chunk;
    }
    out.push_back(std::move(p));
  }
}

// The body parses to `want` in every chunking.
void ExpectParts(const std::string& body, const std::vector<Parsed>& want) {
  for (auto& [label, source] : Chunkings(body)) {
    SCOPED_TRACE(label);
    MultipartReader reader(std::string(kBoundary), source);
    Result<std::vector<Parsed>> got = ReadAll(reader);
    ASSERT_TRUE(got) << got.error().ToString();
    EXPECT_EQ(*got, want);
    // Once closed, it stays closed.
    Result<std::optional<MultipartPart>> again = reader.NextPart();
    ASSERT_TRUE(again);
    EXPECT_FALSE(*again);
    Result<std::string> more = reader.Read();
    ASSERT_TRUE(more);
    EXPECT_EQ(*more, "");
  }
}

// The body is refused with S001 and a message holding `what`, in every chunking.
void ExpectRefused(const std::string& body, std::string_view what) {
  for (auto& [label, source] : Chunkings(body)) {
    SCOPED_TRACE(label);
    MultipartReader reader(std::string(kBoundary), source);
    Result<std::vector<Parsed>> got = ReadAll(reader);
    ASSERT_FALSE(got) << "parsed " << got->size() << " parts";
    EXPECT_EQ(got.error().code(), Code::kS001);
    EXPECT_THAT(got.error().message(), HasSubstr("multipart body: "));
    EXPECT_THAT(got.error().message(), HasSubstr(what));
    // The error is the reader's last word.
    Result<std::optional<MultipartPart>> again = reader.NextPart();
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().message(), got.error().message());
  }
}

TEST(MultipartBoundaryTest, QuotedOrNot) {
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; boundary=abc123"), "abc123");
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; boundary=\"a b:c\""), "a b:c");
  EXPECT_EQ(*MultipartBoundary("Multipart/Form-Data;charset=utf-8;BOUNDARY=----WebKitFormBoundaryX"),
            "----WebKitFormBoundaryX");
  EXPECT_EQ(*MultipartBoundary("multipart/form-data ; boundary = \"q\\\"x\" ; x=y"), "q\"x");
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; boundary=" + std::string(70, 'b')),
            std::string(70, 'b'));
}

TEST(MultipartBoundaryTest, Refused) {
  auto refused = [](std::string_view ct, std::string_view what) {
    Result<std::string> b = MultipartBoundary(ct);
    ASSERT_FALSE(b) << ct << " gave " << *b;
    EXPECT_EQ(b.error().code(), Code::kS001);
    EXPECT_THAT(b.error().message(), HasSubstr(what)) << ct;
  };
  refused("application/json", "expected multipart/form-data, got 'application/json'");
  refused("multipart/mixed; boundary=abc", "expected multipart/form-data");
  refused("multipart/form-data", "without a boundary");
  refused("multipart/form-data; charset=utf-8", "without a boundary");
  refused("multipart/form-data; boundary=\"\"", "empty boundary");
  refused("multipart/form-data; boundary=" + std::string(71, 'b'), "longer than 70");
  refused("multipart/form-data; boundary=\"ab \"", "ending in a space");
  refused("multipart/form-data; boundary=\"a\rb\"", "control");
  refused("multipart/form-data; boundary=\"abc", "unterminated");
  refused("multipart/form-data; boundary=a; boundary=b", "duplicate parameter 'boundary'");
  refused("", "missing type");
}

TEST(MultipartReaderTest, SinglePart) {
  ExpectParts(Part("file", "hello.txt", "Hello, world!\n") + Close(),
              {{"file", "hello.txt", "application/octet-stream", "Hello, world!\n"}});
}

TEST(MultipartReaderTest, SeveralPartsInOrder) {
  std::string body = Part("file", "b.txt", "second name, first part") + Part("file", "a.txt", "two") +
                     Part("file", "c/d.bin", std::string(10000, 'x'), "") + Part("other", "z", "four") +
                     Close();
  ExpectParts(body, {{"file", "b.txt", "application/octet-stream", "second name, first part"},
                     {"file", "a.txt", "application/octet-stream", "two"},
                     {"file", "c/d.bin", "", std::string(10000, 'x')},
                     {"other", "z", "application/octet-stream", "four"}});
}

TEST(MultipartReaderTest, EmptyParts) {
  ExpectParts(Part("file", "empty", "") + Part("file", "also-empty", "", "") + Close(),
              {{"file", "empty", "application/octet-stream", ""}, {"file", "also-empty", "", ""}});
}

TEST(MultipartReaderTest, NoPartsAtAll) { ExpectParts(Close(), {}); }

TEST(MultipartReaderTest, PartWithoutFilename) {
  ExpectParts(Part("path", std::nullopt, "/home/user", "") + Part("file", "", "x") + Close(),
              {{"path", std::nullopt, "", "/home/user"}, {"file", "", "application/octet-stream", "x"}});
}

TEST(MultipartReaderTest, FilenamesAsSent) {
  const std::string cd = "Content-Disposition: form-data; name=\"file\"; ";
  std::string body =
      Part("file", "dir/sub/a.txt", "1") + Part("file", "/home/user/abs.txt", "2") +
      Part("file", "../up/./x", "3") + Part("file", "say \"hi\" \\ bye", "4") +
      RawPart({cd + "filename=\"C:\\Users\\me\\x.txt\""}, "5") +
      RawPart({cd + "filename=\"fallback.txt\"; filename*=UTF-8''%2Fdata%2F%E2%82%AC%20rate.txt"}, "6") +
      RawPart({cd + "filename*=utf-8'en'caf%C3%A9; filename=\"cafe\""}, "7") +
      RawPart({cd + "filename*=ISO-8859-1''caf%E9"}, "8") +
      RawPart({"content-DISPOSITION:Form-Data;NAME=up;FileName=/tmp/token.txt", "CONTENT-type:  text/plain "},
              "9") +
      RawPart({"X-Other: ignored", cd + "filename=\"a;b=c\"", "Content-Transfer-Encoding: binary"}, "10") +
      RawPart({"Content-Disposition: form-data;", " name=\"folded\";", "\tfilename=\"f\""}, "11") + Close();
  ExpectParts(body, {{"file", "dir/sub/a.txt", "application/octet-stream", "1"},
                     {"file", "/home/user/abs.txt", "application/octet-stream", "2"},
                     {"file", "../up/./x", "application/octet-stream", "3"},
                     {"file", "say \"hi\" \\ bye", "application/octet-stream", "4"},
                     {"file", "C:\\Users\\me\\x.txt", "", "5"},
                     {"file", "/data/\xE2\x82\xAC rate.txt", "", "6"},
                     {"file", "caf\xC3\xA9", "", "7"},
                     {"file", "caf\xC3\xA9", "", "8"},
                     {"up", "/tmp/token.txt", "text/plain", "9"},
                     {"file", "a;b=c", "", "10"},
                     {"folded", "f", "", "11"}});
}

TEST(MultipartReaderTest, BinaryDataAndDelimiterLookAlikes) {
  const std::string b(kBoundary);
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  const std::vector<std::string> datas = {
      all_bytes + all_bytes,
      "\r\n--",
      "a\r\n--" + b.substr(0, b.size() - 1),           // the delimiter minus its last byte, at the end
      "\r\n--" + b.substr(0, b.size() - 1) + "X\r\n",  // ... with another last byte
      "\r\n-" + b + "\r\n",                            // one dash short
      "--" + b + "\r\nnot at a line start",
      "\r\r\n--" + b.substr(0, 5) + "\r\n\r\n--" + b.substr(0, 20) + "\n--" + b + "\r",
      "\n--" + b + "\n",  // LF-only look-alike: data
      std::string(5000, '\r') + "\r\n--" + b.substr(0, 10),
      "ends with CR\r",
      "ends with CRLF\r\n",
      "ends with CRLF dash\r\n-",
  };
  std::string body;
  std::vector<Parsed> want;
  for (size_t i = 0; i < datas.size(); ++i) {
    body += Part("file", "f" + std::to_string(i), datas[i]);
    want.push_back({"file", "f" + std::to_string(i), "application/octet-stream", datas[i]});
  }
  ExpectParts(body + Close(), want);
}

TEST(MultipartReaderTest, PreamblePaddingAndEpilogue) {
  const std::string b(kBoundary);
  std::string body =
      "This is the preamble.\r\n--not-the-boundary\r\n--" + b.substr(0, b.size() - 1) + "\r\n" + "--" + b +
      " \t \r\nContent-Disposition: form-data; name=\"file\"; filename=\"p\"\r\n\r\none\r\n" + "--" + b +
      "\t\r\nContent-Disposition: form-data; name=\"file\"; filename=\"q\"\r\n\r\ntwo\r\n" + "--" + b +
      "--  \r\nThe epilogue: --" + b + "\r\nContent-Disposition: form-data\r\n\r\nnot a part";
  ExpectParts(body, {{"file", "p", "", "one"}, {"file", "q", "", "two"}});
  // The opening delimiter with its CRLF, and a close with nothing after it.
  ExpectParts("\r\n" + Part("file", "x", "y") + "--" + b + "--",
              {{"file", "x", "application/octet-stream", "y"}});
}

TEST(MultipartReaderTest, NothingIsReadAfterTheClose) {
  // A source that fails when asked for more than the body up to its close.
  std::string body = Part("file", "a", "data") + "--" + std::string(kBoundary) + "--";
  for (size_t size : {1, 3, 4096}) {
    SCOPED_TRACE(size);
    ByteSource inner = Chunked(body, size);
    auto sent = std::make_shared<size_t>(0);
    ByteSource source = [inner, sent, total = body.size()]() -> Result<std::string> {
      if (*sent == total) return Error(Code::kS300, "read past the closing delimiter");
      Result<std::string> chunk = inner();
      *sent += chunk->size();
      return chunk;
    };
    MultipartReader reader(std::string(kBoundary), source);
    Result<std::vector<Parsed>> got = ReadAll(reader);
    ASSERT_TRUE(got) << got.error().ToString();
    EXPECT_EQ(got->size(), 1u);
  }
}

TEST(MultipartReaderTest, LfOnlyLineEndingsRefused) {
  const std::string b(kBoundary);
  ExpectRefused("--" + b + "\nContent-Disposition: form-data; name=\"file\"\n\ndata\n--" + b + "--\n",
                "bare LF");
  // CRLF boundary lines, LF-only headers.
  ExpectRefused("--" + b + "\r\nContent-Disposition: form-data; name=\"file\"\n\r\ndata\r\n--" + b + "--\r\n",
                "bare LF");
}

TEST(MultipartReaderTest, TruncatedBodiesRefused) {
  const std::string b(kBoundary);
  std::string whole = Part("file", "a", "some data") + Close();
  ExpectRefused("", "no opening boundary");
  ExpectRefused("just a preamble\r\n", "no opening boundary");
  ExpectRefused("--" + b, "missing closing boundary");
  ExpectRefused("--" + b + "\r\nContent-Disposition: form-data; name=\"file\"\r\n",
                "truncated in the headers of part 1");
  ExpectRefused(Part("file", "a", "some data"), "missing closing boundary");
  ExpectRefused(Part("file", "a", "some data") + "--" + b + "-", "missing closing boundary");
  ExpectRefused(whole.substr(0, whole.size() - 10), "missing closing boundary");
  ExpectRefused(std::string(kMultipartMaxPreamble + 100, 'p') + whole,
                "no opening boundary in the first 65536 bytes");
}

TEST(MultipartReaderTest, TruncatedPartYieldsItsBytesThenTheError) {
  MultipartReader reader(std::string(kBoundary), Chunked(Part("file", "a", "0123456789") + "trailing", 4));
  Result<std::optional<MultipartPart>> part = reader.NextPart();
  ASSERT_TRUE(part && *part);
  std::string data;
  Result<std::string> chunk = reader.Read();
  for (; chunk && !chunk->empty(); chunk = reader.Read()) data += *chunk;
  ASSERT_FALSE(chunk);
  EXPECT_EQ(chunk.error().code(), Code::kS001);
  EXPECT_EQ(chunk.error().message(), "invalid request: multipart body: missing closing boundary");
  EXPECT_EQ(data, "0123456789\r\ntrailing");
}

TEST(MultipartReaderTest, MalformedPartsRefused) {
  const std::string b(kBoundary);
  const std::string cd = "Content-Disposition: form-data; name=\"file\"";
  ExpectRefused(Part("file", "a", "x\r\n--" + b + "Y") + Close(), "unexpected bytes after the boundary");
  ExpectRefused("--" + b + "junk\r\n" + cd + "\r\n\r\nx\r\n" + Close(),
                "unexpected bytes after the boundary");
  // A line that starts with the whole delimiter is one (RFC 2046 5.1.1), in the preamble too.
  ExpectRefused("preamble\r\n--" + b + "X\r\n" + Part("file", "a", "x") + Close(),
                "unexpected bytes after the boundary that opens part 1");
  ExpectRefused(RawPart({"Content-Type: text/plain"}, "x") + Close(), "part 1 has no Content-Disposition");
  ExpectRefused(RawPart({cd, cd}, "x") + Close(), "more than one content-disposition");
  ExpectRefused(RawPart({"Content-Disposition: attachment; name=\"file\""}, "x") + Close(), "not form-data");
  ExpectRefused(RawPart({"Content-Disposition: form-data; filename=\"a\""}, "x") + Close(),
                "no name parameter");
  ExpectRefused(RawPart({cd + "; filename=\"a"}, "x") + Close(), "unterminated quoted value");
  ExpectRefused(RawPart({cd + "; filename=\"a\"; filename=\"b\""}, "x") + Close(),
                "duplicate parameter 'filename'");
  ExpectRefused(RawPart({cd + "; filename*=UTF-8''%zz"}, "x") + Close(), "invalid percent escape");
  ExpectRefused(RawPart({cd + "; filename*=UTF-8''a%2"}, "x") + Close(), "truncated percent escape");
  ExpectRefused(RawPart({cd + "; filename*=UTF-8''%C3%28"}, "x") + Close(), "not valid UTF-8");
  ExpectRefused(RawPart({cd + "; filename*=KOI8-R''x"}, "x") + Close(), "unsupported charset 'KOI8-R'");
  ExpectRefused(RawPart({cd + "; filename*=plain"}, "x") + Close(), "not charset'language'value");
  ExpectRefused(RawPart({"no colon here"}, "x") + Close(), "part 1: malformed header line");
  ExpectRefused(RawPart({"Bad Name: x", cd}, "x") + Close(), "part 1: malformed header line");
  ExpectRefused(RawPart({" folded first", cd}, "x") + Close(), "continuation line");
  ExpectRefused(Part("file", "a", "x") + RawPart({cd + "; filename=a\"b"}, "x") + Close(), "part 2: ");
}

TEST(MultipartReaderTest, InvalidBoundaryRefused) {
  for (std::string boundary : {std::string(), std::string("a\r\nb"), std::string(71, 'b')}) {
    MultipartReader reader(boundary, Chunked("--" + boundary + "--\r\n", 7));
    Result<std::optional<MultipartPart>> part = reader.NextPart();
    ASSERT_FALSE(part);
    EXPECT_EQ(part.error().code(), Code::kS001);
    EXPECT_THAT(part.error().message(), HasSubstr("boundary"));
  }
}

TEST(MultipartReaderTest, HeaderBlockTooLarge) {
  const std::string cd = "Content-Disposition: form-data; name=\"file\"";
  ExpectRefused(RawPart({cd, "X-Pad: " + std::string(kMultipartMaxHeaderBytes, 'a')}, "x") + Close(),
                "the headers of part 1 exceed 16384 bytes");
  // Many lines, each small, that add up.
  std::vector<std::string> many(400, "X-Pad: " + std::string(40, 'a'));
  many.push_back(cd);
  ExpectRefused(Part("file", "a", "x") + RawPart(many, "x") + Close(),
                "the headers of part 2 exceed 16384 bytes");
  // A header line that never ends is refused once past the limit, not read to the end of the body.
  auto pulled = std::make_shared<size_t>(0);
  ByteSource endless = [pulled]() -> Result<std::string> {
    std::string chunk = *pulled == 0 ? "--" + std::string(kBoundary) + "\r\nX-Pad: " : std::string(1000, 'a');
    *pulled += chunk.size();
    return chunk;
  };
  MultipartReader reader(std::string(kBoundary), endless);
  Result<std::optional<MultipartPart>> part = reader.NextPart();
  ASSERT_FALSE(part);
  EXPECT_THAT(part.error().message(), HasSubstr("exceed 16384 bytes"));
  EXPECT_LE(*pulled, kMultipartMaxHeaderBytes + 2000);
  // At the limit exactly: accepted.
  size_t pad = kMultipartMaxHeaderBytes - (cd.size() + 2) - (std::string("X-Pad: ").size() + 2) - 2 - 2;
  ExpectParts(RawPart({cd, "X-Pad: " + std::string(pad, 'a')}, "x") + Close(),
              {{"file", std::nullopt, "", "x"}});
  ExpectRefused(RawPart({cd, "X-Pad: " + std::string(pad + 1, 'a')}, "x") + Close(), "exceed 16384 bytes");
}

TEST(MultipartReaderTest, TooManyParts) {
  std::string body;
  std::vector<Parsed> want;
  for (size_t i = 0; i < kMultipartMaxParts; ++i) {
    body += Part("file", std::to_string(i), std::to_string(i), "");
    want.push_back({"file", std::to_string(i), "", std::to_string(i)});
  }
  {
    MultipartReader reader(std::string(kBoundary), Chunked(body + Close(), 4096));
    Result<std::vector<Parsed>> got = ReadAll(reader);
    ASSERT_TRUE(got) << got.error().ToString();
    EXPECT_EQ(*got, want);
  }
  MultipartReader reader(std::string(kBoundary),
                         Chunked(body + Part("file", "one-too-many", "x") + Close(), 4096));
  for (size_t i = 0; i < kMultipartMaxParts; ++i) {
    Result<std::optional<MultipartPart>> part = reader.NextPart();
    ASSERT_TRUE(part && *part) << i;
  }
  Result<std::optional<MultipartPart>> part = reader.NextPart();
  ASSERT_FALSE(part);
  EXPECT_EQ(part.error().code(), Code::kS001);
  EXPECT_EQ(part.error().message(), "invalid request: multipart body: more than 1000 parts");
}

TEST(MultipartReaderTest, NextPartSkipsTheRestOfAPart) {
  std::string big(3 * kMultipartMaxChunk + 12345, 'z');
  big += "\r\n--" + std::string(kBoundary).substr(0, 8);
  std::string body = Part("file", "a", big) + Part("file", "b", "bee") + Part("file", "c", big) +
                     Part("file", "d", "dee") + Close();
  for (auto& [label, source] : Chunkings(body)) {
    SCOPED_TRACE(label);
    MultipartReader reader(std::string(kBoundary), source);
    // a: one Read, then on; b: read whole; c: not read at all; d: read whole.
    Result<std::optional<MultipartPart>> part = reader.NextPart();
    ASSERT_TRUE(part && *part);
    EXPECT_EQ((*part)->filename, "a");
    Result<std::string> first = reader.Read();
    ASSERT_TRUE(first);
    EXPECT_FALSE(first->empty());
    EXPECT_EQ(*first, big.substr(0, first->size()));
    for (std::string name : {"b", "c", "d"}) {
      part = reader.NextPart();
      ASSERT_TRUE(part && *part) << name;
      EXPECT_EQ((*part)->filename, name);
      if (name == "c") continue;
      ByteSource part_bytes = [&reader] { return reader.Read(); };  // a ByteSource for one part
      std::string data;
      for (Result<std::string> c = part_bytes(); c && !c->empty(); c = part_bytes()) data += *c;
      EXPECT_EQ(data, name + "ee");
    }
    part = reader.NextPart();
    ASSERT_TRUE(part);
    EXPECT_FALSE(*part);
  }
}

TEST(MultipartReaderTest, ReadOutsideAPartIsEmpty) {
  MultipartReader reader(std::string(kBoundary), Chunked(Part("file", "a", "x") + Close(), 5));
  Result<std::string> before = reader.Read();
  ASSERT_TRUE(before);
  EXPECT_EQ(*before, "");
  ASSERT_TRUE(reader.NextPart());
  EXPECT_EQ(*reader.Read(), "x");
  EXPECT_EQ(*reader.Read(), "");
  EXPECT_EQ(*reader.Read(), "");  // still the end of the part
  Result<std::optional<MultipartPart>> end = reader.NextPart();
  ASSERT_TRUE(end);
  EXPECT_FALSE(*end);
  EXPECT_EQ(*reader.Read(), "");
}

TEST(MultipartReaderTest, ByteSourceErrorPassedThrough) {
  std::string body = Part("file", "a", std::string(1000, 'x')) + Close();
  for (size_t fail_at : {0, 1, 3, 10}) {  // the call that fails: before, in headers, in the body
    SCOPED_TRACE(fail_at);
    ByteSource inner = Chunked(body, 40);
    auto calls = std::make_shared<size_t>(0);
    ByteSource source = [inner, calls, fail_at]() -> Result<std::string> {
      if ((*calls)++ == fail_at) return Error(Code::kS218, "upload stalled");
      return inner();
    };
    MultipartReader reader(std::string(kBoundary), source);
    Result<std::vector<Parsed>> got = ReadAll(reader);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), Code::kS218);
    EXPECT_EQ(got.error().message(), "upload stalled");
    Result<std::string> again = reader.Read();
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code(), Code::kS218);
  }
}

// In use by the heap now (glibc's count; 0 where there is none, as under ASan).
size_t HeapInUse() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return mallinfo2().uordblks;
#else
  return 0;
#endif
}

// A 50 MiB part, generated as it is pulled, read through: every Read
// returns at most kMultipartMaxChunk bytes, the reader never holds more
// than one source chunk and a delimiter's worth beyond what it returned,
// and the heap does not grow with the part.
TEST(MultipartReaderTest, FiftyMiBPartInBoundedMemory) {
  const size_t kPart = 50 << 20;
  // The data repeats a pattern of delimiter look-alikes, its length prime
  // so that they fall across every chunk boundary.
  std::string pattern;
  while (pattern.size() < 4000) {
    pattern += "data\r\n--" + std::string(kBoundary).substr(0, pattern.size() % kBoundary.size()) + "\r\n-\r";
  }
  pattern.resize(4099);
  const std::string head = "--" + std::string(kBoundary) +
                           "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/big.bin\"\r\n\r\n";
  const std::string tail = "\r\n" + Close();
  for (size_t source_chunk : {size_t{64} << 10, size_t{1} << 20}) {
    SCOPED_TRACE(source_chunk);
    size_t sent = 0;  // of the part's data
    bool head_sent = false, tail_sent = false;
    size_t pulled = 0;
    ByteSource source = [&]() -> Result<std::string> {
      std::string chunk;
      if (!head_sent) {
        head_sent = true;
        chunk = head;
      } else if (sent < kPart) {
        size_t n = std::min(source_chunk, kPart - sent);
        chunk.reserve(n);
        for (size_t i = sent; i < sent + n;) {
          size_t off = i % pattern.size(), take = std::min(pattern.size() - off, sent + n - i);
          chunk.append(pattern, off, take);
          i += take;
        }
        sent += n;
      } else if (!tail_sent) {
        tail_sent = true;
        chunk = tail;
      }
      pulled += chunk.size();
      return chunk;
    };
    MultipartReader reader(std::string(kBoundary), source);
    Result<std::optional<MultipartPart>> part = reader.NextPart();
    ASSERT_TRUE(part && *part);
    EXPECT_EQ((*part)->filename, "/big.bin");
    const size_t heap_before = HeapInUse();
    size_t got = 0, largest = 0, most_held = 0, heap_growth = 0, mismatches = 0;
    for (;;) {
      Result<std::string> chunk = reader.Read();
      ASSERT_TRUE(chunk) << chunk.error().ToString();
      if (chunk->empty()) break;
      for (size_t i = 0; i < chunk->size(); ++i) {
        if ((*chunk)[i] != pattern[(got + i) % pattern.size()]) ++mismatches;
      }
      got += chunk->size();
      largest = std::max(largest, chunk->size());
      most_held = std::max(most_held, pulled - head.size() - got);
      heap_growth = std::max(heap_growth, HeapInUse() - std::min(HeapInUse(), heap_before));
    }
    EXPECT_EQ(got, kPart);
    EXPECT_EQ(mismatches, 0u);
    EXPECT_LE(largest, kMultipartMaxChunk);
    EXPECT_GE(largest, std::min(source_chunk, kMultipartMaxChunk) / 2);  // not dribbled out
    EXPECT_LE(most_held, source_chunk + kBoundary.size() + 4);
    EXPECT_LE(heap_growth, 4 * source_chunk + (1 << 20));
    Result<std::optional<MultipartPart>> end = reader.NextPart();
    ASSERT_TRUE(end);
    EXPECT_FALSE(*end);
  }
}

}  // namespace
}  // namespace skiff::e2b
