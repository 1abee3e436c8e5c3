// A deliberately tiny RFC 6455 client for tests (text/binary frames, close,
// ping), so the tests can also send what a well-behaved library would not.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <random>
#include <string>

#include "daemon_harness.h"

namespace skiff::e2e {

class WsClient {
 public:
  struct Msg {
    int opcode = 0;  // 1 text, 2 binary, 8 close, 9 ping, 10 pong (0: continuation, inside Recv only)
    std::string data;
    bool fin = true;
  };

  // Returns the HTTP status line's code (101 on success).
  int Open(Daemon& d, const std::string& path, const std::string& extra_headers = "") {
    fd_ = d.Connect();
    if (fd_ < 0) return -1;
    std::string req = "GET " + path +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\n" +
                      extra_headers + "\r\n";
    SendRaw(req);
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos) {
      if (::recv(fd_, &c, 1, 0) != 1) return -1;
      head.push_back(c);
    }
    if (head.size() < 12) return -1;
    int status = std::stoi(head.substr(9, 3));
    if (status != 101) {
      auto cl = head.find("Content-Length: ");
      if (cl != std::string::npos) {
        size_t len = std::stoul(head.substr(cl + 16));
        body_.resize(len);
        size_t got = 0;
        while (got < len) {
          ssize_t n = ::recv(fd_, body_.data() + got, len - got, 0);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
        }
      }
    }
    return status;
  }
  const std::string& error_body() const { return body_; }
  ~WsClient() {
    if (fd_ >= 0) ::close(fd_);
  }

  void SendRaw(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  // Sends one frame; `declared_len` lets a test claim a size it never sends.
  void Send(int opcode, const std::string& payload, std::optional<uint64_t> declared_len = {}) {
    std::string f;
    f.push_back(static_cast<char>(0x80 | opcode));
    uint64_t len = declared_len.value_or(payload.size());
    if (len < 126) {
      f.push_back(static_cast<char>(0x80 | len));
    } else if (len < 65536) {
      f.push_back(static_cast<char>(0x80 | 126));
      f.push_back(static_cast<char>(len >> 8));
      f.push_back(static_cast<char>(len & 0xff));
    } else {
      f.push_back(static_cast<char>(0x80 | 127));
      for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    }
    unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
    f.append(reinterpret_cast<char*>(mask), 4);
    for (size_t i = 0; i < payload.size(); ++i) {
      f.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
    }
    SendRaw(f);
  }
  void SendText(const std::string& s) { Send(1, s); }
  void SendJson(const json& j) { Send(1, j.dump()); }

  // Next message, its fragments joined (RFC 6455 5.4: a server may split a
  // message into frames), or nullopt on timeout / connection end.
  std::optional<Msg> Recv(int timeout_ms = 10000) {
    auto m = RecvFrame(timeout_ms);
    if (!m || m->fin || m->opcode >= 8) return m;
    while (true) {
      auto more = RecvFrame(timeout_ms);
      if (!more) return std::nullopt;
      if (more->opcode >= 8) continue;  // control frames may come between fragments
      m->data += more->data;
      if (more->fin) return m;
    }
  }
  // Next frame, or nullopt on timeout / connection end.
  std::optional<Msg> RecvFrame(int timeout_ms) {
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned char h[2];
    if (!ReadN(reinterpret_cast<char*>(h), 2)) return std::nullopt;
    Msg m;
    m.opcode = h[0] & 0x0f;
    m.fin = (h[0] & 0x80) != 0;
    uint64_t len = h[1] & 0x7f;
    if (len == 126) {
      unsigned char e[2];
      if (!ReadN(reinterpret_cast<char*>(e), 2)) return std::nullopt;
      len = (uint64_t{e[0]} << 8) | e[1];
    } else if (len == 127) {
      unsigned char e[8];
      if (!ReadN(reinterpret_cast<char*>(e), 8)) return std::nullopt;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | e[i];
    }
    m.data.resize(len);
    if (len && !ReadN(m.data.data(), len)) return std::nullopt;
    return m;
  }
  // Next text frame as JSON, skipping control frames.
  std::optional<json> RecvJson(int timeout_ms = 10000) {
    while (true) {
      auto m = Recv(timeout_ms);
      if (!m) return std::nullopt;
      if (m->opcode == 8) return std::nullopt;
      if (m->opcode == 1 || m->opcode == 2) return json::parse(m->data, nullptr, false);
    }
  }
  static int CloseCode(const Msg& m) {
    if (m.opcode != 8 || m.data.size() < 2) return -1;
    return (static_cast<unsigned char>(m.data[0]) << 8) | static_cast<unsigned char>(m.data[1]);
  }
  void Close() { Send(8, std::string("\x03\xe8", 2)); }

 private:
  bool ReadN(char* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::recv(fd_, p + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
  std::string body_;
};

}  // namespace skiff::e2e
