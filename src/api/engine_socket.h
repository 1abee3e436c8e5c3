// The WebSocket to the iii engine, plain (ws://, loopback only) or over TLS
// (wss://: the certificate must chain to the configured CA and name the
// engine's host), carrying the credential on the upgrade request. One
// socket per connection attempt; the worker link owns it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "api/engine_link_options.h"

namespace skiff::api {

class EngineSocket {
 public:
  using Done = std::function<void(const std::string& error)>;  // "" = success
  using Io = std::function<void(const std::string& error, size_t bytes)>;

  EngineSocket(boost::asio::io_context& ioc, const EngineLinkOptions& options, size_t max_message);
  ~EngineSocket();
  EngineSocket(const EngineSocket&) = delete;
  EngineSocket& operator=(const EngineSocket&) = delete;

  // TCP connect, TLS handshake with verification (wss://), WebSocket
  // upgrade with the credential; each step bounded by 10 s. The error
  // names the step and, for TLS, why the certificate was not trusted.
  // `target`: the path and query to upgrade on; "" = the URL's own path
  // (the worker link). Data channels use /ws/channels/{id}?… on the same
  // engine (engine_channel_socket.h).
  void AsyncOpen(const boost::asio::ip::tcp::resolver::results_type& endpoints, Done done,
                 std::string target = {});
  // One message, text unless `binary`; one write at a time.
  void AsyncWrite(const std::string& data, Io done, bool binary = false);
  // One whole message into `buffer`; one read at a time. A close frame from
  // the peer ends the read with the error "closed".
  void AsyncRead(boost::beast::flat_buffer& buffer, Io done);
  // Whether the message the last read returned was binary.
  bool got_binary() const;
  // The HTTP status of the server's answer to the upgrade (101 when it was
  // accepted); meaningful once AsyncOpen has failed or succeeded.
  unsigned upgrade_status() const;
  // Sends a normal close frame (and waits for the peer's).
  void AsyncClose(Done done);
  void AsyncPing();
  // Called for every ping/pong/close frame received.
  void OnControlFrame(std::function<void()> seen);
  // Closes the TCP connection at once; pending operations end with an error.
  void Close();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with pending handlers
};

}  // namespace skiff::api
