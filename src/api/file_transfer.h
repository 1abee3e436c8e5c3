// The per-request state of a /v1/sandboxes/{id}/files transfer on one HTTP
// connection: a download (GET, the file's bytes pumped from a pool thread
// through a channel into a chunked response) and an upload (PUT, the body
// read into a channel the pool thread drains). The HTTP session owns one of
// each and begins it afresh for every request.
#pragma once

#include <boost/beast/http.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "api/channels.h"
#include "base/error.h"

namespace skiff::api {

struct FileDownload {
  std::shared_ptr<Channel> ch;                    // meta frame, then the bytes
  std::shared_ptr<std::optional<Error>> failure;  // set by the reader before it aborts ch
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> res;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> sr;
  bool header_sent = false;
  bool chunked = true;  // false: a body of a length given up front (or none)

  void Begin(std::shared_ptr<Channel> c, std::shared_ptr<std::optional<Error>> f) {
    header_sent = false;
    chunked = true;
    sr.reset();
    res.reset();
    ch = std::move(c);
    failure = std::move(f);
  }
};

struct FileUpload {
  std::shared_ptr<Channel> ch;  // body chunks for the writing pool thread
  std::optional<boost::beast::http::request_parser<boost::beast::http::buffer_body>> parser;
  std::vector<char> buf;
  std::optional<Result<nlohmann::json>> result;  // the write's outcome, once it ended
  bool done = false;                             // no more body will be read
  bool answered = false;                         // the response went out
  bool reading = false;                          // a body read is pending

  void Begin(std::shared_ptr<Channel> c) {
    ch = std::move(c);
    result.reset();
    done = false;
    answered = false;
  }
};

}  // namespace skiff::api
