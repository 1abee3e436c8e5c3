#include "cli/client.h"

#include <curl/curl.h>
#include <sys/stat.h>

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

struct StreamState {
  const std::function<bool(std::string_view)>* on_bytes;
  const std::function<bool()>* keep_going;
  long status = 0;
  CURL* curl;
  std::string err_body;
};

size_t WriteStream(char* p, size_t s, size_t n, void* ud) {
  auto* st = static_cast<StreamState*>(ud);
  if (st->status == 0) curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &st->status);
  if (st->status != 200) {
    st->err_body.append(p, s * n);
    return s * n;
  }
  return (*st->on_bytes)(std::string_view(p, s * n)) ? s * n : 0;
}

int StreamProgress(void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* st = static_cast<StreamState*>(ud);
  return (*st->keep_going)() ? 0 : 1;
}

size_t ReadFromFile(char* p, size_t s, size_t n, void* ud) {
  return std::fread(p, 1, s * n, static_cast<std::FILE*>(ud));
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

Result<HttpResponse> Client::Stream(const std::string& path,
                                    const std::function<bool(std::string_view)>& on_bytes,
                                    const std::function<bool()>& keep_going) {
  Easy e(ep_, path);
  StreamState st{&on_bytes, &keep_going, 0, e.get(), {}};
  curl_easy_setopt(e.get(), CURLOPT_WRITEFUNCTION, WriteStream);
  curl_easy_setopt(e.get(), CURLOPT_WRITEDATA, &st);
  if (keep_going) {
    curl_easy_setopt(e.get(), CURLOPT_XFERINFOFUNCTION, StreamProgress);
    curl_easy_setopt(e.get(), CURLOPT_XFERINFODATA, &st);
    curl_easy_setopt(e.get(), CURLOPT_NOPROGRESS, 0L);
  }
  auto r = e.Perform();
  if (!r.ok() && st.status == 200) {  // the reader ended it, or the stream broke after its start
    HttpResponse resp;
    resp.status = 200;
    return resp;
  }
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

}  // namespace skiff::cli
