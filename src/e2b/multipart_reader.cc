// The multipart/form-data reader: the Content-Type's boundary, the
// delimiter scan over a pulled byte stream, and the part headers
// (Content-Disposition and its parameters, RFC 7578, RFC 5987).
#include "e2b/multipart_reader.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/text.h"

namespace skiff::e2b {
namespace {

Error Malformed(std::string_view detail) { return InvalidRequest("multipart body: " + std::string(detail)); }

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return Lower(x) == Lower(y); });
}

bool IsWsp(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsWsp(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsWsp(s.back())) s.remove_suffix(1);
  return s;
}

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar); }

// A header value of the form `type *(";" name "=" value)`, as both
// Content-Type and Content-Disposition are written.
struct HeaderValue {
  std::string type;                                         // lowercased
  std::vector<std::pair<std::string, std::string>> params;  // names lowercased, values unquoted
  const std::string* Find(std::string_view name) const {
    for (const auto& [n, v] : params) {
      if (n == name) return &v;
    }
    return nullptr;
  }
};

// Parses `value`, or says why not in *why. A quoted value takes `\"` and
// `\\` as escapes and keeps any other backslash; an unquoted one runs to the
// next ';' (trimmed), more lenient than a token so that an unquoted path
// still parses. Duplicate parameters are refused: which one counts would be
// a guess.
std::optional<HeaderValue> ParseHeaderValue(std::string_view value, std::string* why) {
  auto fail = [&](std::string detail) {
    *why = std::move(detail);
    return std::nullopt;
  };
  HeaderValue out;
  size_t semi = value.find(';');
  out.type = ToLower(Trim(value.substr(0, semi)));
  if (out.type.empty()) return fail("missing type");
  size_t i = semi == std::string_view::npos ? value.size() : semi + 1;
  while (i < value.size()) {
    while (i < value.size() && IsWsp(value[i])) ++i;
    if (i < value.size() && value[i] == ';') {  // an empty parameter: "a;;b", "a;"
      ++i;
      continue;
    }
    if (i == value.size()) break;
    size_t eq = value.find('=', i);
    if (eq == std::string_view::npos) return fail("parameter without '='");
    std::string_view name = Trim(value.substr(i, eq - i));
    if (!IsToken(name)) return fail("invalid parameter name '" + std::string(name) + "'");
    i = eq + 1;
    while (i < value.size() && IsWsp(value[i])) ++i;
    std::string v;
    if (i < value.size() && value[i] == '"') {
      ++i;
      bool closed = false;
      while (i < value.size()) {
        char c = value[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < value.size() && (value[i] == '"' || value[i] == '\\')) c = value[i++];
        v.push_back(c);
      }
      if (!closed) return fail("unterminated quoted value of '" + std::string(name) + "'");
      while (i < value.size() && IsWsp(value[i])) ++i;
      if (i < value.size() && value[i] != ';') {
        return fail("unexpected text after the quoted value of '" + std::string(name) + "'");
      }
    } else {
      size_t end = std::min(value.find(';', i), value.size());
      std::string_view raw = Trim(value.substr(i, end - i));
      if (raw.empty()) return fail("empty value of '" + std::string(name) + "'");
      if (raw.find('"') != std::string_view::npos) {
        return fail("stray quote in the value of '" + std::string(name) + "'");
      }
      v = std::string(raw);
      i = end;
    }
    std::string key = ToLower(name);
    if (out.Find(key)) return fail("duplicate parameter '" + key + "'");
    out.params.emplace_back(std::move(key), std::move(v));
    if (i < value.size()) ++i;  // the ';'
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// An RFC 5987 ext-value, `charset "'" [language] "'" percent-encoded`,
// decoded to UTF-8. Charsets: UTF-8 (must be valid) and ISO-8859-1.
std::optional<std::string> DecodeExtValue(std::string_view ext, std::string* why) {
  size_t q1 = ext.find('\'');
  size_t q2 = q1 == std::string_view::npos ? q1 : ext.find('\'', q1 + 1);
  if (q2 == std::string_view::npos) {
    *why = "not charset'language'value";
    return std::nullopt;
  }
  std::string_view charset = ext.substr(0, q1);
  bool latin1 = IEquals(charset, "iso-8859-1");
  if (!latin1 && !IEquals(charset, "utf-8")) {
    *why = "unsupported charset '" + std::string(charset) + "' (UTF-8 or ISO-8859-1)";
    return std::nullopt;
  }
  std::string_view encoded = ext.substr(q2 + 1);
  std::string bytes;
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] != '%') {
      bytes.push_back(encoded[i]);
      continue;
    }
    if (i + 2 >= encoded.size()) {
      *why = "truncated percent escape";
      return std::nullopt;
    }
    int h = HexValue(encoded[i + 1]), l = HexValue(encoded[i + 2]);
    if (h < 0 || l < 0) {
      *why = "invalid percent escape";
      return std::nullopt;
    }
    bytes.push_back(static_cast<char>(h * 16 + l));
    i += 2;
  }
  if (!latin1) {
    if (!IsValidUtf8(bytes)) {
      *why = "not valid UTF-8";
      return std::nullopt;
    }
    return bytes;
  }
  std::string utf8;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      utf8.push_back(ch);
    } else {
      utf8.push_back(static_cast<char>(0xC0 | (c >> 6)));
      utf8.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return utf8;
}

// Why `boundary` cannot be a boundary (RFC 2046: 1 to 70 characters, not
// ending in a space), or nullopt. Any printable ASCII is let through, a
// little more than RFC 2046's bchars, as long as it cannot break a line.
std::optional<std::string> BoundaryProblem(std::string_view boundary) {
  if (boundary.empty()) return "empty boundary";
  if (boundary.size() > 70) return "boundary longer than 70 characters";
  for (char c : boundary) {
    if (c < 0x20 || c > 0x7E) return "boundary with a control or non-ASCII character";
  }
  if (boundary.back() == ' ') return "boundary ending in a space";
  return std::nullopt;
}

}  // namespace

Result<std::string> MultipartBoundary(std::string_view content_type) {
  std::string why;
  std::optional<HeaderValue> ct = ParseHeaderValue(content_type, &why);
  if (!ct) return InvalidRequest("Content-Type: " + why);
  if (ct->type != "multipart/form-data") {
    return InvalidRequest("Content-Type: expected multipart/form-data, got '" + ct->type + "'");
  }
  const std::string* boundary = ct->Find("boundary");
  if (!boundary) return InvalidRequest("Content-Type: multipart/form-data without a boundary parameter");
  if (auto problem = BoundaryProblem(*boundary)) return InvalidRequest("Content-Type: " + *problem);
  return *boundary;
}

MultipartReader::MultipartReader(std::string boundary, ByteSource body)
    : boundary_(std::move(boundary)), delimiter_("\r\n--" + boundary_), source_(std::move(body)) {
  // The first delimiter may open the body without its CRLF: a CRLF put in
  // front makes it one like the others (and is not counted as preamble).
  buf_ = "\r\n";
}

Error MultipartReader::Fail(Error err) {
  failed_ = err;
  return err;
}

Status MultipartReader::Fill() {
  if (eof_) return OkStatus();
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  if (!source_) {
    eof_ = true;
    return OkStatus();
  }
  Result<std::string> chunk = source_();
  if (!chunk) return Fail(std::move(chunk).error());
  if (chunk->empty()) {
    eof_ = true;
  } else if (buf_.empty()) {
    buf_ = std::move(*chunk);
  } else {
    buf_.append(*chunk);
  }
  return OkStatus();
}

Status MultipartReader::Need(size_t n) {
  while (buf_.size() - pos_ < n && !eof_) SKIFF_RETURN_IF_ERROR(Fill());
  return OkStatus();
}

Result<std::string_view> MultipartReader::Scan() {
  const size_t d = delimiter_.size();
  for (;;) {
    std::string_view avail(buf_.data() + pos_, buf_.size() - pos_);
    // Looking no further than one chunk ahead bounds the work of a call
    // when the source hands over large chunks.
    std::string_view window = avail.substr(0, kMultipartMaxChunk + d - 1);
    size_t at = window.find(delimiter_);
    if (at == 0) {
      pos_ += d;
      state_ = State::kAfterDelimiter;
      return std::string_view();
    }
    if (at != std::string_view::npos) {
      pos_ += at;
      return avail.substr(0, at);
    }
    // No delimiter starts in the window: all of it is data, except, at the
    // end of what is buffered, the longest tail that is a start of one.
    size_t safe;
    if (window.size() < avail.size()) {
      safe = window.size() - (d - 1);
    } else {
      size_t held = 0;
      for (size_t k = std::min(d - 1, avail.size()); k > 0; --k) {
        if (avail[avail.size() - k] == '\r' &&
            avail.substr(avail.size() - k) == std::string_view(delimiter_).substr(0, k)) {
          held = k;
          break;
        }
      }
      safe = std::min(avail.size() - held, kMultipartMaxChunk);
    }
    if (safe > 0) {
      pos_ += safe;
      return avail.substr(0, safe);
    }
    if (eof_) {
      return Fail(Malformed(state_ == State::kStart ? "no opening boundary" : "missing closing boundary"));
    }
    SKIFF_RETURN_IF_ERROR(Fill());
  }
}

Status MultipartReader::SkipToDelimiter() {
  size_t skipped = 0;
  while (state_ != State::kAfterDelimiter) {
    SKIFF_ASSIGN_OR_RETURN(std::string_view bytes, Scan());
    skipped += bytes.size();
    // The CRLF put in front of the body is not preamble.
    if (state_ == State::kStart && skipped > kMultipartMaxPreamble + 2) {
      return Fail(
          Malformed("no opening boundary in the first " + std::to_string(kMultipartMaxPreamble) + " bytes"));
    }
  }
  return OkStatus();
}

Result<std::string> MultipartReader::ReadLine(size_t* budget) {
  size_t scanned = 0;  // bytes after pos_ known to hold no '\n'
  for (;;) {
    size_t nl = buf_.find('\n', pos_ + scanned);
    if (nl == std::string::npos) {
      scanned = buf_.size() - pos_;
      if (scanned > *budget) {
        return Fail(Malformed("the headers of part " + std::to_string(parts_) + " exceed " +
                              std::to_string(kMultipartMaxHeaderBytes) + " bytes"));
      }
      if (eof_) return Fail(Malformed("truncated in the headers of part " + std::to_string(parts_)));
      SKIFF_RETURN_IF_ERROR(Fill());
      continue;
    }
    size_t len = nl + 1 - pos_;
    if (len > *budget) {
      return Fail(Malformed("the headers of part " + std::to_string(parts_) + " exceed " +
                            std::to_string(kMultipartMaxHeaderBytes) + " bytes"));
    }
    if (len < 2 || buf_[nl - 1] != '\r') {
      return Fail(Malformed("part " + std::to_string(parts_) +
                            ": a header or boundary line ends with a bare LF (lines must end with CRLF)"));
    }
    *budget -= len;
    std::string line = buf_.substr(pos_, len - 2);
    pos_ = nl + 1;
    return line;
  }
}

Result<MultipartPart> MultipartReader::ReadHeaders() {
  const std::string part = "part " + std::to_string(parts_);
  size_t budget = kMultipartMaxHeaderBytes;
  // The rest of the boundary line: transport padding only.
  SKIFF_ASSIGN_OR_RETURN(std::string rest, ReadLine(&budget));
  if (!std::all_of(rest.begin(), rest.end(), IsWsp)) {
    return Fail(Malformed("unexpected bytes after the boundary that opens " + part));
  }
  std::vector<std::pair<std::string, std::string>> headers;  // lowercased name, value
  for (;;) {
    SKIFF_ASSIGN_OR_RETURN(std::string line, ReadLine(&budget));
    if (line.empty()) break;
    if (IsWsp(line[0])) {  // obs-fold: a continuation of the previous line
      if (headers.empty()) return Fail(Malformed(part + ": headers start with a continuation line"));
      headers.back().second += ' ';
      headers.back().second += Trim(line);
      continue;
    }
    size_t colon = line.find(':');
    std::string_view name = std::string_view(line).substr(0, colon);
    if (colon == std::string::npos || !IsToken(name)) {
      return Fail(Malformed(part + ": malformed header line"));
    }
    headers.emplace_back(ToLower(name), std::string(Trim(std::string_view(line).substr(colon + 1))));
  }

  const std::string* disposition = nullptr;
  const std::string* content_type = nullptr;
  for (const auto& [name, value] : headers) {
    const std::string** slot = name == "content-disposition" ? &disposition
                               : name == "content-type"      ? &content_type
                                                             : nullptr;
    if (!slot) continue;
    if (*slot) return Fail(Malformed(part + ": more than one " + (name + " header")));
    *slot = &value;
  }
  if (!disposition) return Fail(Malformed(part + " has no Content-Disposition header"));
  std::string why;
  std::optional<HeaderValue> cd = ParseHeaderValue(*disposition, &why);
  if (!cd) return Fail(Malformed(part + ": Content-Disposition: " + why));
  if (cd->type != "form-data") {
    return Fail(Malformed(part + ": Content-Disposition is '" + cd->type + "', not form-data"));
  }
  const std::string* name = cd->Find("name");
  if (!name) return Fail(Malformed(part + ": Content-Disposition has no name parameter"));

  MultipartPart out;
  out.name = *name;
  if (const std::string* ext = cd->Find("filename*")) {
    std::optional<std::string> decoded = DecodeExtValue(*ext, &why);
    if (!decoded) return Fail(Malformed(part + ": filename*: " + why));
    out.filename = std::move(*decoded);
  } else if (const std::string* filename = cd->Find("filename")) {
    out.filename = *filename;
  }
  if (content_type) out.content_type = *content_type;
  return out;
}

Result<std::optional<MultipartPart>> MultipartReader::NextPart() {
  if (failed_) return *failed_;
  if (state_ == State::kDone) return std::optional<MultipartPart>();
  if (state_ == State::kStart) {
    if (auto problem = BoundaryProblem(boundary_)) return Fail(Malformed(*problem));
  }
  if (state_ == State::kStart || state_ == State::kBody) SKIFF_RETURN_IF_ERROR(SkipToDelimiter());

  // After a delimiter: "--" closes the body, anything else opens a part.
  SKIFF_RETURN_IF_ERROR(Need(2));
  std::string_view next(buf_.data() + pos_, std::min<size_t>(2, buf_.size() - pos_));
  if (next == "--") {
    pos_ += 2;
    state_ = State::kDone;
    return std::optional<MultipartPart>();
  }
  if (next.size() < 2) return Fail(Malformed("missing closing boundary"));
  if (parts_ == kMultipartMaxParts) {
    return Fail(Malformed("more than " + std::to_string(kMultipartMaxParts) + " parts"));
  }
  ++parts_;
  SKIFF_ASSIGN_OR_RETURN(MultipartPart part, ReadHeaders());
  state_ = State::kBody;
  return std::optional<MultipartPart>(std::move(part));
}

Result<std::string> MultipartReader::Read() {
  if (failed_) return *failed_;
  if (state_ != State::kBody) return std::string();
  SKIFF_ASSIGN_OR_RETURN(std::string_view bytes, Scan());
  return std::string(bytes);
}

}  // namespace skiff::e2b
