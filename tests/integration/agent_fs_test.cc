// skiff-agent filesystem operations (docs/api.md#filesystem-rules-sandboxfs), run as PID 1 of a private
// namespace whose root is a tmpfs: every field, default and S-code, plus the
// escape attempts of the fs issue.
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "agent_harness.h"

namespace skiff::agent_test {
namespace {

class AgentFs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, mounts)";
    sb_ = AgentSandbox::Start();
    ASSERT_NE(sb_, nullptr);
  }
  Result<json> Op(const std::string& op, json req) {
    req["op"] = op;
    return sb_->Call(req);
  }
  void Put(const std::string& path, const std::string& bytes, json extra = json::object()) {
    auto r = sb_->Write(path, bytes, extra);
    ASSERT_TRUE(r.ok()) << path << ": " << r.error().ToString();
  }
  std::string Get(const std::string& path) {
    auto r = sb_->Read(path);
    EXPECT_TRUE(r.ok()) << path << ": " << (r.ok() ? "" : r.error().ToString());
    return r.ok() ? r->data : std::string();
  }
  std::unique_ptr<AgentSandbox> sb_;
};

// ------------------------------------------------------------------ watch

// The agent's open inotify instances, seen from the host.
int InotifyFds(pid_t pid) {
  int n = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string() == "anon_inode:inotify") ++n;
  }
  return n;
}

// The event lines of a watch stream until `want` of them came, or 10 s.
std::vector<json> WatchLines(proto::Stream& s, size_t want, std::string& partial) {
  std::vector<json> out;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (out.size() < want) {
    auto e = s.Next(deadline);
    if (!e || e->kind != proto::Event::Kind::kData) break;
    partial += e->data;
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1))
      out.push_back(json::parse(partial.substr(0, nl)));
  }
  return out;
}

TEST_F(AgentFs, WatchStreamsChangesUntilCancelled) {
  sb_->Sh("mkdir -p /wt/old");
  auto s = sb_->client().Open(json{{"op", "fs.watch"}, {"path", "/wt"}, {"recursive", true}});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->End(proto::kStdin).ok());
  auto meta = (*s)->Next(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(meta.has_value());
  ASSERT_EQ(meta->kind, proto::Event::Kind::kMeta) << meta->json.dump();
  // Through a process in the sandbox, as a program there changes files.
  sb_->Sh("echo hi > /wt/a.txt; mkdir /wt/new");
  std::string partial;
  auto first = WatchLines(**s, 3, partial);
  sb_->Sh("echo deep > /wt/new/b; rm /wt/old -r");
  auto second = WatchLines(**s, 3, partial);
  auto has = [](const std::vector<json>& v, const char* name, const char* type) {
    for (const json& j : v)
      if (j["name"] == name && j["type"] == type) return true;
    return false;
  };
  EXPECT_TRUE(has(first, "a.txt", "create")) << json(first).dump();
  EXPECT_TRUE(has(first, "a.txt", "write")) << json(first).dump();
  EXPECT_TRUE(has(first, "new", "create")) << json(first).dump();
  EXPECT_TRUE(has(second, "new/b", "create")) << json(second).dump();
  EXPECT_TRUE(has(second, "old", "remove")) << json(second).dump();
  EXPECT_EQ(InotifyFds(sb_->agent_pid()), 1);
  (*s)->Cancel();
  auto end = (*s)->Next(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->kind, proto::Event::Kind::kResult);
  // The agent let go of its inotify instance.
  EXPECT_EQ(InotifyFds(sb_->agent_pid()), 0);
}

TEST_F(AgentFs, WatchEndsWhenItsDirectoryGoesAndRefusesNonDirectories) {
  sb_->Sh("mkdir -p /wg; echo x > /wf");
  EXPECT_EQ(CodeOf(Op("fs.watch", {{"path", "/none"}})), "S211");
  EXPECT_EQ(CodeOf(Op("fs.watch", {{"path", "/wf"}})), "S212");
  EXPECT_EQ(CodeOf(Op("fs.watch", {{"path", ""}})), "S001");
  auto s = sb_->client().Open(json{{"op", "fs.watch"}, {"path", "/wg"}});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->End(proto::kStdin).ok());
  auto meta = (*s)->Next(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(meta.has_value());
  ASSERT_EQ(meta->kind, proto::Event::Kind::kMeta);
  sb_->Sh("rmdir /wg");
  bool ended = false, result = false;
  for (auto deadline = std::chrono::steady_clock::now() + 10s; !result;) {
    auto e = (*s)->Next(deadline);
    if (!e) break;
    if (e->kind == proto::Event::Kind::kEnd) ended = true;
    if (e->kind == proto::Event::Kind::kResult) result = true;
  }
  EXPECT_TRUE(ended);
  EXPECT_TRUE(result);
}

// ------------------------------------------------------------------ ls / stat

TEST_F(AgentFs, LsListsSortedEntriesWithLstat) {
  sb_->Sh(
      "mkdir -p /d/sub && printf 12345 > /d/b && touch /d/.hidden /d/A && ln -s /d/sub /d/link "
      "&& chmod 0640 /d/b && touch -d @1788264000 /d/b");
  auto r = Op("fs.ls", {{"path", "/d"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  std::vector<std::string> names;
  for (const auto& e : (*r)["entries"]) names.push_back(e["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{".hidden", "A", "b", "link", "sub"}));
  for (const auto& e : (*r)["entries"]) {
    if (e["name"] == "b") {
      EXPECT_EQ(e["size"], 5);
      EXPECT_EQ(e["mode"], "0640");
      EXPECT_EQ(e["mtime"], 1788264000);
      EXPECT_EQ(e["is_dir"], false);
      EXPECT_EQ(e["is_symlink"], false);
    }
    if (e["name"] == "link") {
      EXPECT_EQ(e["is_dir"], false);
      EXPECT_EQ(e["is_symlink"], true);
    }
    if (e["name"] == "sub") {
      EXPECT_EQ(e["is_dir"], true);
      EXPECT_GT(e["size"].get<int64_t>(), 0);
    }
  }
  // A link to a directory is followed.
  r = Op("fs.ls", {{"path", "/d/link"}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)["entries"].empty());
  r = Op("fs.ls", {{"path", "/d/b"}});
  EXPECT_EQ(CodeOf(r), "S212");
  EXPECT_EQ(MessageOf(r), "not a directory or wrong type: not a directory: /d/b");
  r = Op("fs.ls", {{"path", "/nope"}});
  EXPECT_EQ(CodeOf(r), "S211");
  EXPECT_EQ(MessageOf(r), "file not found: /nope");
  r = Op("fs.ls", {{"path", ""}});
  EXPECT_EQ(CodeOf(r), "S001");
}

TEST_F(AgentFs, StatIsLstat) {
  sb_->Sh("mkdir -p /s/dir && ln -s /s/dir /s/l && ln -s /missing /s/broken && chmod 4755 /s/dir");
  auto r = Op("fs.stat", {{"path", "/s/l"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["name"], "l");
  EXPECT_EQ((*r)["is_dir"], false);
  EXPECT_EQ((*r)["is_symlink"], true);
  r = Op("fs.stat", {{"path", "/s/dir/"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["name"], "dir");
  EXPECT_EQ((*r)["is_dir"], true);
  EXPECT_EQ((*r)["mode"], "4755");
  r = Op("fs.stat", {{"path", "/"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["name"], "/");
  EXPECT_TRUE(Op("fs.stat", {{"path", "/s/broken"}}).ok());
  EXPECT_EQ(CodeOf(Op("fs.stat", {{"path", "/s/none"}})), "S211");
  // Relative paths resolve against /.
  r = Op("fs.stat", {{"path", "s/dir"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["is_dir"], true);
  // Ten fields: no symlink_target but on a link.
  EXPECT_EQ(r->size(), 10u) << r->dump();
}

// Owner and group are names from the sandbox's own /etc/passwd and
// /etc/group (decimal when they name none); a link carries its absolute,
// lexically normalised target.
TEST_F(AgentFs, EntriesCarryOwnerGroupAndLinkTarget) {
  sb_->Sh(
      "printf 'root:x:0:0:root:/root:/bin/sh\\nuser:x:1000:1000::/home/user:/bin/sh\\n' > /etc/passwd && "
      "printf 'root:x:0:\\nstaff:x:50:user\\n' > /etc/group && "
      "mkdir -p /o/sub && touch /o/mine /o/anon && chown 1000:50 /o/mine && chown 4242:4343 /o/anon && "
      "ln -s ../o/sub/./x /o/rel && ln -s /etc/../etc/hosts /o/abs && ln -s mine /o/sib");
  auto r = Op("fs.ls", {{"path", "/o"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  std::map<std::string, json> by_name;
  for (const auto& e : (*r)["entries"]) by_name[e["name"]] = e;
  ASSERT_EQ(by_name.size(), 6u) << r->dump();
  const json& mine = by_name["mine"];
  EXPECT_EQ(mine["uid"], 1000);
  EXPECT_EQ(mine["gid"], 50);
  EXPECT_EQ(mine["owner"], "user");
  EXPECT_EQ(mine["group"], "staff");
  EXPECT_FALSE(mine.contains("symlink_target"));
  const json& anon = by_name["anon"];
  EXPECT_EQ(anon["uid"], 4242);
  EXPECT_EQ(anon["owner"], "4242");
  EXPECT_EQ(anon["group"], "4343");
  EXPECT_EQ(by_name["sub"]["owner"], "root");
  EXPECT_EQ(by_name["sub"]["group"], "root");
  EXPECT_FALSE(by_name["sub"].contains("symlink_target"));
  EXPECT_EQ(by_name["rel"]["symlink_target"], "/o/sub/x");  // dangling is fine: lexical
  EXPECT_EQ(by_name["abs"]["symlink_target"], "/etc/hosts");
  EXPECT_EQ(by_name["sib"]["symlink_target"], "/o/mine");
  EXPECT_EQ(by_name["rel"]["owner"], "root");  // the link's own owner (lstat)

  r = Op("fs.stat", {{"path", "/o/rel"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["symlink_target"], "/o/sub/x");
  r = Op("fs.stat", {{"path", "o/sib"}});  // relative: against /
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["symlink_target"], "/o/mine");
  r = Op("fs.ls", {{"path", "o"}});
  ASSERT_TRUE(r.ok());
  for (const auto& e : (*r)["entries"]) {
    if (e["name"] == "abs") {
      EXPECT_EQ(e["symlink_target"], "/etc/hosts");
    }
  }
  r = Op("fs.stat", {{"path", "/o/mine"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["owner"], "user");
  EXPECT_EQ((*r)["group"], "staff");
  EXPECT_FALSE(r->contains("symlink_target"));

  // A hostile sandbox's /etc/passwd that is a FIFO neither blocks nor fails
  // the call: names fall back to numbers.
  sb_->Sh("rm /etc/passwd && mkfifo /etc/passwd");
  r = Op("fs.stat", {{"path", "/o/mine"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["owner"], "1000");
  EXPECT_EQ((*r)["group"], "staff");
}

// ------------------------------------------------------------------ mkdir

TEST_F(AgentFs, Mkdir) {
  auto r = Op("fs.mkdir", {{"path", "/m"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["created"], true);
  EXPECT_EQ(sb_->Sh("stat -c %a /m"), "755\n");  // default 0755, no umask
  r = Op("fs.mkdir", {{"path", "/m"}});
  EXPECT_EQ(CodeOf(r), "S213");
  EXPECT_EQ(MessageOf(r), "already exists: /m");
  r = Op("fs.mkdir", {{"path", "/m"}, {"parents", true}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["created"], false);
  // Missing parent: S211 with the fix.
  auto e = sb_->CallRaw({{"op", "fs.mkdir"}, {"path", "/m/a/b"}});
  ASSERT_EQ(e.kind, proto::Event::Kind::kError);
  EXPECT_EQ(e.json["code"], "S211");
  EXPECT_EQ(e.json["message"], "parent directory not found: /m/a");
  EXPECT_EQ(e.json["fix"], json({{"parents", true}}));
  r = Op("fs.mkdir", {{"path", "/m/a/b/c"}, {"parents", true}, {"mode", 01777}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["created"], true);
  EXPECT_EQ(sb_->Sh("stat -c %a /m/a /m/a/b /m/a/b/c"), "755\n755\n1777\n");
  r = Op("fs.mkdir", {{"path", "/m/x"}, {"mode", 0700}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(sb_->Sh("stat -c %a /m/x"), "700\n");
  // Mode range and type.
  EXPECT_EQ(CodeOf(Op("fs.mkdir", {{"path", "/m/y"}, {"mode", 010000}})), "S210");
  EXPECT_EQ(CodeOf(Op("fs.mkdir", {{"path", "/m/y"}, {"mode", "0755"}})), "S210");
  // A component that is a file.
  Put("/m/file", "x");
  EXPECT_EQ(CodeOf(Op("fs.mkdir", {{"path", "/m/file/sub"}})), "S212");
  EXPECT_EQ(CodeOf(Op("fs.mkdir", {{"path", "/m/file/sub"}, {"parents", true}})), "S212");
  // A dangling link counts as "something there" for parents:false.
  sb_->Sh("ln -s /nowhere /m/dangling");
  EXPECT_EQ(CodeOf(Op("fs.mkdir", {{"path", "/m/dangling"}})), "S213");
}

// ------------------------------------------------------------------ write / read

TEST_F(AgentFs, WriteAndRead) {
  auto r = sb_->Write("/w/hello.txt", "hello world", {{"parents", true}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], 11);
  EXPECT_EQ(sb_->Sh("stat -c '%a %u:%g' /w/hello.txt /w"), "644 0:0\n755 0:0\n");
  auto rd = sb_->Read("/w/hello.txt");
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(rd->data, "hello world");
  EXPECT_EQ(rd->meta["size"], 11);
  EXPECT_EQ(rd->meta["mode"], "0644");
  EXPECT_TRUE(rd->meta["mtime"].is_number_integer());
  // Mode applied exactly (setuid too, no umask).
  Put("/w/s", "x", {{"mode", 04755}});
  EXPECT_EQ(sb_->Sh("stat -c %a /w/s"), "4755\n");
  Put("/w/p", "x", {{"mode", 0}});
  EXPECT_EQ(sb_->Sh("stat -c %a /w/p"), "0\n");
  // Replace keeps owner and group; the mode is the request's.
  sb_->Sh("chown 1234:5678 /w/hello.txt");
  Put("/w/hello.txt", "new", {{"mode", 0600}});
  EXPECT_EQ(sb_->Sh("stat -c '%a %u:%g' /w/hello.txt"), "600 1234:5678\n");
  EXPECT_EQ(Get("/w/hello.txt"), "new");
  // Empty body.
  Put("/w/empty", "");
  EXPECT_EQ(Get("/w/empty"), "");
  // Missing parent: S211 + fix; onto a directory: S212; parent is a file: S212.
  auto e = sb_->CallRaw({{"op", "fs.write"}, {"path", "/w/no/such/f"}});
  ASSERT_EQ(e.kind, proto::Event::Kind::kError);
  EXPECT_EQ(e.json["code"], "S211");
  EXPECT_EQ(e.json["message"], "parent directory not found: /w/no/such");
  EXPECT_EQ(e.json["fix"], json({{"parents", true}}));
  EXPECT_EQ(CodeOf(sb_->Write("/w", "x")), "S212");
  EXPECT_EQ(CodeOf(sb_->Write("/w/s/child", "x")), "S212");
  EXPECT_EQ(CodeOf(sb_->Write("/w/bad", "x", {{"mode", 070000}})), "S210");
  // A symlink at path is replaced by a regular file; its target is untouched.
  Put("/w/target", "target");
  sb_->Sh("ln -s /w/target /w/link");
  Put("/w/link", "replaced");
  EXPECT_EQ(sb_->Sh("test -L /w/link || echo regular; cat /w/target"), "regular\ntarget");
  // No temporary file is ever left behind.
  EXPECT_EQ(sb_->Sh("ls -A /w"), "empty\nhello.txt\nlink\np\ns\ntarget\n");
  // Read errors.
  auto bad = sb_->Read("/w");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kS212);
  EXPECT_EQ(bad.error().message(), "not a directory or wrong type: is a directory: /w");
  bad = sb_->Read("/w/none");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "file not found: /w/none");
  // A FIFO never blocks the agent.
  sb_->Sh("mkfifo /w/fifo");
  bad = sb_->Read("/w/fifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kS212);
  // Read follows links.
  sb_->Sh("ln -s /w/target /w/l2");
  EXPECT_EQ(Get("/w/l2"), "target");
}

TEST_F(AgentFs, WriteCancelLeavesNothingBehind) {
  Put("/c/f", "original", {{"parents", true}});
  {
    auto s = sb_->client().Open(json{{"op", "fs.write"}, {"path", "/c/f"}});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Send(proto::kStdin, std::string(300000, 'z')).ok());
    (*s)->Cancel();
    auto e = (*s)->Next(std::chrono::steady_clock::now() + 10s);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, proto::Event::Kind::kError);
    EXPECT_EQ(e->json["code"], "S218");
  }
  {
    // A stream dropped without END (the destructor cancels it).
    auto s = sb_->client().Open(json{{"op", "fs.write"}, {"path", "/c/g"}});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Send(proto::kStdin, "partial").ok());
  }
  EXPECT_EQ(Get("/c/f"), "original");
  EXPECT_EQ(sb_->Sh("ls -A /c"), "f\n");
}

TEST_F(AgentFs, LargeWriteReadIsByteIdenticalWithBoundedAgentMemory) {
  const size_t kSize = 256u << 20;
  std::string data(kSize, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= kSize; i += 8) {
    uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  auto r = sb_->Write("/big.bin", data);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], kSize);
  auto rd = sb_->Read("/big.bin");
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(rd->meta["size"], kSize);
  ASSERT_EQ(rd->data.size(), kSize);
  EXPECT_TRUE(rd->data == data);
  long hwm = sb_->AgentHwmKb();
  RecordProperty("agent_vm_hwm_kb", std::to_string(hwm));
  EXPECT_GT(hwm, 0);
  EXPECT_LT(hwm, 64 * 1024) << "agent peak RSS " << hwm << " KiB";
  std::printf("agent VmHWM after 256 MiB write+read: %ld KiB\n", hwm);
}

// ------------------------------------------------------------------ rm

TEST_F(AgentFs, Rm) {
  sb_->Sh(
      "mkdir -p /r/full/deep/er /r/empty /r/keep && touch /r/full/deep/er/f /r/file /r/keep/k "
      "&& ln -s /r/keep /r/dirlink");
  EXPECT_EQ(Op("fs.rm", {{"path", "/r/file"}})->value("removed", false), true);
  EXPECT_TRUE(Op("fs.rm", {{"path", "/r/empty"}}).ok());
  auto r = Op("fs.rm", {{"path", "/r/full"}});
  EXPECT_EQ(CodeOf(r), "S214");
  EXPECT_EQ(MessageOf(r), "directory not empty: /r/full");
  EXPECT_EQ(sb_->Sh("test -f /r/full/deep/er/f && echo intact"), "intact\n");
  EXPECT_TRUE(Op("fs.rm", {{"path", "/r/full"}, {"recursive", true}}).ok());
  // A link to a directory: the link goes, the target stays.
  EXPECT_TRUE(Op("fs.rm", {{"path", "/r/dirlink"}, {"recursive", true}}).ok());
  EXPECT_EQ(sb_->Sh("ls -A /r; ls /r/keep"), "keep\nk\n");
  r = Op("fs.rm", {{"path", "/r/none"}});
  EXPECT_EQ(CodeOf(r), "S211");
  EXPECT_EQ(MessageOf(r), "file not found: /r/none");
}

// ------------------------------------------------------------------ mv

TEST_F(AgentFs, Mv) {
  sb_->Sh(
      "mkdir -p /v/dir/sub /v/full && echo a > /v/a && echo b > /v/b && touch /v/full/x "
      "&& ln -s /nowhere /v/broken && ln -s / /v/dir/rootlink");
  EXPECT_EQ(Op("fs.mv", {{"src", "/v/a"}, {"dst", "/v/a2"}})->value("moved", false), true);
  auto r = Op("fs.mv", {{"src", "/v/a2"}, {"dst", "/v/b"}});
  EXPECT_EQ(CodeOf(r), "S213");
  EXPECT_EQ(MessageOf(r), "already exists: dst /v/b");
  EXPECT_EQ(sb_->Sh("cat /v/a2 /v/b"), "a\nb\n");
  EXPECT_TRUE(Op("fs.mv", {{"src", "/v/a2"}, {"dst", "/v/b"}, {"overwrite", true}}).ok());
  EXPECT_EQ(sb_->Sh("cat /v/b; test -e /v/a2 || echo gone"), "a\ngone\n");
  r = Op("fs.mv", {{"src", "/v/none"}, {"dst", "/v/z"}});
  EXPECT_EQ(CodeOf(r), "S211");
  EXPECT_EQ(MessageOf(r), "file not found: src /v/none");
  auto e = sb_->CallRaw({{"op", "fs.mv"}, {"src", "/v/b"}, {"dst", "/v/no/such"}});
  EXPECT_EQ(e.json["code"], "S211");
  EXPECT_FALSE(e.json.contains("fix"));
  EXPECT_EQ(CodeOf(Op("fs.mv", {{"src", "/v/dir"}, {"dst", "/v/b"}, {"overwrite", true}})), "S212");
  EXPECT_EQ(CodeOf(Op("fs.mv", {{"src", "/v/b"}, {"dst", "/v/dir"}, {"overwrite", true}})), "S212");
  EXPECT_EQ(CodeOf(Op("fs.mv", {{"src", "/v/dir"}, {"dst", "/v/full"}, {"overwrite", true}})), "S214");
  // dst existence includes broken links; a broken link can be moved.
  EXPECT_EQ(CodeOf(Op("fs.mv", {{"src", "/v/b"}, {"dst", "/v/broken"}})), "S213");
  EXPECT_TRUE(Op("fs.mv", {{"src", "/v/broken"}, {"dst", "/v/broken2"}}).ok());
  EXPECT_EQ(sb_->Sh("readlink /v/broken2"), "/nowhere\n");
  // Moving a directory holding a link to / moves the link, nothing else.
  EXPECT_TRUE(Op("fs.mv", {{"src", "/v/dir"}, {"dst", "/v/dir2"}}).ok());
  EXPECT_EQ(sb_->Sh("readlink /v/dir2/rootlink; ls /v/dir2"), "/\nrootlink\nsub\n");
}

TEST_F(AgentFs, MvAcrossFilesystemsCopies) {
  sb_->Sh(
      "mkdir -p /x/tree/sub && printf data > /x/tree/sub/f && chmod 0600 /x/tree/sub/f "
      "&& chmod 0711 /x/tree && ln -s sub/f /x/tree/link && printf one > /x/file "
      "&& chmod 0751 /x/file && chown 7:8 /x/file && ln -s /x/file /x/flink");
  EXPECT_TRUE(Op("fs.mv", {{"src", "/x/file"}, {"dst", "/mnt2/file"}}).ok());
  EXPECT_EQ(sb_->Sh("stat -c '%a %u:%g' /mnt2/file; cat /mnt2/file; test -e /x/file || echo gone"),
            "751 7:8\nonegone\n");
  EXPECT_TRUE(Op("fs.mv", {{"src", "/x/tree"}, {"dst", "/mnt2/tree"}}).ok());
  EXPECT_EQ(sb_->Sh("stat -c %a /mnt2/tree /mnt2/tree/sub/f; readlink /mnt2/tree/link; "
                    "cat /mnt2/tree/link; test -e /x/tree || echo gone"),
            "711\n600\nsub/f\ndatagone\n");
  EXPECT_TRUE(Op("fs.mv", {{"src", "/x/flink"}, {"dst", "/mnt2/flink"}}).ok());
  EXPECT_EQ(sb_->Sh("readlink /mnt2/flink"), "/x/file\n");
  // overwrite:false across filesystems refuses an existing dst.
  sb_->Sh("echo new > /x/again");
  EXPECT_EQ(CodeOf(Op("fs.mv", {{"src", "/x/again"}, {"dst", "/mnt2/file"}})), "S213");
  EXPECT_EQ(sb_->Sh("ls -A /mnt2"), "file\nflink\ntree\n");  // no temp left
}

// A tree deeper than the stack would hold 64 KiB per level of (the copy's
// buffer once lived in each level's frame, and ~120 levels killed the
// agent) is copied and removed like any other.
TEST_F(AgentFs, MvOfADeepTreeAcrossFilesystems) {
  sb_->Sh("d=/deep; for i in $(seq 1 300); do d=$d/a; done; mkdir -p $d && echo bottom > $d/f");
  auto r = Op("fs.mv", {{"src", "/deep"}, {"dst", "/mnt2/deep"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(
      sb_->Sh("d=/mnt2/deep; for i in $(seq 1 300); do d=$d/a; done; cat $d/f; test -e /deep || echo gone"),
      "bottom\ngone\n");
}

// ------------------------------------------------------------------ chmod

TEST_F(AgentFs, Chmod) {
  sb_->Sh(
      "mkdir -p /h/t/sub && touch /h/t/a /h/t/sub/b /h/outside && chmod 0600 /h/outside "
      "&& ln -s /h/outside /h/t/link && ln -s /h/t /h/tlink");
  auto r = Op("fs.chmod", {{"path", "/h/t/a"}, {"mode", 0640}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["updated"], 1);
  EXPECT_EQ(sb_->Sh("stat -c %a /h/t/a"), "640\n");
  // Non-recursive follows a link.
  EXPECT_TRUE(Op("fs.chmod", {{"path", "/h/t/link"}, {"mode", 0604}}).ok());
  EXPECT_EQ(sb_->Sh("stat -c %a /h/outside"), "604\n");
  sb_->Sh("chmod 0600 /h/outside");
  // Recursive through a root link; links inside are skipped.
  r = Op("fs.chmod", {{"path", "/h/tlink"}, {"mode", 0777}, {"recursive", true}, {"uid", 42}, {"gid", 43}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["updated"], 4);  // t, a, sub, sub/b
  EXPECT_EQ(sb_->Sh("stat -c '%a %u:%g' /h/t /h/t/a /h/t/sub /h/t/sub/b /h/outside"),
            "777 42:43\n777 42:43\n777 42:43\n777 42:43\n600 0:0\n");
  // uid only.
  EXPECT_TRUE(Op("fs.chmod", {{"path", "/h/t/a"}, {"mode", 0644}, {"uid", 5}}).ok());
  EXPECT_EQ(sb_->Sh("stat -c '%a %u:%g' /h/t/a"), "644 5:43\n");
  r = Op("fs.chmod", {{"path", "/h/none"}, {"mode", 0644}});
  EXPECT_EQ(CodeOf(r), "S211");
  EXPECT_EQ(MessageOf(r), "file not found: /h/none");
  EXPECT_EQ(CodeOf(Op("fs.chmod", {{"path", "/h/t"}, {"mode", 077777}})), "S210");
  EXPECT_EQ(CodeOf(Op("fs.chmod", {{"path", "/h/t"}})), "S001");
  EXPECT_EQ(CodeOf(Op("fs.chmod", {{"path", "/h/t"}, {"mode", 0644}, {"uid", -3}})), "S001");
  // Read-only filesystem: permission denied.
  EXPECT_EQ(CodeOf(Op("fs.chmod", {{"path", "/usr/bin/env"}, {"mode", 0777}})), "S215");
}

// ------------------------------------------------------------------ grep

TEST_F(AgentFs, Grep) {
  Put("/g/src/app.py", "import os\n# TODO(ana): retry\r\nx = 1 # todo\n", {{"parents", true}});
  Put("/g/src/lib/util.py", "def f():\n    pass  # TODO later", {{"parents", true}});
  Put("/g/README.md", "TODO: docs\n");
  Put("/g/bin.dat", std::string("TODO\0binary", 11));
  Put("/g/bad.txt", "TODO \xff\xfe invalid\nTODO valid\n");
  auto r = Op("fs.grep", {{"path", "/g"}, {"pattern", "TODO"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["truncated"], false);
  json want = json::array({
      {{"path", "/g/README.md"}, {"line", 1}, {"content", "TODO: docs"}, {"byte_offset", 0}},
      {{"path", "/g/bad.txt"}, {"line", 2}, {"content", "TODO valid"}, {"byte_offset", 16}},
      {{"path", "/g/src/app.py"}, {"line", 2}, {"content", "# TODO(ana): retry"}, {"byte_offset", 12}},
      {{"path", "/g/src/lib/util.py"},
       {"line", 2},
       {"content", "    pass  # TODO later"},
       {"byte_offset", 21}},
  });
  EXPECT_EQ((*r)["matches"], want);
  // ignore_case, include/exclude globs.
  r = Op("fs.grep", {{"path", "/g"},
                     {"pattern", "todo"},
                     {"ignore_case", true},
                     {"include_glob", {"*.py"}},
                     {"exclude_glob", {"src/lib/**"}}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)["matches"].size(), 2u);
  EXPECT_EQ((*r)["matches"][1]["content"], "x = 1 # todo");
  // max_matches and truncated; 0 = unlimited.
  r = Op("fs.grep", {{"path", "/g"}, {"pattern", "TODO"}, {"max_matches", 2}});
  EXPECT_EQ((*r)["matches"].size(), 2u);
  EXPECT_EQ((*r)["truncated"], true);
  r = Op("fs.grep", {{"path", "/g"}, {"pattern", "TODO"}, {"max_matches", 4}});
  EXPECT_EQ((*r)["truncated"], false);
  r = Op("fs.grep", {{"path", "/g"}, {"pattern", "TODO"}, {"max_matches", 0}});
  EXPECT_EQ((*r)["matches"].size(), 4u);
  // max_line_bytes cuts at a UTF-8 boundary and appends an ellipsis.
  Put("/g2/u.txt", "ab\xC3\xA9 TODO tail\n", {{"parents", true}});
  r = Op("fs.grep", {{"path", "/g2/u.txt"}, {"pattern", "TODO"}, {"max_line_bytes", 3}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["matches"][0]["content"], "ab\xE2\x80\xA6");
  EXPECT_EQ((*r)["matches"][0]["path"], "/g2/u.txt");
  EXPECT_EQ((*r)["matches"][0]["byte_offset"], 5);
  // Errors.
  r = Op("fs.grep", {{"path", "/g"}, {"pattern", "("}});
  EXPECT_EQ(CodeOf(r), "S217");
  EXPECT_EQ(MessageOf(r).rfind("invalid regex pattern: ", 0), 0u);
  r = Op("fs.grep", {{"path", "/g"}, {"pattern", "x"}, {"recursive", false}});
  EXPECT_EQ(CodeOf(r), "S210");
  EXPECT_EQ(MessageOf(r), "recursive is false but /g is a directory; pass a file, or set recursive to true");
  EXPECT_EQ(CodeOf(Op("fs.grep", {{"path", "/nope"}, {"pattern", "x"}})), "S211");
  // Single-file root: its basename is matched against the globs.
  r = Op("fs.grep",
         {{"path", "/g/README.md"}, {"pattern", "TODO"}, {"recursive", false}, {"include_glob", {"*.py"}}});
  EXPECT_TRUE((*r)["matches"].empty());
}

TEST_F(AgentFs, GrepNeverFollowsLinksAndTerminatesOnLoops) {
  sb_->Sh(
      "mkdir -p /outside /gl/a && echo NEEDLE > /outside/secret && echo NEEDLE > /gl/a/in "
      "&& ln -s /outside /gl/out && ln -s /outside/secret /gl/sec && ln -s .. /gl/a/up "
      "&& ln -s /gl /gl/a/loop && ln -s /gl /gllink");
  auto r = Op("fs.grep", {{"path", "/gl"}, {"pattern", "NEEDLE"}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)["matches"].size(), 1u);
  EXPECT_EQ((*r)["matches"][0]["path"], "/gl/a/in");
  // A root that is a link to a directory is walked once.
  r = Op("fs.grep", {{"path", "/gllink"}, {"pattern", "NEEDLE"}});
  ASSERT_EQ((*r)["matches"].size(), 1u);
  EXPECT_EQ((*r)["matches"][0]["path"], "/gllink/a/in");
}

// ------------------------------------------------------------------ sed

TEST_F(AgentFs, Sed) {
  Put("/e/a.txt", "foo=1\r\nbar=2\nfoo=3", {{"parents", true}, {"mode", 0640}});
  sb_->Sh("chown 9:10 /e/a.txt");
  Put("/e/b.txt", "nothing here\n");
  auto r = Op("fs.sed", {{"files", {"/e/a.txt", "/e/b.txt", "/e/missing"}},
                         {"pattern", "(?P<k>\\w+)=(\\d)"},
                         {"replacement", "${2}:$k$$"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  json want = json::array({
      {{"path", "/e/a.txt"}, {"replacements", 3}, {"success", true}},
      {{"path", "/e/b.txt"}, {"replacements", 0}, {"success", true}},
      {{"path", "/e/missing"},
       {"replacements", 0},
       {"success", false},
       {"error", "file not found: /e/missing"}},
  });
  EXPECT_EQ((*r)["results"], want);
  EXPECT_EQ((*r)["total_replacements"], 3);
  EXPECT_EQ(Get("/e/a.txt"), "1:foo$\r\n2:bar$\n3:foo$");
  EXPECT_EQ(sb_->Sh("stat -c '%a %u:%g' /e/a.txt; ls -A /e"), "640 9:10\na.txt\nb.txt\n");
  // first_only: one replacement per file, the first in file order.
  r = Op("fs.sed", {{"files", {"/e/a.txt"}}, {"pattern", "foo"}, {"replacement", "X"}, {"first_only", true}});
  EXPECT_EQ((*r)["total_replacements"], 1);
  EXPECT_EQ(Get("/e/a.txt"), "1:X$\r\n2:bar$\n3:foo$");
  // Literal mode with ignore_case: the replacement is verbatim.
  r = Op("fs.sed", {{"files", {"/e/a.txt"}},
                    {"pattern", "X$"},
                    {"replacement", "$1.*"},
                    {"regex", false},
                    {"ignore_case", true}});
  EXPECT_EQ((*r)["total_replacements"], 1);
  EXPECT_EQ(Get("/e/a.txt"), "1:$1.*\r\n2:bar$\n3:foo$");
  // ^ and $ anchor per line; empty matches at each position.
  Put("/e/c.txt", "ab\ncd\n");
  r = Op("fs.sed", {{"files", {"/e/c.txt"}}, {"pattern", "^"}, {"replacement", "> "}});
  EXPECT_EQ((*r)["total_replacements"], 2);
  EXPECT_EQ(Get("/e/c.txt"), "> ab\n> cd\n");
  Put("/e/d.txt", "abc\n");
  r = Op("fs.sed", {{"files", {"/e/d.txt"}}, {"pattern", "x*"}, {"replacement", "-"}});
  EXPECT_EQ(Get("/e/d.txt"), "-a-b-c-\n");
  // Zero replacements: the file is not rewritten (same inode).
  std::string ino = sb_->Sh("stat -c %i /e/b.txt");
  r = Op("fs.sed", {{"files", {"/e/b.txt"}}, {"pattern", "zzz"}, {"replacement", "y"}});
  EXPECT_EQ(sb_->Sh("stat -c %i /e/b.txt"), ino);
  // A symlink in files: the target is edited, the link stays.
  sb_->Sh("ln -s /e/b.txt /e/blink");
  r = Op("fs.sed", {{"files", {"/e/blink"}}, {"pattern", "here"}, {"replacement", "there"}});
  EXPECT_EQ((*r)["results"][0]["success"], true);
  EXPECT_EQ(sb_->Sh("test -L /e/blink && cat /e/b.txt"), "nothing there\n");
  // Invalid UTF-8: per-file error, nothing written.
  Put("/e/bin", "foo\xff\n");
  r = Op("fs.sed", {{"files", {"/e/bin"}}, {"pattern", "foo"}, {"replacement", "y"}});
  EXPECT_EQ((*r)["results"][0]["success"], false);
  EXPECT_EQ(Get("/e/bin"), "foo\xff\n");
  // Form and pattern checks.
  r = Op("fs.sed", {{"files", {"/e/a.txt"}}, {"path", "/e"}, {"pattern", "a"}, {"replacement", ""}});
  EXPECT_EQ(MessageOf(r), "sed: give files or path, not both");
  r = Op("fs.sed", {{"pattern", "a"}, {"replacement", ""}});
  EXPECT_EQ(MessageOf(r), "sed: one of files or path is required");
  r = Op("fs.sed", {{"path", "/e"}, {"pattern", ""}, {"replacement", ""}});
  EXPECT_EQ(CodeOf(r), "S210");
  EXPECT_EQ(MessageOf(r), "sed: pattern must not be empty");
  r = Op("fs.sed", {{"path", "/e"}, {"pattern", "x"}, {"replacement", ""}, {"recursive", false}});
  EXPECT_EQ(CodeOf(r), "S210");
  EXPECT_EQ(CodeOf(Op("fs.sed", {{"path", "/none"}, {"pattern", "x"}, {"replacement", ""}})), "S211");
}

TEST_F(AgentFs, SedInvalidRegexRewritesNothing) {
  Put("/i/a", "abc\n", {{"parents", true}});
  std::string before = sb_->Sh("stat -c '%i %Y' /i/a");
  auto r = Op("fs.sed", {{"path", "/i"}, {"pattern", "a(b"}, {"replacement", "x"}});
  EXPECT_EQ(CodeOf(r), "S217");
  EXPECT_EQ(sb_->Sh("stat -c '%i %Y' /i/a"), before);
  EXPECT_EQ(Get("/i/a"), "abc\n");
}

TEST_F(AgentFs, SedPathFormWalks) {
  Put("/p/x.py", "a\n", {{"parents", true}});
  Put("/p/sub/y.py", "a a\n", {{"parents", true}});
  Put("/p/sub/z.txt", "a\n");
  sb_->Sh(
      "mkdir -p /outside && echo a > /outside/o.py && ln -s /outside /p/sub/out && ln -s /outside/o.py "
      "/p/o.py");
  auto r = Op("fs.sed", {{"path", "/p"}, {"pattern", "a"}, {"replacement", "b"}, {"include_glob", {"*.py"}}});
  ASSERT_TRUE(r.ok());
  json want = json::array({
      {{"path", "/p/sub/y.py"}, {"replacements", 2}, {"success", true}},
      {{"path", "/p/x.py"}, {"replacements", 1}, {"success", true}},
  });
  EXPECT_EQ((*r)["results"], want);
  EXPECT_EQ(sb_->Sh("cat /p/x.py /p/sub/y.py /p/sub/z.txt /outside/o.py"), "b\nb b\na\na\n");
}

// ------------------------------------------------------------------ escapes

TEST_F(AgentFs, EscapeAttemptsStayInside) {
  // A link to / planted by sandboxed code: writing through it lands in the
  // sandbox's own /etc.
  sb_->Sh("ln -s / /tmp/l");
  auto w = sb_->Write("/tmp/l/etc/skiff-escape-test", "inside");
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_EQ(::access("/etc/skiff-escape-test", F_OK), -1);
  EXPECT_EQ(::access(sb_->HostPath("/etc/skiff-escape-test").c_str(), F_OK), 0);
  // ../ never leaves the root: the host's /etc/shadow is not visible.
  ASSERT_EQ(::access("/etc/shadow", F_OK), 0);
  auto rd = sb_->Read("../../../../etc/shadow");
  ASSERT_FALSE(rd.ok());
  EXPECT_EQ(rd.error().code(), Code::kS211);
  rd = sb_->Read("/tmp/l/../../../etc/shadow");
  EXPECT_FALSE(rd.ok());
  EXPECT_EQ(CodeOf(Op("fs.stat", {{"path", "/../../../../etc/shadow"}})), "S211");
}

TEST_F(AgentFs, SymlinkSwappedDuringWalksIsNeverFollowed) {
  sb_->Sh(
      "mkdir -p /outside /race/sub && echo NEEDLE > /outside/secret && chmod 0600 /outside/secret "
      "&& echo hay > /race/sub/f");
  // A background exec keeps swapping /race/sub between a directory and a
  // link to /outside.
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    sb_->Exec({"sh", "-c",
               "end=$(( $(date +%s) + 4 )); while [ $(date +%s) -lt $end ]; do "
               "mv /race/sub /race/sub.d; ln -s /outside /race/sub; rm /race/sub; "
               "mv /race/sub.d /race/sub; done"},
              json{{"timeout_ms", 10000}});
    stop = true;
  });
  int rounds = 0;
  while (!stop) {
    auto g = Op("fs.grep", {{"path", "/race"}, {"pattern", "NEEDLE"}});
    ASSERT_TRUE(g.ok()) << g.error().ToString();
    EXPECT_TRUE((*g)["matches"].empty()) << (*g)["matches"].dump();
    auto c = Op("fs.chmod", {{"path", "/race"}, {"mode", 0755}, {"recursive", true}});
    EXPECT_TRUE(c.ok());
    auto s = Op("fs.sed", {{"path", "/race"}, {"pattern", "NEEDLE"}, {"replacement", "GOT"}});
    EXPECT_TRUE(s.ok());
    ++rounds;
  }
  swapper.join();
  EXPECT_GT(rounds, 3);
  EXPECT_EQ(sb_->Sh("stat -c %a /outside/secret; cat /outside/secret"), "600\nNEEDLE\n");
}

// A RESULT larger than one frame travels as DATA on kStdout, then END, then
// RESULT {"result_in_data": true} (protocol extension, ops.h).
TEST_F(AgentFs, LargeResultIsSentAsData) {
  // 20000 matching lines of ~100 bytes: about 2.5 MB of JSON.
  sb_->Sh("mkdir /big && yes \"MATCH $(printf %090d 0)\" | head -n 20000 > /big/f");
  auto s =
      sb_->client().Open(json{{"op", "fs.grep"}, {"path", "/big"}, {"pattern", "MATCH"}, {"max_matches", 0}});
  ASSERT_TRUE(s.ok());
  (void)(*s)->End(proto::kStdin);
  std::string body;
  bool ended = false;
  for (;;) {
    auto e = (*s)->Next(std::chrono::steady_clock::now() + 60s);
    ASSERT_TRUE(e.has_value());
    if (e->kind == proto::Event::Kind::kData) body += e->data;
    if (e->kind == proto::Event::Kind::kEnd) ended = true;
    if (e->kind == proto::Event::Kind::kResult) {
      EXPECT_EQ(e->json, json({{"result_in_data", true}}));
      break;
    }
    ASSERT_NE(e->kind, proto::Event::Kind::kError) << e->json.dump();
  }
  EXPECT_TRUE(ended);
  EXPECT_GT(body.size(), proto::kMaxPayload);
  json r = json::parse(body);
  EXPECT_EQ(r["matches"].size(), 20000u);
  EXPECT_EQ(r["truncated"], false);
  EXPECT_EQ(r["matches"][19999]["line"], 20000);
}

// ------------------------------------------------------------------ several at once (fs_pool.h)

// The agent's pool: 4 workers, 64 more operations queued (FsPool).
constexpr size_t kPoolWorkers = 4;
constexpr size_t kPoolQueue = 64;

// Opens a request whose stdin is ended at once (a one-shot op).
std::shared_ptr<proto::Stream> OpenOneShot(AgentSandbox& sb, const json& req) {
  auto s = sb.client().Open(req);
  EXPECT_TRUE(s.ok()) << req.dump();
  if (!s.ok()) return nullptr;
  (void)(*s)->End(proto::kStdin);
  return *s;
}

// The final event of a stream (RESULT, ERROR or CLOSED), or nullopt when
// none came by `deadline`.
std::optional<proto::Event> FinalOf(proto::Stream& s, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto e = s.Next(deadline);
    if (!e) return std::nullopt;
    if (e->kind == proto::Event::Kind::kResult || e->kind == proto::Event::Kind::kError ||
        e->kind == proto::Event::Kind::kClosed)
      return e;
  }
}

// A file grep reads until its 1 GiB budget stops it (AgentFsOps.
// GrepStopsAtItsScanBudget): a text head, then a 4 GiB hole of NUL bytes
// read as one over-long line. Seconds of work for a grep, whatever the
// machine, and one match ("needle") in its answer.
void PlantSlowGrepFile(AgentSandbox& sb, const std::string& path) {
  auto w = sb.Write(path, std::string(9000, 'a') + "\nneedle\n");
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  sb.Sh("truncate -s 4G " + path);
}

json SlowGrep(const std::string& path) {
  return json{{"op", "fs.grep"}, {"path", path}, {"pattern", "needle"}, {"max_matches", 0}};
}

void ExpectSlowGrepAnswer(const std::optional<proto::Event>& e) {
  ASSERT_TRUE(e.has_value()) << "the grep never answered";
  ASSERT_EQ(e->kind, proto::Event::Kind::kResult) << e->json.dump();
  EXPECT_EQ(e->json["truncated"], true);
  ASSERT_EQ(e->json["matches"].size(), 1u);
  EXPECT_EQ(e->json["matches"][0]["content"], "needle");
}

// While a grep runs, a stat, an info and an exec are answered, and before
// the grep: fs operations run beside the loop, not on it.
TEST_F(AgentFs, SlowGrepHoldsNothingElse) {
  PlantSlowGrepFile(*sb_, "/slow");
  auto t0 = std::chrono::steady_clock::now();
  auto grep = OpenOneShot(*sb_, SlowGrep("/slow"));
  ASSERT_NE(grep, nullptr);
  auto stat = sb_->Call({{"op", "fs.stat"}, {"path", "/slow"}});
  double stat_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(stat.ok()) << stat.error().ToString();
  EXPECT_EQ((*stat)["size"], int64_t{4} << 30);
  auto info = sb_->Call({{"op", "info"}});
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  // Both answered while the grep has not: it is still running.
  EXPECT_FALSE(grep->Next(std::chrono::steady_clock::now()).has_value())
      << "the grep answered first: it held the agent";
  EXPECT_LT(stat_s, 2.0) << "a stat waited " << stat_s << " s behind a grep";
  // A process starts beside the worker threads.
  ExecOut echo = sb_->Exec({"echo", "alive"});
  EXPECT_EQ(echo.out, "alive\n");
  ExpectSlowGrepAnswer(FinalOf(*grep, std::chrono::steady_clock::now() + 60s));
  RecordProperty(
      "grep_seconds",
      std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
}

// Beyond the workers and the queue an fs operation is refused at once
// (S003); the queued ones still run, and info, exec and later operations
// are served as ever.
TEST_F(AgentFs, FsOpsBeyondThePoolAndItsQueueAreRefused) {
  PlantSlowGrepFile(*sb_, "/slow");
  std::vector<std::shared_ptr<proto::Stream>> greps;
  for (size_t i = 0; i < kPoolWorkers; ++i) greps.push_back(OpenOneShot(*sb_, SlowGrep("/slow")));
  // The workers are all busy for seconds: these queue, then overflow.
  constexpr size_t kExtra = 16;
  std::vector<std::shared_ptr<proto::Stream>> stats;
  for (size_t i = 0; i < kPoolQueue + kExtra; ++i)
    stats.push_back(OpenOneShot(*sb_, json{{"op", "fs.stat"}, {"path", "/slow"}}));
  for (const auto& s : greps) ASSERT_NE(s, nullptr);
  for (const auto& s : stats) ASSERT_NE(s, nullptr);
  // The last kExtra are refused at once, in order of arrival.
  for (size_t i = kPoolQueue; i < stats.size(); ++i) {
    auto e = FinalOf(*stats[i], std::chrono::steady_clock::now() + 5s);
    ASSERT_TRUE(e.has_value()) << "stat " << i << " was not refused at once";
    ASSERT_EQ(e->kind, proto::Event::Kind::kError) << "stat " << i << ": " << e->json.dump();
    EXPECT_EQ(e->json["code"], "S003");
    EXPECT_NE(e->json["message"].get<std::string>().find("busy"), std::string::npos) << e->json.dump();
  }
  // The loop still serves what needs no worker.
  auto info = sb_->Call({{"op", "info"}});
  EXPECT_TRUE(info.ok());
  EXPECT_EQ(sb_->Exec({"echo", "alive"}).out, "alive\n");
  for (const auto& g : greps)
    EXPECT_FALSE(g->Next(std::chrono::steady_clock::now()).has_value())
        << "a grep ended too soon for this test";
  // The queued ones run once workers are free.
  for (size_t i = 0; i < kPoolQueue; ++i) {
    auto e = FinalOf(*stats[i], std::chrono::steady_clock::now() + 120s);
    ASSERT_TRUE(e.has_value()) << "queued stat " << i << " never answered";
    ASSERT_EQ(e->kind, proto::Event::Kind::kResult) << "queued stat " << i << ": " << e->json.dump();
    EXPECT_EQ(e->json["name"], "slow");
  }
  for (const auto& g : greps) ExpectSlowGrepAnswer(FinalOf(*g, std::chrono::steady_clock::now() + 60s));
  auto again = Op("fs.stat", {{"path", "/slow"}});
  EXPECT_TRUE(again.ok()) << again.error().ToString();
}

// Many operations at once (as many as the pool takes), finishing in
// another order than they came (a slow grep first, every other one after
// it): each answer reaches its own request.
TEST_F(AgentFs, ConcurrentFsOpsAnswerTheirOwnRequests) {
  constexpr int kN = (kPoolWorkers + kPoolQueue - 1) / 2;  // a stat and an ls each, after the grep
  PlantSlowGrepFile(*sb_, "/slow");
  sb_->Sh("mkdir /many && for i in $(seq 0 " + std::to_string(kN - 1) +
          "); do mkdir /many/d$i && head -c $i /dev/zero > /many/d$i/f$i; done");
  auto grep = OpenOneShot(*sb_, SlowGrep("/slow"));
  ASSERT_NE(grep, nullptr);
  std::vector<std::shared_ptr<proto::Stream>> stats, lss;
  for (int i = 0; i < kN; ++i) {
    std::string d = "/many/d" + std::to_string(i);
    stats.push_back(OpenOneShot(*sb_, json{{"op", "fs.stat"}, {"path", d + "/f" + std::to_string(i)}}));
    lss.push_back(OpenOneShot(*sb_, json{{"op", "fs.ls"}, {"path", d}}));
  }
  auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int i = 0; i < kN; ++i) {
    std::string f = "f" + std::to_string(i);
    ASSERT_NE(stats[i], nullptr);
    auto e = FinalOf(*stats[i], deadline);
    ASSERT_TRUE(e.has_value()) << f;
    ASSERT_EQ(e->kind, proto::Event::Kind::kResult) << f << ": " << e->json.dump();
    EXPECT_EQ(e->json["name"], f);
    EXPECT_EQ(e->json["size"], i);
    ASSERT_NE(lss[i], nullptr);
    e = FinalOf(*lss[i], deadline);
    ASSERT_TRUE(e.has_value()) << f;
    ASSERT_EQ(e->kind, proto::Event::Kind::kResult) << f << ": " << e->json.dump();
    ASSERT_EQ(e->json["entries"].size(), 1u) << e->json.dump();
    EXPECT_EQ(e->json["entries"][0]["name"], f);
  }
  ExpectSlowGrepAnswer(FinalOf(*grep, std::chrono::steady_clock::now() + 60s));
}

// CANCEL of a queued operation: it never runs; of a running one: the
// stream ends at once with S218 and nothing more comes for it. The agent
// keeps serving, and closing its channel ends it without waiting for the
// grep still running.
TEST_F(AgentFs, CancelledFsOpsAnswerOnceAndQueuedOnesNeverRun) {
  PlantSlowGrepFile(*sb_, "/slow");
  std::vector<std::shared_ptr<proto::Stream>> greps;
  for (size_t i = 0; i < kPoolWorkers; ++i) greps.push_back(OpenOneShot(*sb_, SlowGrep("/slow")));
  auto mkdir = OpenOneShot(*sb_, json{{"op", "fs.mkdir"}, {"path", "/never"}});
  auto kept = OpenOneShot(*sb_, json{{"op", "fs.mkdir"}, {"path", "/kept"}});
  ASSERT_NE(mkdir, nullptr);
  ASSERT_NE(kept, nullptr);
  for (const auto& g : greps) ASSERT_NE(g, nullptr);
  mkdir->Cancel();
  greps[0]->Cancel();
  for (auto* s : {mkdir.get(), greps[0].get()}) {
    auto e = FinalOf(*s, std::chrono::steady_clock::now() + 5s);
    ASSERT_TRUE(e.has_value()) << "a cancel was not answered at once";
    ASSERT_EQ(e->kind, proto::Event::Kind::kError) << e->json.dump();
    EXPECT_EQ(e->json["code"], "S218");
  }
  auto e = FinalOf(*kept, std::chrono::steady_clock::now() + 120s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, proto::Event::Kind::kResult) << e->json.dump();
  for (size_t i = 1; i < greps.size(); ++i)
    ExpectSlowGrepAnswer(FinalOf(*greps[i], std::chrono::steady_clock::now() + 60s));
  EXPECT_EQ(CodeOf(Op("fs.stat", {{"path", "/never"}})), "S211") << "a cancelled queued mkdir ran";
  EXPECT_TRUE(Op("fs.stat", {{"path", "/kept"}}).ok());
  EXPECT_EQ(sb_->Exec({"echo", "alive"}).out, "alive\n");

  // A grep is running when the channel closes: the agent ends without
  // waiting for it (the grep alone takes over a second, see
  // SlowGrepHoldsNothingElse's grep_seconds).
  auto last = OpenOneShot(*sb_, SlowGrep("/slow"));
  ASSERT_NE(last, nullptr);
  ASSERT_TRUE(Op("info", json::object()).ok());  // the agent has read the grep's OPEN
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(sb_->CloseChannelAndWait(30s), 0);
  double exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(exit_s, 0.5) << "the agent's exit waited for a running grep";
  RecordProperty("exit_seconds", std::to_string(exit_s));
}

TEST_F(AgentFs, UnknownFieldsTypesAreChecked) {
  EXPECT_EQ(CodeOf(Op("fs.rm", {{"path", "/x"}, {"recursive", "yes"}})), "S001");
  EXPECT_EQ(CodeOf(Op("fs.grep", {{"path", "/"}, {"pattern", 5}})), "S001");
  EXPECT_EQ(CodeOf(Op("fs.grep", {{"path", "/"}, {"pattern", "x"}, {"include_glob", "*.py"}})), "S001");
  EXPECT_EQ(CodeOf(Op("fs.mv", {{"src", "/x"}})), "S001");
  EXPECT_EQ(CodeOf(Op("fs.stat", {{"path", std::string("a\0b", 3)}})), "S001");
}

}  // namespace
}  // namespace skiff::agent_test
