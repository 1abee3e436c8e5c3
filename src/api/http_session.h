// One HTTP connection: header read, auth, routing through the route table,
// the function endpoints, /v1/sandboxes/{id}/files streams and the WebSocket
// upgrades that hand the connection to a WebSocket session.
#pragma once

#include <fcntl.h>

#include <array>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/channel_session.h"
#include "api/e2b_exchange.h"
#include "api/engine_session.h"
#include "api/file_transfer.h"
#include "api/openapi.h"
#include "api/otel_session.h"
#include "api/router.h"
#include "api/server_impl.h"
#include "api/tty_session.h"
#include "base/peer_hangup.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "functions/decode.h"
#include "functions/errors.h"
#include "functions/process_output_lines.h"
#include "functions/run_output_lines.h"

namespace skiff::api {

template <class Protocol>
class HttpSession : public std::enable_shared_from_this<HttpSession<Protocol>> {
  using Stream = beast::basic_stream<Protocol>;

 public:
  HttpSession(Server::Impl& srv, typename Protocol::socket&& sock, ConnectionSlot slot)
      : srv_(srv), stream_(std::move(sock)), slot_(std::move(slot)) {}

  void Start() { ReadHeader(); }

 private:
  void ReadHeader() {
    hp_.emplace();
    hp_->header_limit(64 * 1024);
    hp_->body_limit(std::numeric_limits<std::uint64_t>::max());  // each route sets its own limit
    stream_.expires_after(kHeaderDeadline);
    auto self = this->shared_from_this();
    http::async_read_header(stream_, buf_, *hp_,
                            [self](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
          ec == net::error::operation_aborted || ec == net::error::eof ||
          ec == net::error::connection_reset) {
        return Close();
      }
      keep_alive_ = false;
      return SendJson(http::status::bad_request,
                      {{"code", "bad_request"}, {"message", "malformed HTTP request: " + ec.message()}});
    }
    stream_.expires_never();
    auto& req = hp_->get();
    keep_alive_ = req.keep_alive();
    auto target = SplitTarget(std::string_view(req.target().data(), req.target().size()));
    if (!target) {
      return SendError(http::status::bad_request, InvalidRequest("malformed request target"));
    }
    auto query = ParseQuery(target->query);
    if (!query) return SendError(http::status::bad_request, InvalidRequest("malformed query string"));
    query_ = std::move(*query);
    // The E2B-compatible API has its own authentication (docs/e2b.md#auth).
    // A sandbox host name routes to that sandbox whatever the path.
    if (auto routed = SandboxHostOf(req)) return E2bBegin(target->path, false, &*routed);
    if (IsE2bPath(target->path)) return E2bBegin(target->path, false);
    if (e2b::Api::IsSignedUrl(target->path, query_, req.count("e2b-sandbox-id") > 0))
      return E2bBegin(target->path, true);
    Dispatch d = RouteRequest(req.method(), target->path);
    route_ = RouteMatch{d.route, d.param, d.param2};
    std::string_view auth(req[http::field::authorization].data(), req[http::field::authorization].size());
    // /healthz and the API's description need no key.
    bool is_health = d.outcome == Dispatch::Outcome::kFound &&
                     (d.handler == Handler::kHealthz || d.handler == Handler::kOpenApi);
    bool upgrade = websocket::is_upgrade(req);
    caller_ = is_health ? nullptr : srv_.Authorized(auth, upgrade ? &query_ : nullptr);
    if (!is_health && !caller_) {
      auto res = MakeJson(
          http::status::unauthorized,
          {{"code", "unauthorized"}, {"message", "missing or wrong bearer token (Authorization: Bearer …)"}});
      res->set(http::field::www_authenticate, "Bearer");
      keep_alive_ = false;
      return Write(res);
    }
    if (d.outcome == Dispatch::Outcome::kNotFound) {
      return SendJson(http::status::not_found,
                      {{"code", "not_found"}, {"message", "no such endpoint: " + target->path}});
    }
    if (d.outcome == Dispatch::Outcome::kMethodNotAllowed) {
      auto res =
          MakeJson(http::status::method_not_allowed,
                   {{"code", "method_not_allowed"},
                    {"message", std::string(req.method_string()) + " is not allowed here; use " + d.allow}});
      res->set(http::field::allow, d.allow);
      keep_alive_ = false;  // an unread body may follow
      return Write(res);
    }
    switch (d.handler) {
      case Handler::kUpgrade:
        if (!upgrade) {
          return SendJson(http::status::upgrade_required,
                          {{"code", "upgrade_required"}, {"message", "this endpoint speaks WebSocket"}});
        }
        return Upgrade(route_);
      case Handler::kHealthz: {
        json h = srv_.Health();
        return SendJson(h["status"] == "ok" ? http::status::ok : http::status::service_unavailable, h);
      }
      case Handler::kMetrics: {
        auto res = std::make_shared<http::response<http::string_body>>(http::status::ok, req.version());
        res->set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res->body() = srv_.MetricsText();
        return Write(res);
      }
      case Handler::kOpenApi: {
        auto res = std::make_shared<http::response<http::string_body>>(http::status::ok, req.version());
        res->set(http::field::content_type, "application/json");
        res->body() = OpenApiText();
        return Write(res);
      }
      case Handler::kFunctionList:
        return FunctionList();
      case Handler::kFunctionInfo:
        return FunctionInfo(route_.param);
      case Handler::kFunctionCall:
        return ReadCallBody();
      case Handler::kFileGet:
        return FileGet();
      case Handler::kFilePut:
        return FilePut();
      case Handler::kProcessOutput:
        return ProcessOutputGet();
      case Handler::kRunStream:
        run_stream_ = true;
        return ReadCallBody();
    }
  }

  // ---------------------------------------------------------- responses

  std::shared_ptr<http::response<http::string_body>> MakeJson(http::status st, const json& body) {
    auto res = std::make_shared<http::response<http::string_body>>(st, 11);
    res->set(http::field::server, "skiffd/" + Version());
    res->set(http::field::content_type, "application/json");
    res->body() = Dump(body);
    return res;
  }
  void SendJson(http::status st, const json& body) { Write(MakeJson(st, body)); }
  void SendJsonStatus(int st, const json& body) { Write(MakeJson(static_cast<http::status>(st), body)); }
  void SendError(http::status st, const Error& e) { SendJson(st, srv_.ErrorBody(e)); }
  void SendError(const Error& e) { SendJsonStatus(HttpStatus(e.code()), srv_.ErrorBody(e)); }

  using Response = http::response<http::string_body>;
  using Serializer = http::response_serializer<http::string_body>;

  void Write(const std::shared_ptr<Response>& res) {
    res->keep_alive(keep_alive_);
    res->prepare_payload();
    WriteSome(res, std::make_shared<Serializer>(*res));
  }
  // The response goes out write by write, each within kWriteStall: a client
  // that stops reading loses the connection, and the response is freed.
  void WriteSome(std::shared_ptr<Response> res, std::shared_ptr<Serializer> sr) {
    stream_.expires_after(kWriteStall);
    auto self = this->shared_from_this();
    http::async_write_some(stream_, *sr, [self, res, sr](beast::error_code ec, size_t) {
      if (ec) {
        if (ec == beast::error::timeout) SKIFF_LOG_LIMITED(Info) << "http: client stopped reading; closed";
        beast::error_code ignored;
        self->stream_.socket().close(ignored);
        return;
      }
      if (!sr->is_done()) return self->WriteSome(res, sr);
      self->stream_.expires_never();
      if (!self->keep_alive_) return self->Close();
      self->ReadHeader();
    });
  }

  void Close() {
    beast::error_code ec;
    if (no_drain_) {
      if (up_.reading) {
        // Finish when the pending read returns.
        close_after_read_ = true;
        no_drain_ = false;
        stream_.socket().shutdown(Protocol::socket::shutdown_both, ec);
        return;
      }
      stream_.socket().close(ec);
      return;
    }
    stream_.socket().shutdown(Protocol::socket::shutdown_send, ec);
    // Drain what the client still sends for a moment so the kernel does not
    // answer it with a reset that would destroy our response in flight.
    auto self = this->shared_from_this();
    auto drain = std::make_shared<std::array<char, 16384>>();
    stream_.expires_after(std::chrono::seconds(2));
    DrainLoop(drain, 0);
  }
  void DrainLoop(std::shared_ptr<std::array<char, 16384>> drain, size_t total) {
    auto self = this->shared_from_this();
    stream_.async_read_some(net::buffer(*drain), [self, drain, total](beast::error_code ec, size_t n) {
      if (ec || total + n > (64u << 20)) {
        beast::error_code ignored;
        self->stream_.socket().close(ignored);
        return;
      }
      self->DrainLoop(drain, total + n);
    });
  }

  // Any thread: touches no session state.
  std::shared_ptr<Response> Invocation2Response(const Invocation& inv) {
    int st = inv.http_status();
    auto status = static_cast<http::status>(st);
    if (inv.result) return MakeJson(http::status::ok, *inv.result);
    if (inv.error) return MakeJson(status, srv_.ErrorBody(*inv.error));
    if (inv.engine_error) return MakeJson(status, inv.engine_error->ToJson());
    return MakeJson(http::status::ok, nullptr);
  }

  // Runs a call on the pool, encodes its answer there (the result's JSON is
  // freed before the answer is queued) and writes it on the event loop.
  void CallAsync(std::string id, json payload) {
    auto self = this->shared_from_this();
    auto target = CallTargetOf(id, payload);
    SandboxService* caller = caller_;
    // The answer is written once the call's lane slot is free again.
    auto res = std::make_shared<std::shared_ptr<Response>>();
    Status queued = srv_.Dispatch(
        target, *caller,
        [self, caller, id, res, payload = std::move(payload)]() {
          {
            Invocation inv = self->srv_.Call(id, payload, &self->srv_.broker, *caller);
            *res = self->Invocation2Response(inv);
          }
          Server::Impl::ReturnFreedMemory((*res)->body().size());
        },
        [self, res]() {
          if (*res) net::post(self->stream_.get_executor(), [self, r = *res]() { self->Write(r); });
        });
    if (!queued.ok()) {
      srv_.metrics.FunctionCall(id, std::string(CodeName(queued.error().code())));
      Invocation inv;
      inv.error = std::move(queued).error();
      Write(Invocation2Response(inv));
    }
  }

  // ---------------------------------------------------------- functions

  void FunctionList() {
    json p = json::object();
    if (auto it = query_.find("prefix"); it != query_.end()) p["prefix"] = it->second;
    if (auto it = query_.find("search"); it != query_.end()) p["search"] = it->second;
    if (auto it = query_.find("include_internal"); it != query_.end()) {
      p["include_internal"] = it->second == "true" || it->second == "1";
    }
    CallAsync("engine::functions::list", std::move(p));
  }

  void FunctionInfo(const std::string& id) {
    if (!FindFunction(id)) return NotProvided(id);
    CallAsync("engine::functions::info", json{{"function_id", id}});
  }

  void NotProvided(const std::string& id) {
    EngineFault f = EngineFault::FunctionNotFound(id);
    SendJsonStatus(f.http_status(), f.ToJson());
  }

  void MaybeContinue(const std::function<void()>& next) {
    auto& req = hp_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto res = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      auto self = this->shared_from_this();
      http::async_write(stream_, *res, [self, res, next](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        next();
      });
      return;
    }
    next();
  }

  void ReadCallBody() {
    auto& req = hp_->get();
    if (auto cl = hp_->content_length(); cl && *cl > kMaxPayloadBytes) {
      return TooLarge();
    }
    (void)req;
    auto self = this->shared_from_this();
    MaybeContinue([self]() {
      self->bp_.emplace(std::move(*self->hp_));
      self->bp_->body_limit(kMaxPayloadBytes);
      self->ReserveBodyRoom();
      self->stream_.expires_after(std::chrono::seconds(120));
      http::async_read(self->stream_, self->buf_, *self->bp_,
                       [self](beast::error_code ec, size_t) { self->OnCallBody(ec); });
    });
  }

  // Room for Beast to read a body in large pieces (it reads only as much as
  // the connection buffer has room for, at least 512 bytes at a time);
  // given back once the body is in (ShrinkBodyRoom).
  void ReserveBodyRoom() {
    if (buf_.capacity() - buf_.size() < kBodyReadPiece) buf_.reserve(buf_.size() + kBodyReadPiece);
  }
  static constexpr size_t kBodyReadPiece = size_t{64} * 1024;

  void TooLarge() {
    keep_alive_ = false;
    SendJson(http::status::payload_too_large,
             srv_.ErrorBody(InvalidRequest("payload exceeds the 32 MiB limit")));
  }

  void OnCallBody(beast::error_code ec) {
    stream_.expires_never();
    buf_.shrink_to_fit();
    if (ec == http::error::body_limit) return TooLarge();
    if (ec) {
      keep_alive_ = false;
      if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof) {
        return Close();
      }
      return SendError(http::status::bad_request,
                       InvalidRequest("payload could not be read: " + ec.message()));
    }
    std::string body = std::move(bp_->get().body());
    keep_alive_ = bp_->get().keep_alive();
    std::string id = route_.param;
    bp_.reset();
    bool run_stream = std::exchange(run_stream_, false);
    if (!run_stream && !FindFunction(id)) return NotProvided(id);
    auto payload = ParsePayload(body);
    body.clear();
    body.shrink_to_fit();
    if (!payload.ok()) return SendError(http::status::bad_request, payload.error());
    if (run_stream) return RunStream(std::move(*payload));
    CallAsync(std::move(id), std::move(*payload));
  }

  // POST /v1/run (docs/api.md#run-stream): sandbox::run whose output is
  // written as NDJSON lines as it arrives (functions/run_output_lines.h).
  // An error before the start line (a bad request, a failed create) is an
  // ordinary error response; after it, an "error" line ends the stream. The
  // sandbox is stopped when the run ends, and when the client goes away
  // (a write fails, or the connection shows the client's hang-up: asked at
  // each piece of output and once a second meanwhile). Runs
  // on the pool, as sandbox::run does; the channel's bound and the write
  // stall keep a slow reader from making the daemon buffer.
  void RunStream(json payload) {
    auto ch = std::make_shared<Channel>(16);
    auto failure = std::make_shared<std::optional<Error>>();
    dl_.Begin(ch, failure);
    SandboxService* caller = caller_;
    auto self = this->shared_from_this();
    // The connection as the pool thread watches it for the client's
    // hang-up (a copy: the session may close its own meanwhile).
    auto peer = std::make_shared<UniqueFd>(::fcntl(stream_.socket().native_handle(), F_DUPFD_CLOEXEC, 0));
    if (!peer->valid()) {
      // Without the copy a departed client would go unnoticed while the
      // command is quiet: refuse the run before it starts, saying why.
      *failure = Error::Sys(Code::kS300, "fcntl(F_DUPFD_CLOEXEC)", "the run's connection", errno);
      ch->Abort(failure->value().message());
      PumpDownload();
      return;
    }
    Status queued = srv_.Dispatch(
        std::nullopt, *caller, [self, caller, ch, failure, peer, payload = std::move(payload)]() {
          auto spec = fn::DecodeRun(payload);
          if (!spec.ok()) {
            self->srv_.metrics.FunctionCall("sandbox::run", std::string(CodeName(spec.error().code())));
            *failure = spec.error();
            ch->Abort(spec.error().message());
            return;
          }
          bool header_sent = false;
          fn::RunOutputLines lines(
              [&](std::string_view line) {
                if (!header_sent) {
                  header_sent =
                      ch->PushBlocking(Frame{false, Dump(json{{"content_type", "application/x-ndjson"}})})
                          .ok();
                  if (!header_sent) return false;
                }
                return ch->PushBlocking(Frame{true, std::string(line)}).ok();
              },
              [&] { return !ch->Finished() && !PeerHungUp(peer->get()); });
          // Counted as the function call it is.
          Result<ExecResult> r = caller->Run(*spec, &lines);
          self->srv_.metrics.FunctionCall("sandbox::run",
                                          r.ok() ? "ok" : std::string(CodeName(r.error().code())));
          if (!lines.started()) {  // nothing was sent: an ordinary error response
            *failure = r.ok() ? Error(Code::kS300, "the run ended before it started") : r.error();
            ch->Abort(failure->value().message());
            return;
          }
          if (r.ok()) {
            (void)lines.End(*r);
          } else {
            (void)lines.Fail(ErrorToWire(r.error(), self->srv_.config.docs_base));
          }
          ch->CloseWrite();
        });
    if (!queued.ok()) {
      *failure = queued.error();
      ch->Abort(queued.error().message());
    }
    PumpDownload();
  }

  // ---------------------------------------------------------- files

  // Shared request-only checks for GET/PUT files (the first three steps of the check order,
  // docs/api.md#conventions).
  Result<std::pair<std::string, std::string>> FileTarget() {
    auto sid = CanonicalUuid(route_.param);
    auto it = query_.find("path");
    if (it == query_.end()) return InvalidRequest("missing required field 'path' (expected string)");
    const std::string& path = it->second;
    if (path.empty()) return InvalidRequest("path: must not be empty");
    if (path.find('\0') != std::string::npos) return InvalidRequest("path: contains a NUL byte");
    if (!sid) return InvalidRequest("sandbox_id: not a UUID: " + route_.param);
    return std::make_pair(*sid, path);
  }

  void FileGet() {
    auto t = FileTarget();
    if (!t.ok()) return SendError(t.error());
    auto ch = std::make_shared<Channel>(16);
    auto failure = std::make_shared<std::optional<Error>>();
    auto self = this->shared_from_this();
    std::string sid = t->first, path = t->second;
    dl_.Begin(ch, failure);
    SandboxService* caller = caller_;
    Status queued = srv_.Dispatch(CallTarget{sid}, *caller, [self, caller, ch, failure, sid, path]() {
      bool meta_sent = false;
      Status st = SandboxAccess(*caller).ReadFile(
          sid, path,
          [&](const FsReadMeta& m) {
            json meta = {{"size", m.size}, {"mode", m.mode}, {"mtime", m.mtime}};
            meta_sent = ch->PushBlocking(Frame{false, Dump(meta)}).ok();
          },
          [&](std::string_view bytes) -> bool {
            while (!bytes.empty()) {
              size_t n = std::min(bytes.size(), kChannelChunk);
              if (!ch->PushBlocking(Frame{true, std::string(bytes.substr(0, n))}).ok()) {
                return false;
              }
              bytes.remove_prefix(n);
            }
            return true;
          });
      if (st.ok()) {
        ch->CloseWrite();
      } else {
        *failure = st.error();
        ch->Abort(st.error().message());
      }
      (void)meta_sent;
    });
    if (!queued.ok()) {
      *failure = queued.error();
      ch->Abort(queued.error().message());
    }
    PumpDownload();
  }

  // GET /v1/sandboxes/{id}/processes/{pid}/output?stdout_from=&stderr_from=&follow=
  // (docs/api.md#process-output-stream): the process's output as NDJSON
  // lines (functions/process_output_lines.h), each flushed as a chunk when
  // it arrives. An error before the first line is an ordinary error
  // response; after it, an "error" line ends the stream. Runs on the
  // sandbox's stream lane, so a follower never holds the sandbox's calls;
  // the channel's bound and the write stall keep a slow reader from making
  // the daemon buffer.
  void ProcessOutputGet() {
    auto sid = CanonicalUuid(route_.param);
    proto::ProcOutputRequest req;
    auto pid = ParseDecimal(route_.param2, INT32_MAX);
    if (!pid || *pid == 0) return SendError(InvalidRequest("pid: not a process id: " + route_.param2));
    req.pid = *pid;
    for (const char* key : {"stdout_from", "stderr_from"}) {
      auto it = query_.find(key);
      if (it == query_.end()) continue;
      auto v = ParseDecimal(it->second, INT64_MAX);
      if (!v) return SendError(InvalidRequest(std::string(key) + ": expected an integer >= 0"));
      (std::string_view(key) == "stdout_from" ? req.stdout_from : req.stderr_from) = *v;
    }
    if (auto it = query_.find("follow"); it != query_.end()) {
      if (it->second != "true" && it->second != "false")
        return SendError(InvalidRequest("follow: expected true or false, got " + it->second));
      req.follow = it->second == "true";
    }
    if (!sid) return SendError(InvalidRequest("sandbox_id: not a UUID: " + route_.param));
    auto ch = std::make_shared<Channel>(16);
    auto failure = std::make_shared<std::optional<Error>>();
    dl_.Begin(ch, failure);
    SandboxService* caller = caller_;
    std::string id = *sid;
    std::string docs_base = srv_.config.docs_base;
    CallTarget target{id, false, true};
    Status queued = srv_.Dispatch(target, *caller, [caller, ch, failure, id, req, docs_base]() {
      bool started = false;
      auto push = [&](std::string_view line) {
        return ch->PushBlocking(Frame{true, std::string(line)}).ok();
      };
      fn::ProcessOutputLines lines(
          [&](std::string_view line) {
            if (!started) {
              started =
                  ch->PushBlocking(Frame{false, Dump(json{{"content_type", "application/x-ndjson"}})}).ok();
              if (!started) return false;
            }
            return push(line);
          },
          [&] { return !ch->Finished(); });
      auto info = caller->ProcessOutput(id, req, lines);
      if (!started) {  // nothing was sent: an ordinary error response
        *failure = info.ok() ? Error(Code::kS300, "process output ended before it started") : info.error();
        ch->Abort(failure->value().message());
        return;
      }
      if (info.ok()) {
        (void)lines.End(*info);
      } else {
        (void)lines.Fail(ErrorToWire(info.error(), docs_base));
      }
      ch->CloseWrite();
    });
    if (!queued.ok()) {
      *failure = queued.error();
      ch->Abort(queued.error().message());
    }
    PumpDownload();
  }

  void PumpDownload() {
    Frame f;
    auto self = this->shared_from_this();
    switch (dl_.ch->TryPop(&f)) {
      case Channel::Pop::kEmpty:
        dl_.ch->OnReadable(
            [self]() { net::post(self->stream_.get_executor(), [self]() { self->PumpDownload(); }); });
        return;
      case Channel::Pop::kAborted:
        if (!dl_.header_sent) {
          dl_.ch->ReaderGone();
          if (*dl_.failure) return SendError(**dl_.failure);
          return SendError(Error(Code::kS216, "fs i/o error: download failed"));
        }
        // Mid-transfer: cut the connection without the final chunk.
        {
          beast::error_code ec;
          stream_.socket().close(ec);
        }
        return;
      case Channel::Pop::kEof: {
        if (!dl_.header_sent) {  // no meta: should not happen; answer cleanly
          return SendError(Error(Code::kS216, "fs i/o error: no file metadata"));
        }
        if (!dl_.chunked) {  // the body's length was told: it is complete
          dl_.ch.reset();
          if (!keep_alive_) return Close();
          return ReadHeader();
        }
        stream_.expires_after(kWriteStall);
        net::async_write(stream_, http::make_chunk_last(), [self](beast::error_code ec, size_t) {
          self->stream_.expires_never();
          self->dl_.ch.reset();
          if (ec || !self->keep_alive_) return self->Close();
          self->ReadHeader();
        });
        return;
      }
      case Channel::Pop::kFrame:
        break;
    }
    if (!f.binary) {
      json meta = json::parse(f.data, nullptr, false);
      dl_.res.emplace(http::status::ok, 11);
      dl_.res->set(http::field::server, "skiffd/" + Version());
      if (meta.contains("status")) {  // an E2B answer (ChannelResponseWriter)
        int status = meta.value("status", 200);
        dl_.res->result(static_cast<unsigned>(status));
        if (std::string ct = meta.value("content_type", std::string()); !ct.empty())
          dl_.res->set(http::field::content_type, ct);
        // Repeated headers stay repeated (a forwarded answer's Set-Cookie);
        // a forwarded Server replaces skiffd's.
        for (const auto& h : meta["headers"]) {
          const std::string& name = h[0].get_ref<const std::string&>();
          if (beast::iequals(name, "server")) {
            dl_.res->set(http::field::server, h[1].get<std::string>());
          } else {
            dl_.res->insert(name, h[1].get<std::string>());
          }
        }
        if (meta.contains("length")) {
          dl_.res->content_length(meta["length"].get<uint64_t>());
          dl_.chunked = false;
        } else if (status == 204 || status == 304) {
          dl_.chunked = false;
        }
      } else if (meta.contains("content_type")) {  // a stream of lines (ProcessOutputGet)
        dl_.res->set(http::field::content_type, meta.value("content_type", std::string()));
        dl_.res->set(http::field::cache_control, "no-store");
      } else {  // a file (FileGet)
        dl_.res->set(http::field::content_type, "application/octet-stream");
        dl_.res->set("X-Skiff-Size", std::to_string(meta.value("size", uint64_t{0})));
        dl_.res->set("X-Skiff-Mode", meta.value("mode", std::string("0000")));
        dl_.res->set("X-Skiff-Mtime", std::to_string(meta.value("mtime", int64_t{0})));
      }
      dl_.res->keep_alive(keep_alive_);
      if (dl_.chunked) dl_.res->chunked(true);
      dl_.sr.emplace(*dl_.res);
      stream_.expires_after(kWriteStall);
      http::async_write_header(stream_, *dl_.sr, [self](beast::error_code ec, size_t) {
        self->stream_.expires_never();
        if (ec) {
          self->dl_.ch->ReaderGone();
          return self->Close();
        }
        self->dl_.header_sent = true;
        self->PumpDownload();
      });
      return;
    }
    auto data = std::make_shared<std::string>(std::move(f.data));
    // A reader that stalls for kWriteStall loses the download (and frees the
    // pool thread that feeds it).
    stream_.expires_after(kWriteStall);
    auto written = [self, data](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      if (ec) {
        self->dl_.ch->ReaderGone();
        beast::error_code ignored;
        self->stream_.socket().close(ignored);
        return;
      }
      self->PumpDownload();
    };
    if (dl_.chunked) {
      net::async_write(stream_, http::make_chunk(net::buffer(*data)), std::move(written));
    } else {
      net::async_write(stream_, net::buffer(*data), std::move(written));
    }
  }

  void FilePut() {
    auto t = FileTarget();
    uint32_t mode = 0644;
    bool parents = false;
    if (t.ok()) {
      if (auto it = query_.find("parents"); it != query_.end()) {
        if (it->second == "true")
          parents = true;
        else if (it->second == "false")
          parents = false;
        else
          t = InvalidRequest("parents: expected true or false, got " + it->second);
      }
    }
    if (t.ok()) {
      if (auto it = query_.find("mode"); it != query_.end()) {
        auto m = ParseModeString(it->second);
        if (!m)
          t = Error(Code::kS210, "invalid octal mode: " + it->second);
        else
          mode = *m;
      }
    }
    if (!t.ok()) {
      keep_alive_ = false;  // the body stays unread
      return SendError(t.error());
    }
    auto ch = std::make_shared<Channel>(16);
    up_.Begin(ch);
    std::string sid = t->first, path = t->second;
    auto self = this->shared_from_this();
    // The call starts only after any 100-continue went out, so the early
    // error answer of a failing call never overlaps another write.
    SandboxService* caller = caller_;
    MaybeContinue([self, caller, ch, sid, path, mode, parents]() {
      Status queued =
          self->srv_.Dispatch(CallTarget{sid}, *caller, [self, caller, ch, sid, path, mode, parents]() {
            struct Guard {
              std::shared_ptr<Channel> ch;
              ~Guard() { ch->ReaderGone(); }
            } guard{ch};
            auto res = SandboxAccess(*caller).WriteFile(sid, path, mode, parents, BodySource(ch));
            ch->ReaderGone();
            net::post(self->stream_.get_executor(), [self, res = std::move(res)]() mutable {
              self->up_.result.emplace(std::move(res));
              self->MaybeFinishPut();
            });
          });
      if (!queued.ok()) {  // refused: the body is read and dropped, then the error answers
        ch->ReaderGone();
        self->up_.result.emplace(std::move(queued).error());
      }
      self->up_.parser.emplace(std::move(*self->hp_));
      self->up_.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      self->up_.buf.resize(kChannelChunk);
      self->ReadUpload();
    });
  }

  // An upload's body as the worker pulls it from the channel.
  static ByteSource BodySource(const std::shared_ptr<Channel>& ch) {
    return [ch]() -> Result<std::string> {
      while (true) {
        auto r = ch->PopBlocking(kPutStall);
        if (!r.ok()) {
          Error e = std::move(r).error();
          return Error(Code::kS218, e.message());
        }
        if (!r->has_value()) return std::string();
        if ((*r)->data.empty()) continue;
        return std::move((*r)->data);
      }
    };
  }

  void ReadUpload() {
    if (up_.done) return;
    auto& p = *up_.parser;
    if (p.is_done()) {
      up_.done = true;
      up_.ch->CloseWrite();
      return MaybeFinishPut();
    }
    p.get().body().data = up_.buf.data();
    p.get().body().size = up_.buf.size();
    // Beast reads as much as the connection buffer has room for, at least
    // 512 bytes: without room, a 100 MiB upload took 200,000 reads of 512
    // bytes (and as many 512-byte frames to the agent), ~100 MB/s.
    if (buf_.capacity() - buf_.size() < up_.buf.size()) buf_.reserve(buf_.size() + up_.buf.size());
    stream_.expires_after(kPutStall);
    auto self = this->shared_from_this();
    up_.reading = true;
    http::async_read_some(stream_, buf_, p, [self](beast::error_code ec, size_t) {
      self->up_.reading = false;
      self->stream_.expires_never();
      if (self->up_.answered) {
        // Answered early; the connection is being torn down.
        if (self->close_after_read_) self->Close();
        return;
      }
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        self->up_.done = true;
        self->keep_alive_ = false;
        if (ec == beast::error::timeout) {
          self->up_.ch->Abort("no upload data for 30 s");
        } else {
          self->up_.ch->Abort("upload ended abnormally: " + ec.message());
        }
        return self->MaybeFinishPut();
      }
      size_t n = self->up_.buf.size() - self->up_.parser->get().body().size;
      if (n == 0) return self->ReadUpload();
      self->PushUpload(Frame{true, std::string(self->up_.buf.data(), n)});
    });
  }

  void PushUpload(Frame f) {
    switch (up_.ch->TryPush(std::move(f))) {
      case Channel::Push::kOk:
        return ReadUpload();
      case Channel::Push::kClosed:
        // The writer side finished early (an error): stop reading the body.
        up_.done = true;
        keep_alive_ = false;
        return MaybeFinishPut();
      case Channel::Push::kFull: {
        auto self = this->shared_from_this();
        // NOLINTNEXTLINE(bugprone-use-after-move): TryPush leaves `f` untouched on kFull (channels.h).
        auto held = std::make_shared<Frame>(std::move(f));
        up_.ch->OnWritable([self, held]() {
          net::post(self->stream_.get_executor(), [self, held]() { self->PushUpload(std::move(*held)); });
        });
        return;
      }
    }
  }

  void MaybeFinishPut() {
    if (!up_.result || up_.answered) return;
    if (!up_.done) {
      // The call ended before the body did (e.g. S002): answer now and drop
      // the connection rather than read the rest.
      keep_alive_ = false;
      up_.done = true;
    }
    up_.answered = true;
    buf_.shrink_to_fit();  // an idle connection keeps no upload-sized buffer
    auto res = std::move(*up_.result);
    up_.result.reset();
    if (up_.reading) {
      // A body read is still pending: answer, then close once it returns
      // (never two reads at once on the stream).
      no_drain_ = true;
    }
    if (e2b_reply_) {
      e2b::Reply r = std::move(*e2b_reply_);
      e2b_reply_.reset();
      return SendE2b(r);
    }
    if (res.ok()) return SendJson(http::status::ok, *res);
    SendError(res.error());
  }

  // ---------------------------------------------------------- E2B

  // An E2B upload is read from the socket in pieces this large: a 64 KiB
  // piece cost one thread handoff per 64 KiB, which held 100 MiB uploads
  // to ~80 MB/s.
  static constexpr size_t kE2bUploadPiece = size_t{256} * 1024;

  // A request under /e2b (docs/e2b.md): its body is read (an upload's is
  // streamed to the worker), the API runs on the lane of the sandbox it
  // names, and its answer comes back through the download channel.
  void E2bBegin(std::string_view path, bool root_level, const e2b::SandboxHost* route = nullptr) {
    e2b_ = std::make_shared<e2b::Request>(E2bRequestOf(hp_->get(), path, query_, root_level, route));
    if (e2b::Api::IsUpload(*e2b_)) return E2bUpload();
    if (auto cl = hp_->content_length(); cl && *cl > e2b::Api::kMaxBody) return E2bTooLarge();
    auto self = this->shared_from_this();
    MaybeContinue([self]() {
      self->bp_.emplace(std::move(*self->hp_));
      self->bp_->body_limit(e2b::Api::kMaxBody);
      self->ReserveBodyRoom();
      self->stream_.expires_after(std::chrono::seconds(120));
      http::async_read(self->stream_, self->buf_, *self->bp_,
                       [self](beast::error_code ec, size_t) { self->OnE2bBody(ec); });
    });
  }

  void E2bTooLarge() {
    keep_alive_ = false;
    SendE2b(
        e2b::Reply::Error(413, "the request body exceeds " + std::to_string(e2b::Api::kMaxBody) + " bytes"));
  }

  void SendE2b(const e2b::Reply& r) {
    auto res = std::make_shared<Response>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "skiffd/" + Version());
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res->set(k, v);
    res->body() = r.body;
    Write(res);
  }

  std::optional<CallTarget> E2bTarget() const {
    auto t = srv_.e2b->TargetOf(*e2b_);
    if (!t) return std::nullopt;
    return CallTarget{t->sandbox_id, t->stop, t->stream};
  }

  void OnE2bBody(beast::error_code ec) {
    stream_.expires_never();
    buf_.shrink_to_fit();
    if (ec == http::error::body_limit) return E2bTooLarge();
    if (ec) {
      keep_alive_ = false;
      if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof)
        return Close();
      return SendE2b(e2b::Reply::Error(400, "the request body could not be read: " + ec.message()));
    }
    auto body = std::make_shared<std::string>(std::move(bp_->get().body()));
    keep_alive_ = bp_->get().keep_alive();
    bp_.reset();
    auto ch = std::make_shared<Channel>(16);
    dl_.Begin(ch, std::make_shared<std::optional<Error>>(Error(Code::kS300, "the E2B call gave no answer")));
    e2b::Api* api = srv_.e2b.get();
    auto req = e2b_;
    Status queued = srv_.Dispatch(E2bTarget(), srv_.manager, [api, req, body, ch]() {
      ChannelResponseWriter out(ch);
      try {
        api->Handle(*req, *body, out);
      } catch (const std::exception& e) {
        // Never a connection left waiting for an answer that will not come.
        SKIFF_LOG_LIMITED(Error) << "e2b: " << req->method << " " << req->path << ": " << e.what();
        out.Drop();
      }
      out.Finish();
    });
    if (!queued.ok()) {
      ch->ReaderGone();
      return SendE2b(e2b::Reply::Error(429, queued.error().message()));
    }
    PumpDownload();
  }

  void E2bUpload() {
    auto ch = std::make_shared<Channel>(16);
    up_.Begin(ch);
    auto self = this->shared_from_this();
    MaybeContinue([self, ch]() {
      e2b::Api* api = self->srv_.e2b.get();
      auto req = self->e2b_;
      Status queued = self->srv_.Dispatch(self->E2bTarget(), self->srv_.manager, [self, api, req, ch]() {
        struct Guard {
          std::shared_ptr<Channel> ch;
          ~Guard() { ch->ReaderGone(); }
        } guard{ch};
        auto reply = std::make_shared<e2b::Reply>();
        try {
          *reply = api->Upload(*req, BodySource(ch));
        } catch (const std::exception& e) {
          SKIFF_LOG_LIMITED(Error) << "e2b upload: " << e.what();
          *reply = e2b::Reply::Error(500, "the upload failed inside skiffd");
        }
        ch->ReaderGone();
        net::post(self->stream_.get_executor(), [self, reply]() {
          self->e2b_reply_ = std::move(*reply);
          self->up_.result.emplace(json());
          self->MaybeFinishPut();
        });
      });
      if (!queued.ok()) {
        ch->ReaderGone();
        self->e2b_reply_ = e2b::Reply::Error(429, queued.error().message());
        self->up_.result.emplace(json());
      }
      self->up_.parser.emplace(std::move(*self->hp_));
      self->up_.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      self->up_.buf.resize(kE2bUploadPiece);
      self->ReadUpload();
    });
  }

  // ---------------------------------------------------------- upgrades

  // GET /v1/sandboxes/{id}/processes/{pid}/tty?from=N (WebSocket): the
  // request is checked here (an HTTP error); the process's existence is
  // the session's first answer (an error message, then close).
  void TtyUpgrade(http::request<http::empty_body> req) {
    auto sid = CanonicalUuid(route_.param);
    keep_alive_ = false;
    auto pid = ParseDecimal(route_.param2, INT32_MAX);
    if (!pid || *pid == 0) return SendError(InvalidRequest("pid: not a process id: " + route_.param2));
    int64_t from = 0;
    if (auto it = query_.find("from"); it != query_.end()) {
      auto v = ParseDecimal(it->second, INT64_MAX);
      if (!v) return SendError(InvalidRequest("from: expected an integer >= 0"));
      from = *v;
    }
    if (!sid) return SendError(InvalidRequest("sandbox_id: not a UUID: " + route_.param));
    auto s = std::make_shared<TtySession<Protocol>>(srv_, std::move(stream_), *caller_, *sid, *pid, from);
    s->Hold(std::move(slot_));
    s->Accept(std::move(req));
  }

  void Upgrade(const RouteMatch& rm) {
    http::request<http::empty_body> req = hp_->release();
    if (rm.route == Route::kEngine) {
      if (srv_.config.engine_url) {
        return SendJson(
            http::status::not_found,
            {{"code", "not_found"}, {"message", "worker mode: the engine protocol is served by the engine"}});
      }
      // The connection authenticates once: its calls act as this key's.
      auto s = std::make_shared<EngineSession<Protocol>>(srv_, std::move(stream_), *caller_);
      s->Hold(std::move(slot_));
      return s->Accept(std::move(req));
    }
    if (rm.route == Route::kProcessTty) return TtyUpgrade(std::move(req));
    if (rm.route == Route::kOtel) {
      auto s = std::make_shared<DiscardSession<Protocol>>(srv_, std::move(stream_));
      s->Hold(std::move(slot_));
      return s->Accept(std::move(req));
    }
    auto key = query_.count("key") ? query_["key"] : "";
    auto dir = query_.count("dir") ? query_["dir"] : "";
    auto att = srv_.broker.Attach(rm.param, key, dir);
    if (att.http_status != 200) {
      const char* what = att.http_status == 400   ? "dir must be read or write"
                         : att.http_status == 409 ? "that side of the channel is already attached"
                                                  : "unknown channel or wrong key";
      keep_alive_ = false;
      return SendJsonStatus(att.http_status, {{"code", att.http_status == 409   ? "conflict"
                                                       : att.http_status == 400 ? "bad_request"
                                                                                : "not_found"},
                                              {"message", what}});
    }
    auto s =
        std::make_shared<ChannelSession<Protocol>>(srv_, std::move(stream_), att.channel, dir == "write");
    s->Hold(std::move(slot_));
    s->Accept(std::move(req));
  }

  Server::Impl& srv_;
  Stream stream_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::empty_body>> hp_;
  std::optional<http::request_parser<http::string_body>> bp_;
  std::map<std::string, std::string> query_;
  RouteMatch route_;
  bool run_stream_ = false;  // the body being read is POST /v1/run's
  // The current request's service (Server::Impl::Authorized): its key's
  // view of the sandboxes. Null only for /healthz, which reaches none.
  SandboxService* caller_ = nullptr;
  bool keep_alive_ = true;
  FileDownload dl_;
  FileUpload up_;
  std::shared_ptr<e2b::Request> e2b_;    // the current E2B request
  std::optional<e2b::Reply> e2b_reply_;  // an E2B upload's answer
  bool no_drain_ = false;
  bool close_after_read_ = false;
  ConnectionSlot slot_;
};

}  // namespace skiff::api
