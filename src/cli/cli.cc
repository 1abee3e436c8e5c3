#include "cli/cli.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <thread>

#include "api/http_util.h"
#include "api/server.h"
#include "base/log.h"
#include "base/text.h"
#include "cli/client.h"
#include "cli/image_cmd.h"
#include "functions/registry.h"
#include "sandbox/config.h"
#include "sandbox/manager.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

void WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    s.remove_prefix(static_cast<size_t>(n));
  }
}

// Prints an error object (spec §5.1) the way a person wants to read it and
// returns the exit status for it.
int ReportErrorObject(const json& err) {
  std::string code = err.value("code", std::string("error"));
  std::string msg = err.value("message", std::string());
  std::fprintf(stderr, "skiff: %s: %s\n", code.c_str(), msg.c_str());
  if (err.contains("fix_note") && err["fix_note"].is_string()) {
    std::fprintf(stderr, "  hint: %s\n", err["fix_note"].get<std::string>().c_str());
  }
  if (err.contains("fix") && err["fix"].is_object() && !err["fix"].contains("context")) {
    std::fprintf(stderr, "  fix: %s\n", api::Dump(err["fix"]).c_str());
  }
  if (err.contains("details") && err["details"].is_object()) {
    const json& d = err["details"];
    if (d.contains("stdout") && d["stdout"].is_string()) WriteAll(1, d["stdout"].get<std::string>());
    if (d.contains("stderr") && d["stderr"].is_string()) WriteAll(2, d["stderr"].get<std::string>());
  }
  return code == "S200" ? kExitTimeout : kExitSkiffError;
}

int ReportError(const Error& e) { return ReportErrorObject(ErrorToWire(e, "docs/errors.md")); }

bool ParseEnv(const std::vector<std::string>& in, Env* out) {
  for (const auto& kv : in) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "skiff: --env takes NAME=value, got '%s'\n", kv.c_str());
      return false;
    }
    out->emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return true;
}

// ------------------------------------------------------------ embedded run

class TerminalSink : public OutputSink {
 public:
  void OnStdout(std::string_view b) override { WriteAll(1, b); }
  void OnStderr(std::string_view b) override { WriteAll(2, b); }
};

int g_sig_pipe[2] = {-1, -1};
void OnSig(int sig) {
  // Async-signal-safe: only write(2).
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_sig_pipe[1], &b, 1);
}

struct RunOptions {
  std::string image;
  std::vector<std::string> command;
  std::string lang, code, file;
  std::optional<uint64_t> timeout_ms;
  std::vector<std::string> env;
  std::string isolation;
  std::optional<uint32_t> cpus, memory_mb;
  bool network = false;
  bool json_out = false;
};

int EmbeddedRun(RunOptions& o) {
  if (!o.file.empty()) {
    std::FILE* f = std::fopen(o.file.c_str(), "rb");
    if (!f) {
      std::fprintf(stderr, "skiff: cannot read %s: %s\n", o.file.c_str(), std::strerror(errno));
      return kExitSkiffError;
    }
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) o.code.append(buf, n);
    std::fclose(f);
    if (o.lang.empty()) {
      auto dot = o.file.rfind('.');
      std::string ext = dot == std::string::npos ? "" : o.file.substr(dot + 1);
      o.lang = ext == "py" ? "python" : ext == "js" ? "node" : ext == "sh" ? "shell" : ext;
    }
  }
  bool code_mode = !o.lang.empty() || !o.code.empty();
  if (code_mode && !o.command.empty()) {
    std::fprintf(stderr, "skiff: give either a command after -- or --lang/--code/--file\n");
    return kExitSkiffError;
  }
  if (!code_mode && o.command.empty()) {
    std::fprintf(stderr, "skiff: nothing to run: give a command after --, or --lang with --code/--file\n");
    return kExitSkiffError;
  }
  if (code_mode && o.lang.empty()) {
    std::fprintf(stderr, "skiff: --code needs --lang (python, node, shell, bash, or a program)\n");
    return kExitSkiffError;
  }
  if (o.image.empty()) {
    o.image = (o.lang == "python" || o.lang == "py") ? "python"
              : (o.lang == "node" || o.lang == "js" || o.lang == "javascript") ? "node"
                                                                               : "base";
  }
  Env env;
  if (!ParseEnv(o.env, &env)) return kExitSkiffError;

  Config config;
  config.allow_all_images = true;  // embedded: the caller is the operator
  // A jail run builds (probes, cleans up after) only the jail backend, not
  // the microVM one it will not use.
  if (o.isolation == "jail") config.isolation = o.isolation;
  auto mgr = SandboxManager::FromConfig(config);
  if (!mgr.ok()) return ReportError(mgr.error());
  SandboxManager& manager = **mgr;

  // Ctrl-C / SIGTERM: stop the sandbox (every sandbox of this process),
  // then exit 130.
  if (::pipe2(g_sig_pipe, O_CLOEXEC) == 0) {
    struct sigaction sa = {};
    sa.sa_handler = OnSig;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    std::thread([&manager]() {
      unsigned char sig;
      while (::read(g_sig_pipe[0], &sig, 1) < 0 && errno == EINTR) {
      }
      std::fprintf(stderr, "\nskiff: interrupted; stopping the sandbox\n");
      manager.Shutdown();
      ::_exit(kExitInterrupted);
    }).detach();
  }

  CreateSpec cs;
  cs.image = o.image;
  cs.env = env;
  cs.cpus = o.cpus;
  cs.memory_mb = o.memory_mb;
  cs.network = o.network;
  if (!o.isolation.empty()) cs.isolation = o.isolation;
  TerminalSink sink;
  Result<ExecResult> r = Error(Code::kS300, "unreachable");
  if (code_mode) {
    RunSpec rs;
    rs.create = cs;
    rs.code = o.code;
    rs.lang = o.lang;
    rs.timeout_ms = o.timeout_ms;
    r = manager.Run(rs, o.json_out ? nullptr : &sink);
  } else {
    auto created = manager.Create(cs);
    if (!created.ok()) return ReportError(created.error());
    ExecSpec es;
    es.sandbox_id = created->sandbox_id;
    es.argv = o.command;
    es.env = env;
    es.timeout_ms = o.timeout_ms;
    r = manager.Exec(es, o.json_out ? nullptr : &sink);
    (void)manager.Stop(created->sandbox_id, /*wait=*/true);
  }
  if (!r.ok()) {
    int rc = ReportError(r.error());
    manager.Shutdown();
    return rc;
  }
  if (o.json_out) std::printf("%s\n", api::Dump(r->ToJson()).c_str());
  manager.Shutdown();
  return r->exit_code;
}

// ------------------------------------------------------------ daemon clients

struct ClientOpts {
  std::string url;
  bool json_out = false;
};

std::string FunctionPath(const std::string& id) { return "/v1/functions/" + id; }

// Calls a function; on success prints nothing and returns the result.
std::optional<json> CallFn(const ClientOpts& co, const std::string& id, const json& payload,
                           int* rc) {
  auto ep = FindDaemon(co.url, /*autostart=*/true);
  if (!ep.ok()) {
    *rc = ReportError(ep.error());
    return std::nullopt;
  }
  Client c(*ep);
  auto r = c.Post(FunctionPath(id), api::Dump(payload));
  if (!r.ok()) {
    *rc = ReportError(r.error());
    return std::nullopt;
  }
  json body = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    if (co.json_out) std::printf("%s\n", r->body.c_str());
    *rc = body.is_object() ? (co.json_out ? (body.value("code", "") == "S200" ? kExitTimeout
                                                                               : kExitSkiffError)
                                          : ReportErrorObject(body))
                           : kExitSkiffError;
    if (!body.is_object()) {
      std::fprintf(stderr, "skiff: HTTP %ld: %s\n", r->status, r->body.c_str());
    }
    return std::nullopt;
  }
  *rc = 0;
  return body;
}

std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string AgeText(int64_t secs) {
  if (secs < 120) return std::to_string(secs) + "s";
  if (secs < 7200) return std::to_string(secs / 60) + "m";
  return std::to_string(secs / 3600) + "h";
}

int PrintExecResult(const ClientOpts& co, const json& r) {
  if (co.json_out) {
    std::printf("%s\n", api::Dump(r).c_str());
  } else {
    WriteAll(1, r.value("stdout", std::string()));
    WriteAll(2, r.value("stderr", std::string()));
    if (r.value("stdout_truncated", false)) std::fprintf(stderr, "skiff: stdout was truncated at 1 MiB\n");
    if (r.value("stderr_truncated", false)) std::fprintf(stderr, "skiff: stderr was truncated at 1 MiB\n");
  }
  int code = r.value("exit_code", 0);
  return code < 0 ? kExitSkiffError : code;
}

// "ID:PATH" -> {id, path}; nullopt for a local path.
std::optional<std::pair<std::string, std::string>> RemoteSpec(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  std::string id = s.substr(0, colon);
  if (!CanonicalUuid(id)) return std::nullopt;
  return std::make_pair(id, s.substr(colon + 1));
}

std::string FilesPath(const std::string& id, const std::string& path, const std::string& extra = "") {
  return "/v1/sandboxes/" + api::PercentEncode(id) + "/files?path=" + api::PercentEncode(path) +
         extra;
}

int ReportHttpBody(const ClientOpts& co, const HttpResponse& r) {
  json body = json::parse(r.body, nullptr, false);
  if (co.json_out) std::printf("%s\n", r.body.c_str());
  if (body.is_object()) return co.json_out ? kExitSkiffError : ReportErrorObject(body);
  std::fprintf(stderr, "skiff: HTTP %ld\n", r.status);
  return kExitSkiffError;
}

int Download(const ClientOpts& co, const std::string& id, const std::string& path,
             const std::string& local) {
  auto ep = FindDaemon(co.url, true);
  if (!ep.ok()) return ReportError(ep.error());
  std::FILE* out = local == "-" ? stdout : std::fopen((local + ".skiff-part").c_str(), "wb");
  if (!out) {
    std::fprintf(stderr, "skiff: cannot write %s: %s\n", local.c_str(), std::strerror(errno));
    return kExitSkiffError;
  }
  Client c(*ep);
  auto r = c.Download(FilesPath(id, path), out);
  if (out != stdout) std::fclose(out);
  bool ok = r.ok() && r->status == 200;
  if (local != "-") {
    std::string part = local + ".skiff-part";
    if (ok) {
      if (std::rename(part.c_str(), local.c_str()) != 0) {
        std::fprintf(stderr, "skiff: rename to %s: %s\n", local.c_str(), std::strerror(errno));
        return kExitSkiffError;
      }
    } else {
      std::remove(part.c_str());
    }
  }
  if (!r.ok()) return ReportError(r.error());
  if (r->status != 200) return ReportHttpBody(co, *r);
  return 0;
}

int Upload(const ClientOpts& co, const std::string& local, const std::string& id,
           const std::string& path, bool parents, const std::string& mode) {
  auto ep = FindDaemon(co.url, true);
  if (!ep.ok()) return ReportError(ep.error());
  std::FILE* in = local == "-" ? stdin : std::fopen(local.c_str(), "rb");
  if (!in) {
    std::fprintf(stderr, "skiff: cannot read %s: %s\n", local.c_str(), std::strerror(errno));
    return kExitSkiffError;
  }
  std::string extra = parents ? "&parents=true" : "";
  if (!mode.empty()) extra += "&mode=" + api::PercentEncode(mode);
  Client c(*ep);
  auto r = c.Upload(FilesPath(id, path, extra), in);
  if (in != stdin) std::fclose(in);
  if (!r.ok()) return ReportError(r.error());
  if (r->status != 200) return ReportHttpBody(co, *r);
  if (co.json_out) std::printf("%s\n", r->body.c_str());
  return 0;
}

void PrintDoctor(const json& d, int indent) {
  for (auto it = d.begin(); it != d.end(); ++it) {
    std::string pad(static_cast<size_t>(indent), ' ');
    if (it->is_object()) {
      std::printf("%s%s:\n", pad.c_str(), it.key().c_str());
      PrintDoctor(*it, indent + 2);
    } else if (it->is_array() && !it->empty() && (*it)[0].is_object()) {
      std::printf("%s%s:\n", pad.c_str(), it.key().c_str());
      for (const auto& e : *it) std::printf("%s  - %s\n", pad.c_str(), api::Dump(e).c_str());
    } else {
      std::string v = it->is_string() ? it->get<std::string>() : api::Dump(*it);
      std::printf("%s%-22s %s\n", pad.c_str(), (it.key() + ":").c_str(), v.c_str());
    }
  }
}

}  // namespace

int Main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"skiff: run untrusted code in short-lived sandboxes"};
  app.require_subcommand(1);
  ClientOpts co;
  auto add_client = [&co](CLI::App* sc) {
    sc->add_option("--url", co.url,
                   "daemon address: http://HOST:PORT or unix:PATH (default: SKIFF_URL, the user "
                   "socket, then 127.0.0.1:49134)");
    sc->add_flag("--json", co.json_out, "print the JSON response");
  };
  int rc = 0;

  // serve
  auto* serve = app.add_subcommand("serve", "run the daemon (skiffd) in the foreground");
  std::optional<uint32_t> port;
  std::string config_file, socket_path, engine_url;
  serve->add_option("--port", port, "listen port (overrides listen_port; 0 = any free port)");
  serve->add_option("--config", config_file, "YAML configuration file");
  serve->add_option("--socket", socket_path, "also listen on this unix socket");
  serve->add_option("--engine", engine_url, "worker mode: join the iii engine at this ws:// URL");
  serve->callback([&]() {
    Config config;
    if (!config_file.empty()) {
      auto c = LoadConfigFile(config_file);
      if (!c.ok()) {
        std::fprintf(stderr, "skiff serve: %s\n", c.error().message().c_str());
        rc = kExitConfig;
        return;
      }
      config = std::move(*c);
    }
    if (port) {
      if (*port > 65535) {
        std::fprintf(stderr, "skiff serve: --port: out of range\n");
        rc = kExitConfig;
        return;
      }
      config.listen_port = static_cast<uint16_t>(*port);
    }
    if (!socket_path.empty()) config.unix_socket = socket_path;
    if (!engine_url.empty()) {
      if (engine_url.rfind("ws://", 0) != 0 || engine_url.size() <= 5) {  // no TLS: no wss://
        std::fprintf(stderr, "skiff serve: --engine: expected a ws:// URL\n");
        rc = kExitConfig;
        return;
      }
      config.engine_url = engine_url;
    }
    rc = api::RunDaemon(std::move(config));
  });

  // run
  auto* run = app.add_subcommand("run", "run a command or code in a fresh sandbox (no daemon needed)");
  RunOptions ro;
  run->add_option("image", ro.image, "catalog image (default from --lang: python, node, else base)");
  run->add_option("command", ro.command, "the command and its arguments, after --");
  run->add_option("--lang", ro.lang, "python | node | shell | bash | <program>: run --code/--file");
  run->add_option("--code", ro.code, "source text to run with --lang");
  run->add_option("--file", ro.file, "a script file to run (language from its extension)");
  run->add_option("--timeout-ms", ro.timeout_ms, "exec timeout in ms (default 300000)");
  // One NAME=value per --env: a greedy vector option would also swallow
  // the "--" that starts the command.
  run->add_option("--env", ro.env, "NAME=value (repeatable)")->allow_extra_args(false);
  run->add_option("--isolation", ro.isolation, "microvm | jail (default: auto)");
  run->add_option("--cpus", ro.cpus, "vCPUs / CPU quota");
  run->add_option("--memory-mb", ro.memory_mb, "memory limit in MiB");
  run->add_flag("--network", ro.network, "give the sandbox public network egress");
  run->add_flag("--json", ro.json_out, "print the exec response as JSON instead of streaming");
  run->callback([&]() { rc = EmbeddedRun(ro); });

  // doctor
  auto* doctor = app.add_subcommand("doctor", "what this host offers and what isolation auto picks");
  bool doctor_json = false;
  doctor->add_flag("--json", doctor_json, "print JSON");
  doctor->callback([&]() {
    Config config;
    config.allow_all_images = true;
    auto mgr = SandboxManager::FromConfig(config);
    if (!mgr.ok()) {
      std::fprintf(stderr, "skiff doctor: no isolation backend works here: %s\n",
                   mgr.error().message().c_str());
      rc = 1;
      return;
    }
    json d = (*mgr)->Doctor();
    if (doctor_json) {
      std::printf("%s\n", d.dump(2).c_str());
    } else {
      PrintDoctor(d, 0);
      std::printf("\nisolation 'auto' picks: %s\n", (*mgr)->default_isolation().c_str());
    }
    (*mgr)->Shutdown();
  });

  // version
  auto* version = app.add_subcommand("version", "print the version");
  version->callback([&]() { std::printf("skiff %s\n", api::Version().c_str()); });

  // create
  auto* create = app.add_subcommand("create", "create a sandbox on the daemon; prints its id");
  add_client(create);
  std::string c_image, c_name, c_iso;
  std::optional<uint32_t> c_cpus, c_mem;
  std::optional<uint64_t> c_idle;
  bool c_net = false;
  std::vector<std::string> c_env;
  create->add_option("image", c_image, "catalog image")->required();
  create->add_option("--name", c_name, "a label for the sandbox");
  create->add_option("--cpus", c_cpus);
  create->add_option("--memory-mb", c_mem);
  create->add_option("--idle-timeout", c_idle, "seconds of idleness before the reaper stops it");
  create->add_option("--isolation", c_iso, "microvm | jail");
  create->add_option("--env", c_env, "NAME=value (repeatable)")->allow_extra_args(false);
  create->add_flag("--network", c_net);
  create->callback([&]() {
    json p = {{"image", c_image}};
    if (!c_name.empty()) p["name"] = c_name;
    if (c_cpus) p["cpus"] = *c_cpus;
    if (c_mem) p["memory_mb"] = *c_mem;
    if (c_idle) p["idle_timeout_secs"] = *c_idle;
    if (!c_iso.empty()) p["isolation"] = c_iso;
    if (c_net) p["network"] = true;
    if (!c_env.empty()) p["env"] = c_env;
    auto r = CallFn(co, "sandbox::create", p, &rc);
    if (!r) return;
    if (co.json_out) std::printf("%s\n", api::Dump(*r).c_str());
    else std::printf("%s\n", r->value("sandbox_id", std::string()).c_str());
  });

  // exec
  auto* exec = app.add_subcommand("exec", "run a command in a sandbox: skiff exec ID -- CMD [ARGS]");
  add_client(exec);
  std::string e_id, e_workdir;
  std::vector<std::string> e_cmd, e_env;
  std::optional<uint64_t> e_timeout;
  exec->add_option("sandbox", e_id)->required();
  exec->add_option("command", e_cmd)->required();
  exec->add_option("--timeout-ms", e_timeout);
  exec->add_option("--workdir", e_workdir);
  exec->add_option("--env", e_env, "NAME=value (repeatable)")->allow_extra_args(false);
  exec->callback([&]() {
    json p = {{"sandbox_id", e_id}, {"argv", e_cmd}};
    if (e_timeout) p["timeout_ms"] = *e_timeout;
    if (!e_workdir.empty()) p["workdir"] = e_workdir;
    if (!e_env.empty()) p["env"] = e_env;
    auto r = CallFn(co, "sandbox::exec", p, &rc);
    if (r) rc = PrintExecResult(co, *r);
  });

  // ls
  auto* ls = app.add_subcommand("ls", "list sandboxes");
  add_client(ls);
  ls->callback([&]() {
    auto r = CallFn(co, "sandbox::list", json::object(), &rc);
    if (!r) return;
    if (co.json_out) {
      std::printf("%s\n", api::Dump(*r).c_str());
      return;
    }
    std::printf("%s%s%s%s%s%s\n", Pad("SANDBOX", 38).c_str(), Pad("NAME", 16).c_str(),
                Pad("IMAGE", 10).c_str(), Pad("ISOLATION", 10).c_str(), Pad("AGE", 7).c_str(),
                "EXECS");
    for (const auto& s : r->value("sandboxes", json::array())) {
      std::string name = s.contains("name") && s["name"].is_string() ? s["name"].get<std::string>() : "-";
      std::printf("%s%s%s%s%s%s\n", Pad(s.value("sandbox_id", ""), 38).c_str(), Pad(name, 16).c_str(),
                  Pad(s.value("image", ""), 10).c_str(), Pad(s.value("isolation", ""), 10).c_str(),
                  Pad(AgeText(s.value("age_secs", int64_t{0})), 7).c_str(),
                  std::to_string(s.value("exec_in_flight", 0)).c_str());
    }
  });

  // stop
  auto* stop = app.add_subcommand("stop", "stop sandboxes");
  add_client(stop);
  std::vector<std::string> s_ids;
  bool s_nowait = false;
  stop->add_option("sandbox", s_ids)->required();
  stop->add_flag("--no-wait", s_nowait, "return before the sandbox is fully gone");
  stop->callback([&]() {
    for (const auto& id : s_ids) {
      int one = 0;
      auto r = CallFn(co, "sandbox::stop", {{"sandbox_id", id}, {"wait", !s_nowait}}, &one);
      if (!r) rc = one;
      else if (co.json_out) std::printf("%s\n", api::Dump(*r).c_str());
    }
  });

  // catalog
  auto* catalog = app.add_subcommand("catalog", "list the images sandboxes can start from");
  add_client(catalog);
  catalog->callback([&]() {
    auto r = CallFn(co, "sandbox::catalog::list", json::object(), &rc);
    if (!r) return;
    if (co.json_out) {
      std::printf("%s\n", api::Dump(*r).c_str());
      return;
    }
    std::printf("%s%s%s%s\n", Pad("IMAGE", 12).c_str(), Pad("ALLOWED", 9).c_str(),
                Pad("INSTALLED", 11).c_str(), "REFERENCE");
    for (const auto& e : r->value("images", json::array())) {
      std::printf("%s%s%s%s\n", Pad(e.value("name", ""), 12).c_str(),
                  Pad(e.value("allowed", false) ? "yes" : "no", 9).c_str(),
                  Pad(e.value("installed", false) ? "yes" : "no", 11).c_str(),
                  e.value("oci_ref", e.value("image", std::string())).c_str());
    }
  });

  // cp
  auto* cp = app.add_subcommand("cp", "copy files: skiff cp LOCAL ID:PATH | skiff cp ID:PATH LOCAL ('-' = stdin/stdout)");
  add_client(cp);
  std::string cp_src, cp_dst, cp_mode;
  bool cp_parents = false;
  cp->add_option("src", cp_src)->required();
  cp->add_option("dst", cp_dst)->required();
  cp->add_flag("-p,--parents", cp_parents, "create missing parent directories in the sandbox");
  cp->add_option("--mode", cp_mode, "octal mode of the uploaded file (default 0644)");
  cp->callback([&]() {
    auto rs = RemoteSpec(cp_src), rd = RemoteSpec(cp_dst);
    if (rs && !rd) rc = Download(co, rs->first, rs->second, cp_dst);
    else if (rd && !rs) rc = Upload(co, cp_src, rd->first, rd->second, cp_parents, cp_mode);
    else {
      std::fprintf(stderr, "skiff cp: exactly one side must be SANDBOX_ID:PATH\n");
      rc = kExitSkiffError;
    }
  });

  // fs
  auto* fs = app.add_subcommand("fs", "filesystem operations: skiff fs OP ID ARGS...");
  add_client(fs);
  std::string f_op, f_id, f_mode;
  std::vector<std::string> f_args;
  bool f_parents = false, f_recursive = false, f_overwrite = false, f_icase = false;
  fs->add_option("op", f_op, "ls | stat | mkdir | rm | chmod | mv | read | write | grep | sed")->required();
  fs->add_option("sandbox", f_id)->required();
  fs->add_option("args", f_args,
                 "ls/stat/mkdir/rm/read/write PATH; chmod MODE PATH; mv SRC DST; grep PATTERN PATH; "
                 "sed PATTERN REPLACEMENT PATH");
  fs->add_flag("-p,--parents", f_parents);
  fs->add_flag("-r,--recursive", f_recursive);
  fs->add_flag("--overwrite", f_overwrite);
  fs->add_flag("-i,--ignore-case", f_icase);
  fs->add_option("--mode", f_mode);
  fs->callback([&]() {
    auto need = [&](size_t n) {
      if (f_args.size() != n) {
        std::fprintf(stderr, "skiff fs %s: expected %zu argument(s)\n", f_op.c_str(), n);
        rc = kExitSkiffError;
        return false;
      }
      return true;
    };
    json p = {{"sandbox_id", f_id}};
    if (f_op == "read") {
      if (need(1)) rc = Download(co, f_id, f_args[0], "-");
      return;
    }
    if (f_op == "write") {
      if (need(1)) rc = Upload(co, "-", f_id, f_args[0], f_parents, f_mode);
      return;
    }
    if (f_op == "ls" || f_op == "stat" || f_op == "rm" || f_op == "mkdir") {
      if (!need(1)) return;
      p["path"] = f_args[0];
      if (f_op == "rm") p["recursive"] = f_recursive;
      if (f_op == "mkdir") {
        p["parents"] = f_parents;
        if (!f_mode.empty()) p["mode"] = f_mode;
      }
    } else if (f_op == "chmod") {
      if (!need(2)) return;
      p["mode"] = f_args[0];
      p["path"] = f_args[1];
      p["recursive"] = f_recursive;
    } else if (f_op == "mv") {
      if (!need(2)) return;
      p["src"] = f_args[0];
      p["dst"] = f_args[1];
      p["overwrite"] = f_overwrite;
    } else if (f_op == "grep") {
      if (!need(2)) return;
      p["pattern"] = f_args[0];
      p["path"] = f_args[1];
      p["ignore_case"] = f_icase;
    } else if (f_op == "sed") {
      if (!need(3)) return;
      p["pattern"] = f_args[0];
      p["replacement"] = f_args[1];
      p["path"] = f_args[2];
    } else {
      std::fprintf(stderr, "skiff fs: unknown operation '%s'\n", f_op.c_str());
      rc = kExitSkiffError;
      return;
    }
    auto r = CallFn(co, "sandbox::fs::" + f_op, p, &rc);
    if (!r) return;
    if (co.json_out) {
      std::printf("%s\n", api::Dump(*r).c_str());
    } else if (f_op == "ls") {
      for (const auto& e : r->value("entries", json::array())) {
        std::printf("%s %10s %s%s\n", e.value("mode", "").c_str(),
                    std::to_string(e.value("size", uint64_t{0})).c_str(), e.value("name", "").c_str(),
                    e.value("is_dir", false) ? "/" : e.value("is_symlink", false) ? "@" : "");
      }
    } else if (f_op == "grep") {
      for (const auto& m : r->value("matches", json::array())) {
        std::printf("%s:%s:%s\n", m.value("path", "").c_str(),
                    std::to_string(m.value("line", 0)).c_str(), m.value("content", "").c_str());
      }
    } else {
      std::printf("%s\n", r->dump(2, ' ', false, json::error_handler_t::replace).c_str());
    }
  });

  AddImageCommands(app, rc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitConfig;
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace skiff::cli
