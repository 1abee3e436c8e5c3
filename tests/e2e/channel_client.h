// A raw RFC 6455 client for the data-channel endpoint /ws/channels/{id}
// (the engine's, or the engine double's), for tests: it shows exactly what
// the other side sends — the HTTP answer to a refused upgrade, each frame as
// it came (opcode, FIN, payload), a Close frame apart from the connection
// just ending. Blocking; a read gives up after kChannelClientWait. Plain TCP.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace skiff::e2e {

inline constexpr std::chrono::seconds kChannelClientWait{20};

class ChannelClient {
 public:
  struct Frame {
    int opcode = 0;  // 1 text, 2 binary, 8 close
    bool fin = true;
    std::string data;
  };
  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // names lowercased
    std::string body;
  };

  // Connects; `rcvbuf` > 0 shrinks the receive buffer first (a slow reader).
  explicit ChannelClient(uint16_t port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    timeval tv{std::chrono::duration_cast<std::chrono::seconds>(kChannelClientWait).count(), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect");
  }
  // Connects and asks for a WebSocket on `target`.
  ChannelClient(uint16_t port, const std::string& target, int rcvbuf = 0) : ChannelClient(port, rcvbuf) {
    response_ = Request(Upgrade(target));
  }
  ~ChannelClient() { Drop(); }
  ChannelClient(const ChannelClient&) = delete;
  ChannelClient& operator=(const ChannelClient&) = delete;

  static std::string Upgrade(const std::string& target) {
    return "GET " + target +
           " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  }

  // Sends a raw HTTP request and reads the response head (and its body).
  Response Request(const std::string& raw) {
    Response r;
    if (!SendAll(raw)) return r;
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) {
      auto c = Take(1);
      if (!c) return r;
      head += *c;
    }
    r.status = std::stoi(head.substr(9, 3));
    size_t pos = head.find("\r\n") + 2;
    while (pos < head.size() - 2) {
      size_t end = head.find("\r\n", pos);
      std::string line = head.substr(pos, end - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      pos = end + 2;
    }
    if (r.status != 101 && r.headers.count("content-length")) {
      auto body = Take(std::stoul(r.headers["content-length"]));
      if (body) r.body = *body;
    }
    return r;
  }
  const Response& response() const { return response_; }
  int status() const { return response_.status; }

  // One masked frame with FIN set; false once the connection is gone.
  bool Send(int opcode, std::string_view payload) {
    std::string f;
    f.push_back(static_cast<char>(0x80 | opcode));
    if (payload.size() < 126) {
      f.push_back(static_cast<char>(0x80 | payload.size()));
    } else if (payload.size() < 65536) {
      f.push_back(static_cast<char>(0x80 | 126));
      f.push_back(static_cast<char>(payload.size() >> 8));
      f.push_back(static_cast<char>(payload.size() & 0xff));
    } else {
      f.push_back(static_cast<char>(0x80 | 127));
      for (int i = 7; i >= 0; --i)
        f.push_back(static_cast<char>((uint64_t{payload.size()} >> (8 * i)) & 0xff));
    }
    const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
    f.append(reinterpret_cast<const char*>(mask), 4);
    for (size_t i = 0; i < payload.size(); ++i) f.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
    return SendAll(f);
  }
  bool Text(std::string_view s) { return Send(1, s); }
  bool Binary(std::string_view s) { return Send(2, s); }
  bool Close() { return Send(8, std::string("\x03\xe8", 2)); }  // 1000, normal

  // The next frame; nullopt when the connection ended (or kChannelClientWait passed).
  std::optional<Frame> Next() {
    auto h = Take(2);
    if (!h) return std::nullopt;
    Frame f;
    f.fin = ((*h)[0] & 0x80) != 0;
    f.opcode = (*h)[0] & 0x0f;
    uint64_t len = static_cast<unsigned char>((*h)[1]) & 0x7f;
    if ((static_cast<unsigned char>((*h)[1]) & 0x80) != 0) return std::nullopt;  // a server never masks
    if (len >= 126) {
      auto ext = Take(len == 126 ? 2 : 8);
      if (!ext) return std::nullopt;
      len = 0;
      for (char ch : *ext) len = (len << 8) | static_cast<unsigned char>(ch);
    }
    auto payload = Take(len);
    if (!payload) return std::nullopt;
    f.data = std::move(*payload);
    return f;
  }
  // The next frame must be a Close with no payload (the engine's
  // Close(None)), and then the connection ends.
  bool ClosedWithoutCode() {
    auto f = Next();
    return f && f->opcode == 8 && f->data.empty() && !Next();
  }
  // Whether something (a frame or the end) is ready to read within `timeout`.
  bool Readable(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
  }
  // Goes away without a Close frame.
  void Drop() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool SendAll(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  std::optional<std::string> Take(size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) return std::nullopt;
      got += static_cast<size_t>(r);
    }
    return out;
  }

  int fd_ = -1;
  Response response_;
};

// The refs engine::channels::create answered.
struct ChannelRefs {
  nlohmann::json writer, reader;
  // The endpoint's target for a ref (its own direction unless `dir` is given).
  static std::string Target(const nlohmann::json& ref, const std::string& dir = "") {
    return "/ws/channels/" + ref["channel_id"].get<std::string>() +
           "?key=" + ref["access_key"].get<std::string>() +
           "&dir=" + (dir.empty() ? ref["direction"].get<std::string>() : dir);
  }
  std::string writer_target() const { return Target(writer); }
  std::string reader_target() const { return Target(reader); }
};

}  // namespace skiff::e2e
