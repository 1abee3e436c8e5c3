#include "e2b/api.h"

#include <chrono>

#include "base/log.h"
#include "base/text.h"
#include "base/thread.h"
#include "e2b/connect_envelope.h"
#include "e2b/envd.h"

namespace skiff::e2b {

namespace {

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// /sandboxes/{id}[/rest] and /v2/sandboxes/{id}[/rest]: the id and the rest.
std::optional<std::pair<std::string, std::string>> SandboxPath(std::string_view path) {
  for (std::string_view prefix : {"/v2/sandboxes/", "/sandboxes/"}) {
    if (path.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = path.substr(prefix.size());
    size_t slash = rest.find('/');
    std::string id(rest.substr(0, slash));
    if (id.empty()) return std::nullopt;
    return std::make_pair(id,
                          slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash)));
  }
  return std::nullopt;
}

bool IsEnvd(const Request& req) { return !req.Header("e2b-sandbox-id").empty(); }

Reply SandboxGone(const std::string& id) {
  return Reply::Json(502, {{"sandboxId", id}, {"message", "The sandbox was not found"}, {"code", 502}});
}

}  // namespace

Result<std::string> BasicUser(const std::string& authorization) {
  if (authorization.empty()) return std::string();
  constexpr std::string_view kBasic = "Basic ";
  if (authorization.size() < kBasic.size() ||
      !std::equal(kBasic.begin(), kBasic.end(), authorization.begin(),
                  [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
    return InvalidRequest("Authorization: only Basic user selection is understood here");
  auto decoded = Base64Decode(std::string_view(authorization).substr(kBasic.size()));
  if (!decoded) return InvalidRequest("Authorization: not base64");
  std::string user = decoded->substr(0, decoded->find(':'));
  for (char c : user) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.';
    if (!ok || user.size() > 32) return InvalidRequest("Authorization: not a user name");
  }
  return user;
}

Api::Api(SandboxService& all, KeyCheck keys, Options options)
    : all_(all), keys_(std::move(keys)), options_(std::move(options)) {
  auto t = StartThread("e2b lifetimes", [this] {
    std::unique_lock<std::mutex> lk(timer_mu_);
    while (!stopping_) {
      timer_cv_.wait_for(lk, std::chrono::seconds(1));
      if (stopping_) break;
      lk.unlock();
      ExpireOnce(NowUnixMillis());
      lk.lock();
    }
  });
  if (t.ok()) {
    timer_ = std::move(t).value();
  } else {
    SKIFF_LOG(Error) << "e2b: " << t.error().message() << "; E2B sandbox timeouts are not enforced";
  }
}

Api::~Api() {
  {
    std::lock_guard<std::mutex> lk(timer_mu_);
    stopping_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void Api::ExpireOnce(int64_t now_ms) {
  for (const std::string& id : book_.Expired(now_ms)) {
    SKIFF_LOG(Info) << "e2b: sandbox " << id << " reached its end of life; stopping it";
    book_.Remove(id);
    Status st = all_.Stop(id, false);
    if (!st.ok() && st.error().code() != Code::kS002)
      SKIFF_LOG(Warn) << "e2b: stopping " << id << ": " << st.error().message();
  }
}

bool Api::IsUpload(const Request& req) { return req.method == "POST" && req.path == "/files"; }

std::optional<Api::Target> Api::TargetOf(const Request& req) const {
  if (IsEnvd(req)) {
    Target t{req.Header("e2b-sandbox-id")};
    t.stream = req.path == "/process.Process/Start" || req.path == "/process.Process/Connect" ||
               req.path == "/filesystem.Filesystem/WatchDir";
    return t;
  }
  if (auto sp = SandboxPath(req.path)) {
    Target t{sp->first};
    t.stop = req.method == "DELETE" && sp->second.empty();
    return t;
  }
  return std::nullopt;
}

Result<Api::Envd> Api::EnvdOf(const Request& req, bool need_token) const {
  Envd e;
  std::string id = req.Header("e2b-sandbox-id");
  auto rec = book_.Get(id);
  if (!rec || !all_.TenantOf(id)) return Error(Code::kS002, "sandbox not found");
  e.record = std::move(*rec);
  if (need_token && !ConstantTimeEqual(req.Header("x-access-token"), e.record.access_token))
    return Error(Code::kS001, "unauthenticated");
  auto user = BasicUser(req.Header("authorization"));
  if (!user.ok()) return user.error();
  e.user = *user;
  return e;
}

void Api::Handle(const Request& req, const std::string& body, ResponseWriter& out) {
  if (!IsEnvd(req)) return out.Send(Control(req, body));
  std::string id = req.Header("e2b-sandbox-id");
  std::string port = req.Header("e2b-sandbox-port");
  if (port != "49983") {
    return out.Send(Reply::Error(
        502, "port " + port + " of sandbox " + id +
                 ": only envd (49983) is served by skiff's E2B API so far (docs/e2b.md#differences)"));
  }
  bool is_rpc = req.method == "POST" && req.path != "/files" && req.path.find('.') != std::string::npos;
  if (req.method == "GET" && req.path == "/health") {
    auto e = EnvdOf(req, false);
    return out.Send(e.ok() ? Reply::Empty(204) : SandboxGone(id));
  }
  auto e = EnvdOf(req, !(req.path == "/files"));
  if (!e.ok()) {
    if (e.error().code() == Code::kS002) return out.Send(SandboxGone(id));
    if (e.error().message() == "unauthenticated") {
      if (is_rpc)
        return out.Send(Reply::Json(
            401, ConnectErrorBody(ConnectCode::kUnauthenticated, "missing or wrong X-Access-Token")));
      return out.Send(Reply::Error(401, "missing or wrong X-Access-Token"));
    }
    if (is_rpc)
      return out.Send(Reply::Json(400, ConnectErrorBody(ConnectCode::kInvalidArgument, e.error().message())));
    return out.Send(Reply::Error(400, e.error().message()));
  }
  if (req.path == "/files") {
    if (req.method == "GET") return FilesGet(*e, req, out);
    return out.Send(Reply::Error(405, "use GET or POST on /files"));
  }
  constexpr std::string_view kProcess = "/process.Process/", kFilesystem = "/filesystem.Filesystem/";
  if (req.method == "POST" && req.path.rfind(kProcess, 0) == 0)
    return ProcessRpc(*e, req.path.substr(kProcess.size()), req, body, out);
  if (req.method == "POST" && req.path.rfind(kFilesystem, 0) == 0)
    return out.Send(FilesystemRpc(*e, req.path.substr(kFilesystem.size()), body));
  out.Send(
      Reply::Json(404, ConnectErrorBody(ConnectCode::kUnimplemented, "no such envd endpoint: " + req.path)));
}

Reply Api::Control(const Request& req, const std::string& body) {
  SandboxService* svc = keys_(req.Header("x-api-key"));
  if (req.Header("x-api-key").empty() || !svc) return Reply::Error(401, "missing or wrong X-API-Key");
  const std::string& m = req.method;
  if (m == "POST" && (req.path == "/sandboxes" || req.path == "/v2/sandboxes")) return Create(*svc, body);
  if (m == "GET" && (req.path == "/sandboxes" || req.path == "/v2/sandboxes"))
    return List(*svc, req, req.path[1] == 'v');
  if (auto sp = SandboxPath(req.path)) {
    const auto& [id, rest] = *sp;
    if (m == "GET" && rest.empty()) return Info(*svc, id);
    if (m == "DELETE" && rest.empty()) return Kill(*svc, id);
    if (m == "POST" && rest == "/connect") return Connect(*svc, id, body);
    if (m == "POST" && rest == "/timeout") return SetTimeout(*svc, id, body);
    if (rest == "/pause" || rest == "/resume" || rest == "/snapshots" || rest == "/fork" ||
        rest == "/metrics" || rest == "/network" || rest == "/refreshes")
      return Reply::Error(
          501, req.method + " " + req.path + ": not supported by skiff yet (docs/e2b.md#differences)");
  }
  return Reply::Error(404, "no such endpoint: " + req.method + " " + req.path);
}

}  // namespace skiff::e2b
