// `skiff fs OP ID ARGS...`: filesystem operations in a sandbox of the
// daemon (one `sandbox::fs::OP` call each; read/write stream the file).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"
#include "cli/file_transfer.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

struct FsFlags {
  ClientFlags client;
  std::string op, sandbox_id, mode;
  std::vector<std::string> args;
  bool parents = false, recursive = false, overwrite = false, ignore_case = false;
};

// The answer of `op` for a person: ls and grep as lines, the rest as JSON.
void PrintFsResult(const std::string& op, const json& r) {
  if (op == "ls") {
    for (const auto& e : r.value("entries", json::array())) {
      std::printf("%s %10s %s%s\n", e.value("mode", "").c_str(),
                  std::to_string(e.value("size", uint64_t{0})).c_str(), e.value("name", "").c_str(),
                  e.value("is_dir", false)       ? "/"
                  : e.value("is_symlink", false) ? "@"
                                                 : "");
    }
  } else if (op == "grep") {
    for (const auto& m : r.value("matches", json::array())) {
      std::printf("%s:%s:%s\n", m.value("path", "").c_str(), std::to_string(m.value("line", 0)).c_str(),
                  m.value("content", "").c_str());
    }
  } else {
    std::printf("%s\n", r.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  }
}

int Fs(const FsFlags& f) {
  const std::string& op = f.op;
  auto wrong_count = [&](size_t n) {
    if (f.args.size() == n) return false;
    std::fprintf(stderr, "skiff fs %s: expected %zu argument(s)\n", op.c_str(), n);
    return true;
  };
  if (op == "read")
    return wrong_count(1) ? kExitSkiffError : Download(f.client, f.sandbox_id, f.args[0], "-");
  if (op == "write") {
    return wrong_count(1) ? kExitSkiffError
                          : Upload(f.client, "-", f.sandbox_id, f.args[0], f.parents, f.mode);
  }
  json p = {{"sandbox_id", f.sandbox_id}};
  if (op == "ls" || op == "stat" || op == "rm" || op == "mkdir") {
    if (wrong_count(1)) return kExitSkiffError;
    p["path"] = f.args[0];
    if (op == "rm") p["recursive"] = f.recursive;
    if (op == "mkdir") {
      p["parents"] = f.parents;
      if (!f.mode.empty()) p["mode"] = f.mode;
    }
  } else if (op == "chmod") {
    if (wrong_count(2)) return kExitSkiffError;
    p["mode"] = f.args[0];
    p["path"] = f.args[1];
    p["recursive"] = f.recursive;
  } else if (op == "mv") {
    if (wrong_count(2)) return kExitSkiffError;
    p["src"] = f.args[0];
    p["dst"] = f.args[1];
    p["overwrite"] = f.overwrite;
  } else if (op == "grep") {
    if (wrong_count(2)) return kExitSkiffError;
    p["pattern"] = f.args[0];
    p["path"] = f.args[1];
    p["ignore_case"] = f.ignore_case;
  } else if (op == "sed") {
    if (wrong_count(3)) return kExitSkiffError;
    p["pattern"] = f.args[0];
    p["replacement"] = f.args[1];
    p["path"] = f.args[2];
  } else {
    std::fprintf(stderr, "skiff fs: unknown operation '%s'\n", op.c_str());
    return kExitSkiffError;
  }
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::fs::" + op, p, &rc);
  if (!r) return rc;
  if (f.client.json_out)
    std::printf("%s\n", api::Dump(*r).c_str());
  else
    PrintFsResult(op, *r);
  return rc;
}

}  // namespace

void AddFsCommand(CLI::App& app, int& rc) {
  auto* fs = app.add_subcommand("fs", "filesystem operations: skiff fs OP ID ARGS...");
  auto f = std::make_shared<FsFlags>();
  AddClientFlags(fs, f->client);
  fs->add_option("op", f->op, "ls | stat | mkdir | rm | chmod | mv | read | write | grep | sed")->required();
  fs->add_option("sandbox", f->sandbox_id)->required();
  fs->add_option("args", f->args,
                 "ls/stat/mkdir/rm/read/write PATH; chmod MODE PATH; mv SRC DST; grep PATTERN PATH; "
                 "sed PATTERN REPLACEMENT PATH");
  fs->add_flag("-p,--parents", f->parents);
  fs->add_flag("-r,--recursive", f->recursive);
  fs->add_flag("--overwrite", f->overwrite);
  fs->add_flag("-i,--ignore-case", f->ignore_case);
  fs->add_option("--mode", f->mode);
  fs->callback([f, &rc] { rc = Fs(*f); });
}

}  // namespace skiff::cli
