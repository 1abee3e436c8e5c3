// One request of the E2B API and its answer, free of any transport: the
// HTTP session fills a Request, runs the API on a worker thread and sends
// what the ResponseWriter is given (docs/e2b.md).
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::e2b {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", ...
  // Below the /e2b prefix ("/v2/sandboxes", "/process.Process/Start");
  // a root-level signed "/files" as it came.
  std::string path;
  std::map<std::string, std::string> query;    // decoded
  std::map<std::string, std::string> headers;  // names lower-cased
  bool root_level = false;                     // arrived without the /e2b prefix
  // The request target (path and query) as it came, below the /e2b prefix,
  // and every header in order, as sent: what a forwarded request carries.
  std::string target;
  Headers raw_headers;

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
  std::string Query(const std::string& key) const {
    auto it = query.find(key);
    return it == query.end() ? std::string() : it->second;
  }
};

// An answer that fits in memory.
struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  Headers headers;
  std::string body;

  static Reply Json(int status, const nlohmann::json& body);
  static Reply Empty(int status);  // 204 and the like
  // E2B's error body: {"code": status, "message": ...}.
  static Reply Error(int status, std::string_view message);
};

// Where a streamed answer goes. Start once, then Write any number of
// times; each Write is sent to the client as it is (one flushed chunk).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // False when the client is gone (then nothing more is sent).
  virtual bool Start(int status, std::string_view content_type, const Headers& headers) = 0;
  virtual bool Write(std::string_view bytes) = 0;
  // False once the client went away: a stream that waits ends.
  virtual bool Alive() = 0;
  // Ends the answer without its proper end (the connection is dropped):
  // what a killed sandbox's open streams get.
  virtual void Drop() = 0;

  // A whole answer, of a length told up front.
  void Send(const Reply& r) {
    Headers h = r.headers;
    if (r.status != 204 && r.status != 304) h.emplace_back("content-length", std::to_string(r.body.size()));
    if (Start(r.status, r.content_type, h) && !r.body.empty()) Write(r.body);
  }
};

}  // namespace skiff::e2b
