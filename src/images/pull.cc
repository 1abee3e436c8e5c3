// Registry pull over the distribution API v2 (libcurl).
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/log.h"
#include "base/sha256.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "images/build.h"
#include "images/install.h"
#include "images/recipe.h"

namespace skiff::images {
namespace {

constexpr size_t kMaxDocument = 4 << 20;  // manifests, indexes, configs, tokens
constexpr int kAttempts = 3;

Error PullError(const std::string& detail) { return Platform("sandbox", "pull: " + detail); }

using Ref = ImageRef;

// Distribution spec: components [a-z0-9]+([._-][a-z0-9]+)* joined by '/'.
bool ValidRepo(const std::string& r) {
  if (r.empty() || r.size() > 255) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  size_t i = 0;
  while (i <= r.size()) {
    size_t j = r.find('/', i);
    if (j == std::string::npos) j = r.size();
    std::string c = r.substr(i, j - i);
    if (c.empty() || !alnum(c.front()) || !alnum(c.back())) return false;
    for (size_t k = 0; k < c.size(); ++k) {
      if (alnum(c[k])) continue;
      if ((c[k] == '.' || c[k] == '_' || c[k] == '-') && k + 1 < c.size()) continue;
      return false;
    }
    i = j + 1;
  }
  return true;
}

Result<Ref> ParseRefImpl(const std::string& s) {
  Ref r;
  std::string rest = s;
  if (auto at = rest.find('@'); at != std::string::npos) {
    r.reference = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!r.reference.starts_with("sha256:") || !IsHexDigest(r.reference.substr(7))) {
      return InvalidRequest("image reference digest must be sha256:<hex>: " + s);
    }
  }
  auto slash = rest.find('/');
  std::string first = slash == std::string::npos ? "" : rest.substr(0, slash);
  if (!first.empty() && (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
                         first == "localhost")) {
    r.host = first;
    rest = rest.substr(slash + 1);
  } else {
    r.host = "registry-1.docker.io";
    if (rest.find('/') == std::string::npos) rest = "library/" + rest;
  }
  if (r.host == "docker.io" || r.host == "index.docker.io") r.host = "registry-1.docker.io";
  if (r.reference.empty()) {
    auto colon = rest.rfind(':');
    if (colon != std::string::npos) {
      r.reference = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    } else {
      r.reference = "latest";
    }
    for (char c : r.reference) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '.' || c == '-';
      if (!ok || r.reference.size() > 128) return InvalidRequest("bad image tag in " + s);
    }
  }
  if (!ValidRepo(rest)) return InvalidRequest("bad repository in image reference " + s);
  r.repo = rest;
  std::string hostname = r.host.substr(
      0, r.host.rfind(':') == std::string::npos || r.host.front() == '[' ? r.host.size() : r.host.rfind(':'));
  bool loopback = hostname == "localhost" || hostname == "127.0.0.1" || r.host.starts_with("[::1]");
  r.scheme = loopback ? "http" : "https";
  return r;
}

void CurlInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Response {
  long status = 0;
  std::string body;                            // when not streamed to a file
  std::map<std::string, std::string> headers;  // lowercase names
};

struct Sink {
  std::string* text = nullptr;
  int fd = -1;
  Sha256* hash = nullptr;
  size_t limit = kMaxDocument;
  size_t got = 0;
  bool too_big = false;
  bool write_failed = false;
};

size_t OnData(char* p, size_t sz, size_t n, void* ud) {
  auto* s = static_cast<Sink*>(ud);
  size_t len = sz * n;
  s->got += len;
  if (s->text) {
    if (s->got > s->limit) {
      s->too_big = true;
      return 0;
    }
    s->text->append(p, len);
  } else {
    size_t off = 0;
    while (off < len) {
      ssize_t w = ::write(s->fd, p + off, len - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        s->write_failed = true;
        return 0;
      }
      off += static_cast<size_t>(w);
    }
  }
  if (s->hash) s->hash->Update(p, len);
  return len;
}

size_t OnHeader(char* p, size_t sz, size_t n, void* ud) {
  auto* h = static_cast<std::map<std::string, std::string>*>(ud);
  std::string line(p, sz * n);
  auto colon = line.find(':');
  if (line.starts_with("HTTP/")) h->clear();  // a redirect's or 401's headers
  if (colon != std::string::npos) {
    std::string k = line.substr(0, colon);
    for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
    (*h)[k] = v;
  }
  return sz * n;
}

class Client {
 public:
  explicit Client(Ref ref) : ref_(std::move(ref)) { CurlInitOnce(); }

  // GET <base>/v2/<repo>/<path>, authenticating when the registry asks.
  // With fd >= 0 the body is written there (and hashed into *hash).
  Result<Response> Get(const std::string& path, const std::vector<std::string>& accept, int fd = -1,
                       Sha256* hash = nullptr) {
    std::string url = ref_.scheme + "://" + ref_.host + "/v2/" + ref_.repo + "/" + path;
    for (int round = 0; round < 2; ++round) {
      Result<Response> r = Error(Code::kS300, "");
      for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        if (fd >= 0 && (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0)) {
          return Error::Sys(Code::kS300, "ftruncate", "blob", errno);
        }
        Sha256 fresh;
        if (hash) *hash = fresh;
        r = Once(url, accept, fd, hash);
        bool transient = !r.ok() || r->status == 429 || r->status >= 500;
        if (!transient) break;
        if (attempt < kAttempts) {
          SKIFF_LOG(Info) << "pull: retrying " << url << " ("
                          << (r.ok() ? "HTTP " + std::to_string(r->status) : r.error().message()) << ")";
          std::this_thread::sleep_for(std::chrono::milliseconds(500 * attempt));
        }
      }
      if (!r.ok()) return r;
      if (r->status == 401 && round == 0 && token_.empty()) {
        SKIFF_RETURN_IF_ERROR(Authenticate(r->headers["www-authenticate"]));
        continue;
      }
      return r;
    }
    return PullError("unauthorized");
  }

 private:
  Result<Response> Once(const std::string& url, const std::vector<std::string>& accept, int fd, Sha256* hash,
                        bool with_auth = true) {
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
    if (!c) return PullError("curl_easy_init failed");
    Response resp;
    Sink sink;
    if (fd >= 0) {
      sink.fd = fd;
    } else {
      sink.text = &resp.body;
    }
    sink.hash = hash;
    curl_slist* hdrs = nullptr;
    for (const auto& a : accept) hdrs = curl_slist_append(hdrs, ("Accept: " + a).c_str());
    if (with_auth && !token_.empty()) {
      hdrs = curl_slist_append(hdrs, ("Authorization: Bearer " + token_).c_str());
    }
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> hold(hdrs, curl_slist_free_all);
    char err[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c.get(), CURLOPT_FOLLOWLOCATION, 1L);  // blob stores redirect
    curl_easy_setopt(c.get(), CURLOPT_MAXREDIRS, 5L);
    // Redirects may not downgrade to another protocol; the Authorization
    // header is never sent to another host (CURLOPT_UNRESTRICTED_AUTH off).
    curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c.get(), CURLOPT_REDIR_PROTOCOLS_STR, ref_.scheme == "https" ? "https" : "http,https");
    curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c.get(), CURLOPT_USERAGENT, "skiff/0.1");
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &resp.headers);
    curl_easy_setopt(c.get(), CURLOPT_ERRORBUFFER, err);
    CURLcode rc = curl_easy_perform(c.get());
    if (sink.too_big) return PullError("response larger than 4 MiB from " + url);
    if (sink.write_failed) return Error::Sys(Code::kS300, "write", "blob", errno);
    if (rc != CURLE_OK) {
      return PullError(url + ": " + (err[0] ? std::string(err) : curl_easy_strerror(rc)));
    }
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &resp.status);
    return resp;
  }

  // WWW-Authenticate: Bearer realm="…",service="…",scope="…"
  Status Authenticate(const std::string& challenge) {
    if (!challenge.starts_with("Bearer ") && !challenge.starts_with("bearer ")) {
      return PullError("registry wants unsupported auth: " + challenge.substr(0, 64));
    }
    std::map<std::string, std::string> params;
    std::string s = challenge.substr(7);
    size_t i = 0;
    while (i < s.size()) {
      auto eq = s.find('=', i);
      if (eq == std::string::npos) break;
      std::string k = s.substr(i, eq - i);
      while (!k.empty() && (k.front() == ' ' || k.front() == ',')) k.erase(0, 1);
      std::string v;
      size_t j = eq + 1;
      if (j < s.size() && s[j] == '"') {
        auto end = s.find('"', j + 1);
        if (end == std::string::npos) break;
        v = s.substr(j + 1, end - j - 1);
        i = end + 1;
      } else {
        auto end = s.find(',', j);
        v = s.substr(j, end == std::string::npos ? std::string::npos : end - j);
        i = end == std::string::npos ? s.size() : end;
      }
      params[k] = v;
    }
    std::string realm = params["realm"];
    if (!realm.starts_with("https://") && !(ref_.scheme == "http" && realm.starts_with("http://"))) {
      return PullError("token realm must be https: " + realm);
    }
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> esc(curl_easy_init(), curl_easy_cleanup);
    auto enc = [&](const std::string& v) {
      char* e = curl_easy_escape(esc.get(), v.c_str(), static_cast<int>(v.size()));
      std::string out = e ? e : "";
      curl_free(e);
      return out;
    };
    std::string url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
    if (params.count("service")) url += "service=" + enc(params["service"]) + "&";
    url += "scope=" + enc(params.count("scope") ? params["scope"] : "repository:" + ref_.repo + ":pull");
    SKIFF_ASSIGN_OR_RETURN(Response r, Once(url, {"application/json"}, -1, nullptr, false));
    if (r.status != 200) return PullError("token endpoint answered HTTP " + std::to_string(r.status));
    try {
      auto j = nlohmann::json::parse(r.body);
      token_ = j.contains("token") ? j["token"].get<std::string>() : j.at("access_token").get<std::string>();
    } catch (const nlohmann::json::exception&) {
      return PullError("token endpoint sent no token");
    }
    if (token_.empty() || token_.find_first_of("\r\n") != std::string::npos) {
      return PullError("bad token");
    }
    return OkStatus();
  }

  Ref ref_;
  std::string token_;
};

const std::vector<std::string> kManifestTypes = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
};

Result<std::string> DescriptorDigest(const nlohmann::json& d, const std::string& what) {
  if (!d.is_object() || !d.contains("digest") || !d["digest"].is_string()) {
    return PullError(what + " descriptor without a digest");
  }
  std::string s = d["digest"].get<std::string>();
  if (!s.starts_with("sha256:") || !IsHexDigest(s.substr(7))) {
    return PullError(what + " digest must be sha256:<hex>: " + s);
  }
  return s;
}

}  // namespace

Result<ImageRef> ParseImageRef(const std::string& ref) { return ParseRefImpl(ref); }

Result<ImageMeta> Pull(const Store& store, const std::string& name, const std::string& ref_text,
                       const ProgressFn& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  if (IsPreset(name) || name == "host") {
    return InvalidRequest("image name '" + name + "' is reserved");
  }
  SKIFF_ASSIGN_OR_RETURN(Ref ref, ParseRefImpl(ref_text));
  Client client(ref);
  say("pulling " + ref.repo + ":" + ref.reference + " from " + ref.scheme + "://" + ref.host);

  // Manifest (through a manifest list when needed), verified by digest.
  std::string wanted = ref.reference.starts_with("sha256:") ? ref.reference : "";
  nlohmann::json manifest;
  std::string reference = ref.reference;
  for (int depth = 0;; ++depth) {
    if (depth > 3) return PullError("manifest lists nested too deep");
    SKIFF_ASSIGN_OR_RETURN(Response r, client.Get("manifests/" + reference, kManifestTypes));
    if (r.status != 200) {
      return PullError("manifest " + reference + ": HTTP " + std::to_string(r.status));
    }
    std::string got = "sha256:" + Sha256Hex(r.body);
    if (!wanted.empty() && got != wanted) {
      std::string message = "manifest digest mismatch: wanted " + wanted;
      message.append(", got ").append(got);
      return PullError(message);
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(r.body);
    } catch (const nlohmann::json::exception&) {
      return PullError("manifest is not JSON");
    }
    if (!doc.is_object()) return PullError("manifest is not an object");
    std::string mt = doc.value("mediaType", r.headers["content-type"]);
    if (doc.contains("manifests")) {
      if (!doc["manifests"].is_array()) return PullError("bad manifest list");
      nlohmann::json pick;
      for (const auto& d : doc["manifests"]) {
        if (!d.is_object() || !d.contains("platform") || !d["platform"].is_object()) continue;
        if (d["platform"].value("os", "") == "linux" && d["platform"].value("architecture", "") == "amd64") {
          pick = d;
          break;
        }
      }
      if (pick.is_null()) return PullError("no linux/amd64 image in the manifest list");
      SKIFF_ASSIGN_OR_RETURN(wanted, DescriptorDigest(pick, "manifest"));
      reference = wanted;
      continue;
    }
    if (doc.value("schemaVersion", 0) != 2 || !doc.contains("layers")) {
      return PullError("unsupported manifest type " + mt);
    }
    manifest = std::move(doc);
    break;
  }
  if (!manifest["layers"].is_array() || manifest["layers"].size() > 512) {
    return PullError("bad layer list");
  }

  // Config.
  SKIFF_ASSIGN_OR_RETURN(std::string config_digest,
                         DescriptorDigest(manifest.value("config", nlohmann::json()), "config"));
  SKIFF_ASSIGN_OR_RETURN(Response cr, client.Get("blobs/" + config_digest, {"*/*"}));
  if (cr.status != 200) return PullError("config blob: HTTP " + std::to_string(cr.status));
  if ("sha256:" + Sha256Hex(cr.body) != config_digest) {
    return PullError("config blob digest mismatch: " + config_digest);
  }
  if (auto have = store.Read(config_digest.substr(7))) {
    say("image " + config_digest + " already in the store");
    SKIFF_RETURN_IF_ERROR(store.SetCurrent(name, have->digest));
    return *have;
  }

  // Layers, each streamed to a staging file and verified.
  SKIFF_RETURN_IF_ERROR(store.Init());
  SKIFF_ASSIGN_OR_RETURN(std::string stage, store.MakeTemp(Sha256Hex(RandomHex(16))));
  ScopedCleanup drop_stage([&] { (void)RemoveTree(stage); });
  std::vector<std::string> files;
  size_t n = manifest["layers"].size();
  int64_t t0 = MonotonicMillis();
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    SKIFF_ASSIGN_OR_RETURN(std::string d, DescriptorDigest(manifest["layers"][i], "layer"));
    std::string file = stage + "/layer" + std::to_string(i);
    UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return Error::Sys(Code::kS300, "open", file, errno);
    Sha256 h;
    SKIFF_ASSIGN_OR_RETURN(Response lr, client.Get("blobs/" + d, {"*/*"}, fd.get(), &h));
    if (lr.status != 200) return PullError("layer " + d + ": HTTP " + std::to_string(lr.status));
    if ("sha256:" + h.HexDigest() != d) return PullError("layer blob digest mismatch: " + d);
    struct stat st;
    if (::fstat(fd.get(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
    say("layer " + std::to_string(i + 1) + "/" + std::to_string(n) + " " + d.substr(0, 19) + " downloaded");
    files.push_back(file);
  }
  int64_t ms = std::max<int64_t>(1, MonotonicMillis() - t0);
  say("downloaded " + std::to_string(bytes) + " bytes in " + std::to_string(ms) + " ms (" +
      std::to_string(bytes * 1000 / static_cast<uint64_t>(ms) / (uint64_t{1024} * 1024)) + " MiB/s)");
  return InstallImage(store, name, ref_text, cr.body, files, progress);
}

}  // namespace skiff::images
