#include "cli/client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/paths.h"

namespace skiff::cli {
namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

size_t WriteToString(char* p, size_t s, size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(p, s * n);
  return s * n;
}

struct DownloadState {
  std::FILE* out;
  long status = 0;
  CURL* curl;
  std::string err_body;
};

size_t WriteDownload(char* p, size_t s, size_t n, void* ud) {
  auto* st = static_cast<DownloadState*>(ud);
  if (st->status == 0) curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &st->status);
  if (st->status != 200) {
    st->err_body.append(p, s * n);
    return s * n;
  }
  return std::fwrite(p, 1, s * n, st->out) == s * n ? s * n : 0;
}

size_t ReadFromFile(char* p, size_t s, size_t n, void* ud) {
  return std::fread(p, 1, s * n, static_cast<std::FILE*>(ud));
}

size_t Header(char* p, size_t s, size_t n, void* ud) {
  auto* h = static_cast<std::map<std::string, std::string>*>(ud);
  std::string line(p, s * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string k = line.substr(0, colon), v = line.substr(colon + 1);
    for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
    (*h)[k] = v;
  }
  return s * n;
}

class Easy {
 public:
  explicit Easy(const Endpoint& ep, const std::string& path) {
    static CurlGlobal global;
    c_ = curl_easy_init();
    std::string url = ep.base_url + path;
    curl_easy_setopt(c_, CURLOPT_URL, url.c_str());
    if (!ep.unix_socket.empty()) {
      curl_easy_setopt(c_, CURLOPT_UNIX_SOCKET_PATH, ep.unix_socket.c_str());
    }
    curl_easy_setopt(c_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c_, CURLOPT_CONNECTTIMEOUT, 5L);
    headers_ = curl_slist_append(headers_, "Expect:");
    if (!ep.token.empty()) {
      std::string auth = "Authorization: Bearer " + ep.token;
      headers_ = curl_slist_append(headers_, auth.c_str());
    }
    curl_easy_setopt(c_, CURLOPT_HEADERFUNCTION, Header);
    curl_easy_setopt(c_, CURLOPT_HEADERDATA, &resp_.headers);
  }
  ~Easy() {
    curl_slist_free_all(headers_);
    curl_easy_cleanup(c_);
  }
  CURL* get() { return c_; }
  void AddHeader(const char* h) { headers_ = curl_slist_append(headers_, h); }
  Result<HttpResponse> Perform() {
    curl_easy_setopt(c_, CURLOPT_HTTPHEADER, headers_);
    CURLcode rc = curl_easy_perform(c_);
    if (rc != CURLE_OK) {
      return Error(Code::kS300, std::string("platform failure: sandbox: daemon request failed: ") +
                                    curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c_, CURLINFO_RESPONSE_CODE, &resp_.status);
    return resp_;
  }
  HttpResponse& resp() { return resp_; }

 private:
  CURL* c_;
  curl_slist* headers_ = nullptr;
  HttpResponse resp_;
};

}  // namespace

Result<HttpResponse> Client::Get(const std::string& path, long timeout_secs) {
  Easy e(ep_, path);
  curl_easy_setopt(e.get(), CURLOPT_WRITEFUNCTION, WriteToString);
  curl_easy_setopt(e.get(), CURLOPT_WRITEDATA, &e.resp().body);
  curl_easy_setopt(e.get(), CURLOPT_TIMEOUT, timeout_secs);
  return e.Perform();
}

Result<HttpResponse> Client::Post(const std::string& path, const std::string& body) {
  Easy e(ep_, path);
  e.AddHeader("Content-Type: application/json");
  curl_easy_setopt(e.get(), CURLOPT_POST, 1L);
  curl_easy_setopt(e.get(), CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(e.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(e.get(), CURLOPT_WRITEFUNCTION, WriteToString);
  curl_easy_setopt(e.get(), CURLOPT_WRITEDATA, &e.resp().body);
  return e.Perform();
}

Result<HttpResponse> Client::Download(const std::string& path, std::FILE* out) {
  Easy e(ep_, path);
  DownloadState st{out, 0, e.get(), {}};
  curl_easy_setopt(e.get(), CURLOPT_WRITEFUNCTION, WriteDownload);
  curl_easy_setopt(e.get(), CURLOPT_WRITEDATA, &st);
  auto r = e.Perform();
  if (!r.ok()) return r;
  r->body = std::move(st.err_body);
  return r;
}

Result<HttpResponse> Client::Upload(const std::string& path, std::FILE* in) {
  Easy e(ep_, path);
  curl_easy_setopt(e.get(), CURLOPT_UPLOAD, 1L);  // PUT
  curl_easy_setopt(e.get(), CURLOPT_READFUNCTION, ReadFromFile);
  curl_easy_setopt(e.get(), CURLOPT_READDATA, in);
  struct stat sb;
  if (::fstat(::fileno(in), &sb) == 0 && S_ISREG(sb.st_mode)) {
    curl_easy_setopt(e.get(), CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(sb.st_size));
  }
  curl_easy_setopt(e.get(), CURLOPT_WRITEFUNCTION, WriteToString);
  curl_easy_setopt(e.get(), CURLOPT_WRITEDATA, &e.resp().body);
  return e.Perform();
}

std::string DefaultSocket() { return paths::RuntimeDir() + "/skiffd.sock"; }

namespace {

bool Healthy(const Endpoint& ep) {
  Client c(ep);
  auto r = c.Get("/healthz", 3);
  return r.ok() && (r->status == 200 || r->status == 503);
}

}  // namespace

Result<Endpoint> FindDaemon(const std::string& url_flag, bool autostart) {
  Endpoint ep;
  if (const char* t = std::getenv("SKIFF_TOKEN"); t && *t) ep.token = t;
  std::string url = url_flag;
  if (url.empty()) {
    if (const char* u = std::getenv("SKIFF_URL"); u && *u) url = u;
  }
  if (!url.empty()) {
    if (url.rfind("unix:", 0) == 0) {
      ep.unix_socket = url.substr(5);
      ep.base_url = "http://localhost";
    } else {
      while (!url.empty() && url.back() == '/') url.pop_back();
      ep.base_url = url;
    }
    if (!Healthy(ep)) {
      return Error(Code::kS300, "platform failure: sandbox: no skiff daemon answers at " + url);
    }
    return ep;
  }
  Endpoint sock{DefaultSocket(), "http://localhost", ep.token};
  if (Healthy(sock)) return sock;
  Endpoint tcp{"", "http://127.0.0.1:49134", ep.token};
  if (Healthy(tcp)) return tcp;
  if (!autostart) return Error(Code::kS300, "platform failure: sandbox: no skiff daemon is running");

  // Start one in the background: unix socket only (plus an ephemeral
  // loopback port), logging to a file next to the socket.
  std::string dir = paths::RuntimeDir();
  ::mkdir(dir.c_str(), 0700);
  std::string log = dir + "/skiffd.log";
  std::string self = paths::SelfDir() + "/skiff";
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) self.assign(exe, static_cast<size_t>(n));
  pid_t pid = ::fork();
  if (pid < 0) return Error::Sys(Code::kS300, "fork", "skiff serve", errno);
  if (pid == 0) {
    // Child: detach into its own session; a second fork makes the daemon a
    // child of init so the CLI never has to reap it.
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, 0);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::string sock_path = sock.unix_socket;
    const char* args[] = {self.c_str(), "serve", "--socket", sock_path.c_str(), "--port", "0",
                          nullptr};
    ::execv(self.c_str(), const_cast<char* const*>(args));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fprintf(stderr, "skiff: no daemon was running; started one in the background (socket %s, log %s)\n",
               sock.unix_socket.c_str(), log.c_str());
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Healthy(sock)) return sock;
  }
  return Error(Code::kS300, "platform failure: sandbox: the background daemon did not start; see " + log);
}

}  // namespace skiff::cli
