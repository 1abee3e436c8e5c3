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
  void AsyncOpen(const boost::asio::ip::tcp::resolver::results_type& endpoints, Done done);
  // One text message; one write at a time.
  void AsyncWrite(const std::string& text, Io done);
  // One whole message into `buffer`; one read at a time.
  void AsyncRead(boost::beast::flat_buffer& buffer, Io done);
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
