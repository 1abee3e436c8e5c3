// The E2B-compatible API (docs/e2b.md): the control plane (create, connect,
// list, info, timeout, kill, pause, snapshots, fork), each sandbox's envd
// (the process and filesystem Connect services, /files, /health) and the
// routing between them by E2B's headers. Transport-free: the HTTP session
// turns requests into Request values, runs Handle() on the worker a call to
// that sandbox runs on (TargetOf), and sends what the ResponseWriter
// receives. Every operation goes to skiff's own SandboxService, as the
// native API's do.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "e2b/exchange.h"
#include "e2b/polled_watchers.h"
#include "e2b/port_forward.h"
#include "e2b/sandbox_book.h"
#include "sandbox/service.h"

namespace skiff::e2b {

struct Options {
  // E2B template name -> skiff image; a template not listed is used as an
  // image name as it is.
  std::map<std::string, std::string> templates = {{"base", "base"},
                                                  {"code-interpreter-v1", "code-interpreter"}};
  uint64_t default_timeout_secs = 300;
  // A fork's lifetime when the request names none (E2B's default).
  uint64_t fork_default_timeout_secs = 15;
  uint64_t max_timeout_secs = 86400;
  std::optional<std::string> isolation;  // nullopt: the daemon's default
};

// The service an X-API-Key reaches (the caller's tenant with tenancy on),
// or null when the key is refused.
using KeyCheck = std::function<SandboxService*(std::string_view api_key)>;

class Api {
 public:
  // `all` serves envd traffic once the sandbox's access token checked out.
  Api(SandboxService& all, KeyCheck keys, Options options);
  ~Api();  // stops the lifetime timer
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Which sandbox's worker lane a request runs on (nullopt: the shared
  // pool), and whether it is a stream that may wait long (its own lane).
  struct Target {
    std::string sandbox_id;
    bool stop = false;
    bool stream = false;
  };
  std::optional<Target> TargetOf(const Request& req) const;
  // POST /files: the body is streamed to Upload() instead of read first.
  static bool IsUpload(const Request& req);
  // A root-level request the E2B API serves: a signed /files URL, which
  // the SDK builds without the /e2b prefix and fetches without headers.
  static bool IsSignedUrl(std::string_view path, const std::map<std::string, std::string>& query,
                          bool has_sandbox_header) {
    return path == "/files" && query.count("signature") && !has_sandbox_header;
  }
  // The largest body Handle() takes (the rest are refused with 413).
  static constexpr size_t kMaxBody = size_t{8} << 20;

  void Handle(const Request& req, const std::string& body, ResponseWriter& out);
  Reply Upload(const Request& req, const ByteSource& body);

  // Sandbox traffic for a port other than envd's (49983): forwarded to
  // that port inside the sandbox (docs/e2b.md#ports).
  static bool IsForward(const Request& req);
  // The forwarding itself, for another module that serves a port's
  // traffic its own way first.
  PortForwarder& forwarder() { return forwarder_; }

  // Stops every sandbox whose lifetime ended and removes idle polled
  // watchers (the timer calls it each second).
  void ExpireOnce(int64_t now_ms);

  // The sandbox an envd request reached, its record, and the user the
  // request acts as ("" for the sandbox's default), with envd's path rule:
  // a relative path resolves against that user's home directory.
  struct Envd {
    SandboxRecord record;
    std::string user;
    std::string Home() const { return user.empty() || user == "root" ? "/root" : "/home/" + user; }
    std::string Resolve(const std::string& path) const {
      if (!path.empty() && path[0] == '/') return path;
      if (path.empty() || path == ".") return Home();
      return Home() + "/" + path;
    }
  };

 private:
  Reply Control(const Request& req, const std::string& body);
  // The sandbox an envd request may reach, or the answer that refuses it.
  struct Access {
    std::optional<Envd> envd;
    Reply refusal;
  };
  // RPCs: the access token is required (refusals in Connect's shape when
  // `is_rpc`).
  Access EnvdOf(const Request& req, bool is_rpc) const;
  // /files: the access token, or a signature (docs/e2b.md#signed-urls).
  Access FilesAccess(const Request& req) const;

  // Control plane (control_plane.cc).
  Reply Create(SandboxService& svc, const std::string& body);
  Reply Connect(SandboxService& svc, const std::string& id, const std::string& body);
  Reply Info(SandboxService& svc, const std::string& id);
  Reply List(SandboxService& svc, const Request& req, bool v2);
  Reply Kill(SandboxService& svc, const std::string& id);
  Reply Pause(SandboxService& svc, const std::string& id, const std::string& raw);
  // getMetrics: one sample now (sandbox::metrics), whatever start/end ask.
  Reply Metrics(SandboxService& svc, const std::string& id);
  // Whether `id` is paused now (as `svc` lists it).
  static bool IsPaused(SandboxService& svc, const std::string& id);
  Reply SetTimeout(SandboxService& svc, const std::string& id, const std::string& body);
  std::optional<SandboxRecord> Live(SandboxService& svc, const std::string& id);
  // Books a sandbox skiff made for E2B (create, fork): a fresh access
  // token, a lifetime of `secs` from now, its shape as `svc` lists it.
  SandboxRecord Register(SandboxService& svc, SandboxRecord r, uint64_t secs);
  // Starts the services `created`'s image declares, each as a live process,
  // and runs its readiness check (bounded by its ready timeout).
  Status StartServices(SandboxService& svc, const CreateResult& created);

  // What a template ID names (templates.cc): an image, or one of the
  // caller's snapshots.
  struct Template {
    std::string image;                       // when no snapshot
    std::optional<std::string> snapshot_id;  // from this snapshot
  };
  Template TemplateOf(SandboxService& svc, const std::string& tpl) const;
  // Whether `name` names an image for E2B's create: an alias of the
  // template table or an image the catalog knows.
  bool NamesImage(SandboxService& svc, const std::string& name) const;

  // Snapshots (snapshots.cc) and fork (fork.cc).
  Reply CreateSnapshot(SandboxService& svc, const std::string& id, const std::string& body);
  Reply ListSnapshots(SandboxService& svc, const Request& req);
  Reply DeleteSnapshot(SandboxService& svc, const std::string& ref);
  Reply Fork(SandboxService& svc, const std::string& id, const std::string& body);

  // envd (envd_process.cc, envd_filesystem.cc, envd_files.cc).
  void ProcessRpc(const Envd& e, const std::string& method, const Request& req, const std::string& body,
                  ResponseWriter& out);
  Reply FilesystemRpc(const Envd& e, const std::string& method, const std::string& body);
  // Filesystem.WatchDir, streamed (envd_watch.cc).
  void WatchDirRpc(const Envd& e, const Request& req, const std::string& body, ResponseWriter& out);
  void FilesGet(const Envd& e, const Request& req, ResponseWriter& out);
  // A port's traffic: the sandbox must be an E2B sandbox that runs (and,
  // when its create asked for private traffic, the traffic token must
  // match).
  void ForwardPort(const Request& req, const std::string& body, ResponseWriter& out);

  SandboxService& all_;
  KeyCheck keys_;
  Options options_;
  SandboxBook book_;
  PortForwarder forwarder_{all_};
  // CreateWatcher's watchers (polled_watchers.h); idle ones expire with the timer.
  PolledWatchers watchers_{all_};

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace skiff::e2b
