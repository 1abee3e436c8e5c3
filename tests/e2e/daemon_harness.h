// End-to-end harness: starts the real `skiff serve` binary on a free
// loopback port and talks to it over HTTP (libcurl) and raw sockets; a small
// draft-07 JSON Schema checker validates responses against the schemas the
// daemon publishes at GET /v1/functions/{id}.
#pragma once

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace skiff::e2e {

using json = nlohmann::json;

inline uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Http {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  json Json() const { return json::parse(body, nullptr, false); }
};

inline size_t CurlWrite(char* p, size_t s, size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(p, s * n);
  return s * n;
}
inline size_t CurlHeader(char* p, size_t s, size_t n, void* ud) {
  auto* h = static_cast<std::map<std::string, std::string>*>(ud);
  std::string line(p, s * n);
  auto c = line.find(':');
  if (c != std::string::npos) {
    std::string k = line.substr(0, c), v = line.substr(c + 1);
    for (auto& ch : k) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.pop_back();
    (*h)[k] = v;
  }
  return s * n;
}

class Daemon {
 public:
  // Starts `skiff serve` with `yaml` as its config; waits for /healthz.
  // `in_child` runs in the forked child before exec (async-signal-safe calls
  // only, e.g. setrlimit).
  explicit Daemon(const std::string& yaml = "", std::vector<std::string> extra = {},
                  const std::function<void()>& in_child = {}) {
    port_ = FreePort();
    config_ = testing::TempDir() + "/skiff_e2e_" + std::to_string(port_) + ".yaml";
    {
      std::ofstream out(config_);
      out << yaml;
    }
    std::string bin = std::string(SKIFF_BINARY_DIR) + "/cmd/skiff/skiff";
    std::vector<std::string> args = {bin, "serve", "--port", std::to_string(port_), "--config", config_};
    for (auto& e : extra) args.push_back(e);
    log_ = testing::TempDir() + "/skiff_e2e_" + std::to_string(port_) + ".log";
    // The agent binary is built next to its own main, not next to skiff.
    ::setenv("SKIFF_AGENT", (std::string(SKIFF_BINARY_DIR) + "/cmd/skiff-agent/skiff-agent").c_str(), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      if (in_child) in_child();
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 300; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return;
      }
      auto h = Get("/healthz");
      if (h.status == 200 || h.status == 503) {
        ready_ = true;
        return;
      }
    }
  }
  ~Daemon() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    // Leave no trace; a failed test keeps its daemon's config and log to
    // read.
    if (!::testing::Test::HasFailure()) {
      ::unlink(config_.c_str());
      ::unlink(log_.c_str());
    }
  }

  bool ready() const { return ready_; }
  bool exited() const { return exited_; }
  int exit_status() const { return exit_status_; }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Waits for the daemon to exit by itself; its status, or -1 after `timeout`.
  int WaitExit(std::chrono::seconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (!exited_ && std::chrono::steady_clock::now() < end) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    return exited_ ? exit_status_ : -1;
  }

  // SIGTERM; returns the exit status (or -1 after `timeout`).
  int Terminate(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    ::kill(pid_, SIGTERM);
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return exit_status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  Http Request(const std::string& method, const std::string& path, const std::string* body,
               std::vector<std::string> headers = {}, long timeout = 600) {
    Http r;
    CURL* c = curl_easy_init();
    std::string url = "http://127.0.0.1:" + std::to_string(port_) + path;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    curl_slist* hl = curl_slist_append(nullptr, "Expect:");
    for (auto& h : headers) hl = curl_slist_append(hl, h.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    if (body) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, CurlWrite);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, CurlHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return r;
  }
  Http Get(const std::string& path, std::vector<std::string> headers = {}) {
    return Request("GET", path, nullptr, std::move(headers), 30);
  }
  Http Post(const std::string& path, const std::string& body, std::vector<std::string> headers = {}) {
    return Request("POST", path, &body, std::move(headers));
  }
  Http Call(const std::string& fn, const json& payload) {
    return Post("/v1/functions/" + fn, payload.dump());
  }

  // A raw TCP connection to the daemon.
  int Connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

 private:
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  std::string config_, log_;
  bool ready_ = false, exited_ = false;
  int exit_status_ = -1;
};

// Reads what the peer sends until it closes or `timeout` passes.
inline std::string ReadAll(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  auto end = std::chrono::steady_clock::now() + timeout;
  timeval tv{0, 100000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[65536];
  while (std::chrono::steady_clock::now() < end) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    if (out.find("\r\n\r\n") != std::string::npos) {
      // Stop once a full response with a Content-Length body is in.
      auto hdr_end = out.find("\r\n\r\n");
      auto cl = out.find("Content-Length: ");
      if (cl != std::string::npos && cl < hdr_end) {
        size_t len = std::stoul(out.substr(cl + 16));
        if (out.size() >= hdr_end + 4 + len) break;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------- schemas

// Validates `v` against a draft-07 schema subset (type, properties,
// required, items, enum, const, $ref into #/definitions, oneOf/anyOf/allOf,
// minimum, minItems/maxItems). Returns "" or the first violation.
inline std::string Validate(const json& v, const json& schema, const json& root,
                            const std::string& at = "$") {
  if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": schema is false";
  if (!schema.is_object()) return "";
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"];
    const std::string pre = "#/definitions/";
    if (ref.rfind(pre, 0) != 0) return at + ": unsupported $ref " + ref;
    auto name = ref.substr(pre.size());
    if (!root.contains("definitions") || !root["definitions"].contains(name)) {
      return at + ": dangling $ref " + ref;
    }
    return Validate(v, root["definitions"][name], root, at);
  }
  if (schema.contains("type")) {
    auto ok_type = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "boolean") return v.is_boolean();
      if (t == "integer") return v.is_number_integer();
      if (t == "number") return v.is_number();
      if (t == "null") return v.is_null();
      return false;
    };
    bool ok = false;
    if (schema["type"].is_string())
      ok = ok_type(schema["type"]);
    else
      for (const auto& t : schema["type"]) ok = ok || ok_type(t);
    if (!ok) return at + ": expected type " + schema["type"].dump() + ", got " + v.type_name();
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == v;
    if (!found) return at + ": not in enum " + schema["enum"].dump();
  }
  if (schema.contains("const") && schema["const"] != v) return at + ": not const";
  if (schema.contains("minimum") && v.is_number() && v.get<double>() < schema["minimum"].get<double>()) {
    return at + ": below minimum";
  }
  if (v.is_object()) {
    if (schema.contains("required")) {
      for (const auto& r : schema["required"]) {
        if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.dump();
      }
    }
    if (schema.contains("properties")) {
      for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it) {
        if (v.contains(it.key())) {
          auto e = Validate(v[it.key()], *it, root, at + "." + it.key());
          if (!e.empty()) return e;
        }
      }
    }
    if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (schema.contains("properties") && schema["properties"].contains(it.key())) continue;
        auto e = Validate(*it, schema["additionalProperties"], root, at + "." + it.key());
        if (!e.empty()) return e;
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("items") && schema["items"].is_object()) {
      for (size_t i = 0; i < v.size(); ++i) {
        auto e = Validate(v[i], schema["items"], root, at + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
    }
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
      return at + ": too few items";
    }
  }
  for (const char* comb : {"oneOf", "anyOf"}) {
    if (!schema.contains(comb)) continue;
    int matches = 0;
    std::string first;
    for (const auto& s : schema[comb]) {
      auto e = Validate(v, s, root, at);
      if (e.empty())
        ++matches;
      else if (first.empty())
        first = e;
    }
    if (matches == 0) return at + ": matches no branch of " + comb + " (" + first + ")";
    if (std::string(comb) == "oneOf" && matches > 1) return at + ": matches several oneOf branches";
  }
  if (schema.contains("allOf")) {
    for (const auto& s : schema["allOf"]) {
      auto e = Validate(v, s, root, at);
      if (!e.empty()) return e;
    }
  }
  return "";
}

// The docs/errors.md error object shape.
inline std::string ValidateErrorObject(const json& e) {
  static const json kSchema = json::parse(R"({
    "type":"object",
    "required":["code","docs_url","fix","fix_note","message","retryable","type"],
    "properties":{
      "code":{"type":"string"},
      "docs_url":{"type":"string"},
      "fix":{"type":["object","null"]},
      "fix_note":{"type":["string","null"]},
      "message":{"type":"string"},
      "retryable":{"type":"boolean"},
      "type":{"enum":["validation","config","internal","transient","execution","filesystem","platform"]},
      "details":{"type":"object"}
    }})");
  auto err = Validate(e, kSchema, kSchema);
  if (!err.empty()) return err;
  std::string code = e["code"];
  if (e["docs_url"] != "docs/errors.md#" + code) return "docs_url does not end in #" + code;
  if (e["retryable"].get<bool>() != (code == "S102" || code == "S218")) return "retryable wrong";
  return "";
}

}  // namespace skiff::e2e
