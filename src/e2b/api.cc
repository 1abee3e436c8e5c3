#include "e2b/api.h"

#include <chrono>

#include "base/log.h"
#include "base/text.h"
#include "base/thread.h"
#include "e2b/basic_user.h"
#include "e2b/connect_envelope.h"
#include "e2b/file_signature.h"

namespace skiff::e2b {

namespace {

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

// /templates/{templateID}: the id (no further segments).
std::optional<std::string> TemplatePath(std::string_view path) {
  constexpr std::string_view prefix = "/templates/";
  if (path.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view id = path.substr(prefix.size());
  if (id.empty() || id.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(id);
}

bool IsEnvd(const Request& req) { return !req.Header("e2b-sandbox-id").empty(); }

constexpr int kEnvdPort = 49983;

Reply SandboxGone(const std::string& id) { return ProxyError(id, 502, "The sandbox was not found"); }

}  // namespace

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
  watchers_.Expire(MonotonicMillis());
  for (const std::string& id : book_.Expired(now_ms)) {
    if (IsPaused(all_, id)) continue;  // a paused sandbox waits for its connect
    if (auto rec = book_.Get(id); rec && rec->auto_pause) {
      SKIFF_LOG(Info) << "e2b: sandbox " << id << " reached its end of life; pausing it (autoPause)";
      Status st = all_.Pause(id);
      if (st.ok() || st.error().code() == Code::kS006) continue;
      SKIFF_LOG(Warn) << "e2b: pausing " << id << ": " << st.error().message() << "; stopping it";
    }
    SKIFF_LOG(Info) << "e2b: sandbox " << id << " reached its end of life; stopping it";
    book_.Remove(id);
    watchers_.RemoveSandbox(id);
    Status st = all_.Stop(id, false);
    if (!st.ok() && st.error().code() != Code::kS002)
      SKIFF_LOG(Warn) << "e2b: stopping " << id << ": " << st.error().message();
  }
}

bool Api::IsUpload(const Request& req) {
  return req.method == "POST" && req.path == "/files" && !IsForward(req);
}

bool Api::IsForward(const Request& req) {
  std::string port = req.Header("e2b-sandbox-port");
  return IsEnvd(req) && !port.empty() && port != std::to_string(kEnvdPort);
}

std::optional<Api::Target> Api::TargetOf(const Request& req) const {
  if (IsEnvd(req)) {
    Target t{req.Header("e2b-sandbox-id")};
    // A forwarded answer may stream for long (events, NDJSON).
    t.stream = IsForward(req) || req.path == "/process.Process/Start" ||
               req.path == "/process.Process/Connect" || req.path == "/filesystem.Filesystem/WatchDir";
    return t;
  }
  if (auto sp = SandboxPath(req.path)) {
    Target t{sp->first};
    t.stop = req.method == "DELETE" && sp->second.empty();
    return t;
  }
  return std::nullopt;
}

Api::Access Api::EnvdOf(const Request& req, bool is_rpc) const {
  Access a;
  std::string id = req.Header("e2b-sandbox-id");
  auto refuse = [&](int status, const std::string& message) {
    ConnectCode code = status == 401 ? ConnectCode::kUnauthenticated : ConnectCode::kInvalidArgument;
    a.refusal = is_rpc ? Reply::Json(status, ConnectErrorBody(code, message)) : Reply::Error(status, message);
    return a;
  };
  auto rec = book_.Get(id);
  if (!rec || !all_.TenantOf(id)) {
    a.refusal = SandboxGone(id);
    return a;
  }
  if (!ConstantTimeEquals(req.Header("x-access-token"), rec->access_token))
    return refuse(401, "missing or wrong X-Access-Token");
  auto user = BasicUser(req.Header("authorization"));
  if (!user.ok()) return refuse(400, user.error().message());
  a.envd.emplace(Envd{std::move(*rec), *user});
  return a;
}

Api::Access Api::FilesAccess(const Request& req) const {
  Access a;
  std::string id = req.Header("e2b-sandbox-id");
  std::string sig = req.Query("signature");
  std::string op = req.method == "GET" ? "read" : "write";
  auto refuse = [&](const std::string& message) {
    a.refusal = Reply::Error(401, message);
    return a;
  };
  std::optional<int64_t> expiry;
  if (req.query.count("signature_expiration")) {
    std::string e = req.Query("signature_expiration");
    if (e.empty() || e.size() > 18 || e.find_first_not_of("0123456789") != std::string::npos)
      return refuse("invalid signature");
    expiry = std::stoll(e);
  }
  auto signed_by = [&](const SandboxRecord& r) {
    return !sig.empty() && ConstantTimeEquals(sig, FileSignature(req.Query("path"), op, req.Query("username"),
                                                                 r.access_token, expiry));
  };
  std::optional<SandboxRecord> rec;
  bool by_signature = false;
  if (id.empty()) {
    // A signed URL comes with no headers at all: its signature names the
    // sandbox.
    if (sig.empty()) return refuse("missing signature query parameter");
    rec = book_.Find(signed_by);
    if (!rec) return refuse("invalid signature");
    by_signature = true;
  } else {
    rec = book_.Get(id);
    if (!rec || !all_.TenantOf(id)) {
      a.refusal = SandboxGone(id);
      return a;
    }
    if (std::string token = req.Header("x-access-token"); !token.empty()) {
      if (!ConstantTimeEquals(token, rec->access_token)) return refuse("missing or wrong X-Access-Token");
    } else {
      if (sig.empty()) return refuse("missing signature query parameter");
      if (!signed_by(*rec)) return refuse("invalid signature");
      by_signature = true;
    }
  }
  if (by_signature && expiry && *expiry < NowUnixMillis() / 1000)
    return refuse("signature is already expired");
  if (!all_.TenantOf(rec->sandbox_id)) {
    a.refusal = SandboxGone(rec->sandbox_id);
    return a;
  }
  Envd e{std::move(*rec), {}};
  if (req.query.count("username")) {
    e.user = req.Query("username");
  } else if (auto user = BasicUser(req.Header("authorization")); user.ok()) {
    e.user = *user;
  }
  if (!IsUserName(e.user)) {
    a.refusal = Reply::Error(400, "username: not a user name");
    return a;
  }
  a.envd.emplace(std::move(e));
  return a;
}

void Api::ForwardPort(const Request& req, const std::string& body, ResponseWriter& out) {
  std::string id = req.Header("e2b-sandbox-id");
  std::string raw = req.Header("e2b-sandbox-port");
  uint32_t port = 0;
  bool digits = !raw.empty() && raw.size() <= 5 && raw.find_first_not_of("0123456789") == std::string::npos;
  if (digits) port = static_cast<uint32_t>(std::stoul(raw));
  if (port < 1 || port > 65535)
    return out.Send(ProxyError(id, 400, "E2b-Sandbox-Port: " + raw + " is not a port (1-65535)"));
  auto rec = book_.Get(id);
  // Only sandboxes created through this API; a paused one cannot answer.
  if (!rec || !all_.TenantOf(id) || IsPaused(all_, id)) return out.Send(SandboxGone(id));
  if (!rec->traffic_token.empty() &&
      !ConstantTimeEquals(req.Header("e2b-traffic-access-token"), rec->traffic_token))
    return out.Send(ProxyError(id, 403,
                               "missing or wrong E2B-Traffic-Access-Token (the sandbox's traffic is "
                               "private: network.allowPublicTraffic false)"));
  forwarder_.Forward(id, static_cast<uint16_t>(port), req, body, out);
}

void Api::Handle(const Request& req, const std::string& body, ResponseWriter& out) {
  if (IsForward(req)) return ForwardPort(req, body, out);
  if (req.root_level || (IsEnvd(req) && req.path == "/files")) {
    // A signed URL arrives at the root, without headers (FilesAccess).
    if (req.method != "GET") return out.Send(Reply::Error(405, "use GET or POST on /files"));
    Access files = FilesAccess(req);
    if (!files.envd) return out.Send(files.refusal);
    return FilesGet(*files.envd, req, out);
  }
  if (!IsEnvd(req)) return out.Send(Control(req, body));
  std::string id = req.Header("e2b-sandbox-id");
  if (req.method == "GET" && req.path == "/health") {
    // A paused sandbox answers as E2B's does: 502, isRunning() false.
    bool live = book_.Get(id) && all_.TenantOf(id) && !IsPaused(all_, id);
    return out.Send(live ? Reply::Empty(204) : SandboxGone(id));
  }
  bool is_rpc = req.method == "POST" && req.path.find('.') != std::string::npos;
  Access access = EnvdOf(req, is_rpc);
  if (!access.envd) return out.Send(access.refusal);
  const Envd& e = *access.envd;
  constexpr std::string_view kProcess = "/process.Process/", kFilesystem = "/filesystem.Filesystem/";
  if (req.method == "POST" && req.path.rfind(kProcess, 0) == 0)
    return ProcessRpc(e, req.path.substr(kProcess.size()), req, body, out);
  if (req.method == "POST" && req.path == "/filesystem.Filesystem/WatchDir")
    return WatchDirRpc(e, req, body, out);
  if (req.method == "POST" && req.path.rfind(kFilesystem, 0) == 0)
    return out.Send(FilesystemRpc(e, req.path.substr(kFilesystem.size()), body));
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
  if (m == "GET" && req.path == "/snapshots") return ListSnapshots(*svc, req);
  // E2B's snapshots are templates: the SDK's deleteSnapshot deletes one.
  if (auto tpl = TemplatePath(req.path); tpl && m == "DELETE") return DeleteSnapshot(*svc, *tpl);
  if (auto sp = SandboxPath(req.path)) {
    const auto& [id, rest] = *sp;
    if (m == "GET" && rest.empty()) return Info(*svc, id);
    if (m == "DELETE" && rest.empty()) return Kill(*svc, id);
    if (m == "POST" && rest == "/connect") return Connect(*svc, id, body);
    if (m == "POST" && rest == "/timeout") return SetTimeout(*svc, id, body);
    if (m == "POST" && rest == "/pause") return Pause(*svc, id, body);
    if (m == "POST" && rest == "/snapshots") return CreateSnapshot(*svc, id, body);
    if (m == "POST" && rest == "/fork") return Fork(*svc, id, body);
    if (m == "GET" && rest == "/metrics") return Metrics(*svc, id);
    if (rest == "/pause" || rest == "/resume" || rest == "/metrics" || rest == "/network" ||
        rest == "/refreshes")
      return Reply::Error(
          501, req.method + " " + req.path + ": not supported by skiff yet (docs/e2b.md#differences)");
  }
  return Reply::Error(404, "no such endpoint: " + req.method + " " + req.path);
}

}  // namespace skiff::e2b
