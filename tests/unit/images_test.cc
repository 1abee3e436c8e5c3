// Unit tests for images/: hashing, recipes, the store, the catalog, and
// layer / archive import, including hostile archives built here with
// libarchive.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/sha256.h"
#include "base/text.h"
#include "images/build.h"
#include "images/catalog.h"
#include "images/host_image.h"
#include "images/oci.h"
#include "images/recipe.h"
#include "images/store.h"
#include "sandbox/config.h"
#include "support/temp_dir.h"

namespace skiff::images {
namespace {
namespace fs = std::filesystem;

// ---------- helpers ----------

using testing_support::TempDir;

struct TarEntry {
  enum Kind { kFile, kDir, kSymlink, kHardlink, kCharDev, kBlockDev, kFifo } kind = kFile;
  std::string path;
  std::string data;    // file contents
  std::string target;  // symlink / hard link target
  int mode = 0644;
  int64_t uid = 0, gid = 0;
};

TarEntry File(std::string p, std::string data, int mode = 0644) {
  return {TarEntry::kFile, std::move(p), std::move(data), "", mode};
}
TarEntry Dir(std::string p, int mode = 0755) { return {TarEntry::kDir, std::move(p), "", "", mode}; }
TarEntry Symlink(std::string p, std::string t) {
  return {TarEntry::kSymlink, std::move(p), "", std::move(t), 0777};
}
TarEntry Hardlink(std::string p, std::string t) {
  return {TarEntry::kHardlink, std::move(p), "", std::move(t), 0644};
}

void WriteTar(const std::string& out, const std::vector<TarEntry>& entries, bool gzip = false) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  ASSERT_EQ(archive_write_open_filename(a, out.c_str()), ARCHIVE_OK);
  for (const auto& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.path.c_str());
    archive_entry_set_uid(e, t.uid);
    archive_entry_set_gid(e, t.gid);
    archive_entry_set_mtime(e, 1700000000, 0);
    switch (t.kind) {
      case TarEntry::kFile:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, static_cast<la_int64_t>(t.data.size()));
        break;
      case TarEntry::kDir:
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
      case TarEntry::kSymlink:
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, t.target.c_str());
        break;
      case TarEntry::kHardlink:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, t.target.c_str());
        break;
      case TarEntry::kCharDev:
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
        break;
      case TarEntry::kBlockDev:
        archive_entry_set_filetype(e, AE_IFBLK);
        archive_entry_set_rdevmajor(e, 8);
        archive_entry_set_rdevminor(e, 0);
        break;
      case TarEntry::kFifo:
        archive_entry_set_filetype(e, AE_IFIFO);
        break;
    }
    archive_entry_set_perm(e, static_cast<mode_t>(t.mode));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    if (t.kind == TarEntry::kFile && !t.data.empty()) {
      archive_write_data(a, t.data.data(), t.data.size());
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string Slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

// ---------- sha256 ----------

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;  // incremental across block boundaries: one million 'a'
  std::string chunk(999, 'a');
  for (int i = 0; i < 1000; ++i) h.Update(chunk);
  h.Update(std::string(1000, 'a'));
  EXPECT_EQ(h.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_TRUE(IsHexDigest(Sha256Hex("x")));
  EXPECT_FALSE(IsHexDigest("ABC"));
}

// ---------- recipes ----------

constexpr char kRecipe[] =
    "name: demo\nsuite: bookworm\nvariant: minbase\npackages: [python3, g++]\n"
    "env: [PATH=/usr/bin:/bin, LANG=C.UTF-8]\nworkdir: /root\nuser: root\n";

TEST(Recipe, ParsesAndHashesTheExactBytes) {
  auto r = ParseRecipe(kRecipe);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "demo");
  EXPECT_EQ(r->packages, (std::vector<std::string>{"python3", "g++"}));
  EXPECT_EQ(r->env.size(), 2u);
  EXPECT_EQ(r->workdir, "/root");
  EXPECT_EQ(r->digest, Sha256Hex(kRecipe));
  EXPECT_EQ(r->Version(), "bookworm-" + r->digest.substr(0, 12));
  EXPECT_EQ(r->OciRef(), "skiff.local/preset/demo:" + r->Version());
  // Any byte changes the version, even a comment.
  auto r2 = ParseRecipe(std::string(kRecipe) + "# comment\n");
  ASSERT_TRUE(r2.ok());
  EXPECT_NE(r2->digest, r->digest);
}

TEST(Recipe, RejectsBadFields) {
  const char* bad[] = {
      "suite: bookworm\nvariant: minbase\n",                                   // no name
      "name: x\nsuite: bookworm\nvariant: minbase\nextra: 1\n",                // unknown key
      "name: x\nsuite: bookworm\nvariant: nope\n",                             // variant
      "name: x\nsuite: bookworm\nvariant: minbase\npackages: ['--evil']\n",    // option injection
      "name: x\nsuite: bookworm\nvariant: minbase\npackages: ['a;rm -rf']\n",  // shell chars
      "name: x\nsuite: bookworm\nvariant: minbase\nenv: [NOEQUALS]\n",
      "name: x\nsuite: bookworm\nvariant: minbase\nworkdir: relative\n",
      "name: x\nsuite: bookworm\nvariant: minbase\nworkdir: /a/../b\n",
      "name: ../x\nsuite: bookworm\nvariant: minbase\n",
      "name: x\nsuite: bookworm\nvariant: minbase\npackages: notalist\n",
      "[1, 2]",
      "name: [unclosed",
  };
  for (const char* t : bad) {
    auto r = ParseRecipe(t);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.error().code(), Code::kS001) << t;
  }
}

constexpr char kRecipeWithFilesAndServices[] =
    "name: demo\nsuite: bookworm\nvariant: minbase\n"
    "files:\n"
    "  - path: /usr/local/lib/demo/server.py\n"
    "    source: server.py\n"
    "    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
    "    mode: \"0755\"\n"
    "services:\n"
    "  - name: web\n"
    "    command: [/usr/bin/python3, /usr/local/lib/demo/server.py]\n"
    "    ready: [/usr/bin/python3, /usr/local/lib/demo/server.py, --wait, \"5\"]\n"
    "    ready_timeout: 9\n";

TEST(Recipe, ParsesFilesAndServices) {
  auto r = ParseRecipe(kRecipeWithFilesAndServices);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].path, "/usr/local/lib/demo/server.py");
  EXPECT_EQ(r->files[0].source, "server.py");
  EXPECT_EQ(r->files[0].mode, 0755u);
  ASSERT_EQ(r->services.size(), 1u);
  EXPECT_EQ(r->services[0].name, "web");
  EXPECT_EQ(r->services[0].command,
            (std::vector<std::string>{"/usr/bin/python3", "/usr/local/lib/demo/server.py"}));
  EXPECT_EQ(r->services[0].ready.size(), 4u);
  EXPECT_EQ(r->services[0].ready_timeout_secs, 9u);
  // A file that is not compiled in, or whose bytes differ from the pin, is
  // refused before anything is built.
  EXPECT_EQ(RecipeFileBytes(r->files[0]).error().code(), Code::kS300);
}

TEST(Recipe, RejectsBadFilesAndServices) {
  const std::string head = "name: x\nsuite: bookworm\nvariant: minbase\n";
  const std::string hex(64, 'a');
  const std::vector<std::string> bad = {
      "files: x\n",
      "files:\n  - path: relative\n    source: a.py\n    sha256: " + hex + "\n",
      "files:\n  - path: /a/../etc/passwd\n    source: a.py\n    sha256: " + hex + "\n",
      "files:\n  - path: /dir/\n    source: a.py\n    sha256: " + hex + "\n",
      "files:\n  - path: /a\n    source: ../a.py\n    sha256: " + hex + "\n",
      "files:\n  - path: /a\n    source: sub/a.py\n    sha256: " + hex + "\n",
      "files:\n  - path: /a\n    source: a.py\n    sha256: ABC\n",
      "files:\n  - path: /a\n    source: a.py\n    sha256: " + hex + "\n    mode: \"4755\"\n",
      "files:\n  - path: /a\n    source: a.py\n    sha256: " + hex + "\n    owner: x\n",
      "files:\n  - path: /a\n    source: a.py\n    sha256: " + hex +
          "\n  - path: /a\n    source: b.py\n    sha256: " + hex + "\n",
      "services: x\n",
      "services:\n  - name: a\n",
      "services:\n  - name: a\n    command: []\n",
      "services:\n  - name: a\n    command: [\"\"]\n",
      "services:\n  - name: Bad_Name\n    command: [x]\n",
      "services:\n  - name: a\n    command: x\n",
      "services:\n  - name: a\n    command: [x]\n    ready_timeout: 0\n",
      "services:\n  - name: a\n    command: [x]\n    ready_timeout: 601\n",
      "services:\n  - name: a\n    command: [x]\n    ready_timeout: -1\n",
      "services:\n  - name: a\n    command: [x]\n    restart: always\n",
      "services:\n  - name: a\n    command: [x]\n  - name: a\n    command: [y]\n",
  };
  for (const auto& t : bad) {
    auto r = ParseRecipe(head + t);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.error().code(), Code::kS001) << t;
  }
}

// The code-interpreter preset: its server is compiled in, its pin matches
// the file in the repository (the message names the new value when it does
// not), and it declares the service the E2B create starts.
TEST(Recipe, CodeInterpreterPinsItsServerAndDeclaresTheService) {
  auto r = PresetRecipe("code-interpreter");
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->files.size(), 1u);
  auto bytes = RecipeFileBytes(r->files[0]);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message();
  EXPECT_EQ(*bytes, Slurp(std::string(SKIFF_SOURCE_DIR) + "/images/files/" + r->files[0].source));
  EXPECT_EQ(r->files[0].mode, 0755u);
  ASSERT_EQ(r->services.size(), 1u);
  EXPECT_EQ(r->services[0].name, "code-interpreter");
  EXPECT_EQ(r->services[0].command.back(), r->files[0].path);
  EXPECT_FALSE(r->services[0].ready.empty());
  for (const char* p : {"python3-ipykernel", "python3-jupyter-client", "python3-matplotlib"})
    EXPECT_NE(std::find(r->packages.begin(), r->packages.end(), p), r->packages.end()) << p;
}

TEST(Store, ServicesSurviveImageJsonAndOldEntriesHaveNone) {
  TempDir dir("images-test");
  Store store(dir.path());
  std::string d1 = Sha256Hex("svc"), d2 = Sha256Hex("plain");
  auto tmp = store.MakeTemp(d1);
  ASSERT_TRUE(tmp.ok());
  fs::create_directories(*tmp + "/rootfs");
  ImageMeta m;
  m.name = "svc";
  m.digest = d1;
  m.kind = "preset";
  m.source = "test";
  ImageService s;
  s.name = "web";
  s.command = {"/srv", "--port", "1"};
  s.ready = {"/probe"};
  s.ready_timeout_secs = 12;
  m.services = {s};
  ASSERT_TRUE(store.Commit(*tmp, m).ok());
  auto back = store.Read(d1);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->services.size(), 1u);
  EXPECT_EQ(back->services[0], s);
  EXPECT_NE(Slurp(store.EntryDir(d1) + "/image.json").find("services"), std::string::npos);
  auto tmp2 = store.MakeTemp(d2);
  ASSERT_TRUE(tmp2.ok());
  fs::create_directories(*tmp2 + "/rootfs");
  m.digest = d2;
  m.services.clear();
  ASSERT_TRUE(store.Commit(*tmp2, m).ok());
  EXPECT_EQ(Slurp(store.EntryDir(d2) + "/image.json").find("services"), std::string::npos)
      << "an entry without services is written as before";
  EXPECT_TRUE(store.Read(d2)->services.empty());
}

TEST(Recipe, PresetsAreCompiledInAndDistinct) {
  EXPECT_EQ(PresetNames(), (std::vector<std::string>{"python", "node", "base", "code-interpreter"}));
  std::set<std::string> digests;
  for (const auto& n : PresetNames()) {
    auto r = PresetRecipe(n);
    ASSERT_TRUE(r.ok()) << n << ": " << r.error().message();
    EXPECT_EQ(r->name, n);
    EXPECT_EQ(r->suite, "bookworm");
    EXPECT_EQ(r->variant, "minbase");
    EXPECT_TRUE(IsHexDigest(r->digest));
    // The compiled-in text is the file in the repository, byte for byte.
    EXPECT_EQ(r->text, Slurp(std::string(SKIFF_SOURCE_DIR) + "/images/recipes/" + n + ".yaml"));
    digests.insert(r->digest);
    bool has_path = false;
    for (const auto& e : r->env) has_path |= e.starts_with("PATH=");
    EXPECT_TRUE(has_path) << n;
  }
  EXPECT_EQ(digests.size(), 4u);
  auto py = PresetRecipe("python");
  for (const char* p : {"python3", "python3-pip", "python3-venv"}) {
    EXPECT_NE(std::find(py->packages.begin(), py->packages.end(), p), py->packages.end()) << p;
  }
  auto node = PresetRecipe("node");
  for (const char* p : {"nodejs", "npm"}) {
    EXPECT_NE(std::find(node->packages.begin(), node->packages.end(), p), node->packages.end());
  }
  EXPECT_EQ(PresetRecipe("host").error().code(), Code::kS100);
  EXPECT_EQ(PresetRecipe("../python").error().code(), Code::kS100);
}

// ---------- registry references ----------

TEST(ImageRef, Normalises) {
  auto r = ParseImageRef("debian");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->host, "registry-1.docker.io");
  EXPECT_EQ(r->repo, "library/debian");
  EXPECT_EQ(r->reference, "latest");
  EXPECT_EQ(r->scheme, "https");
  r = ParseImageRef("ghcr.io/acme/ml:1.4");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->host, "ghcr.io");
  EXPECT_EQ(r->repo, "acme/ml");
  EXPECT_EQ(r->reference, "1.4");
  r = ParseImageRef("127.0.0.1:5000/skiff/test@sha256:" + Sha256Hex("m"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->host, "127.0.0.1:5000");
  EXPECT_EQ(r->scheme, "http");
  EXPECT_EQ(r->reference, "sha256:" + Sha256Hex("m"));
  r = ParseImageRef("localhost:5000/x:y");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scheme, "http");
  EXPECT_EQ(ParseImageRef("docker.io/library/node:20")->host, "registry-1.docker.io");
  // localhost.evil.com is not loopback.
  EXPECT_EQ(ParseImageRef("localhost.evil.com/x")->scheme, "https");
  for (const char* bad : {"ghcr.io/../etc:1", "ghcr.io/a/b@md5:00", "ghcr.io/A/b", "x:ta g", "ghcr.io/a//b",
                          "ghcr.io/a/b:t?x"}) {
    auto b = ParseImageRef(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.error().code(), Code::kS001) << bad;
  }
}

// ---------- store ----------

// Installs a fake entry (a rootfs with one file) under `digest`.
void FakeInstall(const Store& store, const std::string& name, const std::string& digest,
                 std::vector<std::string> env = {"PATH=/bin"}) {
  auto tmp = store.MakeTemp(digest);
  ASSERT_TRUE(tmp.ok());
  fs::create_directories(*tmp + "/rootfs/bin");
  std::ofstream(*tmp + "/rootfs/bin/marker") << name;
  ImageMeta m;
  m.name = name;
  m.digest = digest;
  m.kind = "preset";
  m.source = "test";
  m.env = std::move(env);
  m.workdir = "/work";
  m.user = "1000";
  ASSERT_TRUE(store.Commit(*tmp, m).ok());
  ASSERT_TRUE(store.SetCurrent(name, digest).ok());
}

TEST(Store, CommitReadCurrentAndGc) {
  TempDir dir("images-test");
  Store store(dir.path());
  std::string d1 = Sha256Hex("one"), d2 = Sha256Hex("two");
  EXPECT_FALSE(store.Read(d1));
  FakeInstall(store, "alpha", d1);
  FakeInstall(store, "beta", d2);
  auto m = store.Read(d1);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->name, "alpha");
  EXPECT_EQ(m->workdir, "/work");
  EXPECT_EQ(store.Current("alpha"), d1);
  EXPECT_EQ(store.CurrentNames(), (std::vector<std::string>{"alpha", "beta"}));
  // Repointing is a rename of a symlink: the name always resolves.
  ASSERT_TRUE(store.SetCurrent("alpha", d2).ok());
  EXPECT_EQ(store.Current("alpha"), d2);
  // An abandoned half-build and an in-progress one.
  std::string d3 = Sha256Hex("three"), d4 = Sha256Hex("four");
  auto abandoned = store.MakeTemp(d3);
  auto in_progress = store.MakeTemp(d4);
  ASSERT_TRUE(abandoned.ok() && in_progress.ok());
  auto held = store.Lock(d4);
  ASSERT_TRUE(held.ok());
  auto gc = store.Gc();
  ASSERT_TRUE(gc.ok()) << gc.error().message();
  EXPECT_FALSE(store.Read(d1)) << "unreferenced entry survived gc";
  EXPECT_TRUE(store.Read(d2));
  EXPECT_FALSE(Exists(*abandoned));
  EXPECT_TRUE(Exists(*in_progress)) << "gc removed a build whose builder holds the lock";
  // A half-built entry is never visible: an entry without image.json is not read.
  fs::create_directories(store.RootfsDir(d1));
  EXPECT_FALSE(store.Read(d1));
  EXPECT_FALSE(store.Current("../etc"));
  EXPECT_FALSE(store.SetCurrent("../etc", d2).ok());
}

TEST(Store, LockIsExclusive) {
  TempDir dir("images-test");
  Store store(dir.path());
  std::string d = Sha256Hex("lock");
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&] {
      for (int k = 0; k < 20; ++k) {
        auto l = store.Lock(d);
        ASSERT_TRUE(l.ok());
        int now = ++inside;
        int prev = max_inside.load();
        while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        --inside;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(max_inside.load(), 1);
}

// A sandbox's lease, held by another process: gc and rm leave the entry
// alone until the holder dies (SIGKILL: no cleanup code runs).
TEST(Store, LeaseOfAnotherProcessKeepsTheEntryUntilItDies) {
  TempDir dir("images-test");
  Store store(dir.path());
  std::string d1 = Sha256Hex("leased"), d2 = Sha256Hex("other");
  FakeInstall(store, "app", d1);
  FakeInstall(store, "next", d2);
  EXPECT_FALSE(store.InUse(d1));
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(p[0]);
    auto lease = store.Lease(d1);
    char ok = lease.ok() ? 'y' : 'n';
    (void)!::write(p[1], &ok, 1);
    for (;;) ::pause();
  }
  ::close(p[1]);
  char got = 0;
  ASSERT_EQ(::read(p[0], &got, 1), 1);
  ::close(p[0]);
  ASSERT_EQ(got, 'y');
  EXPECT_TRUE(store.InUse(d1));

  auto rm = store.Remove("app");
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.error().code(), Code::kS300);
  EXPECT_NE(rm.error().message().find("in use by a running sandbox"), std::string::npos);
  EXPECT_EQ(store.Current("app"), d1);
  // Unreferenced now, but leased: gc keeps it and says so.
  ASSERT_TRUE(store.SetCurrent("app", d2).ok());
  auto gc = store.Gc();
  ASSERT_TRUE(gc.ok()) << gc.error().message();
  EXPECT_EQ(gc->kept_in_use, std::vector<std::string>{d1});
  EXPECT_TRUE(gc->removed.empty());
  EXPECT_TRUE(store.Read(d1));

  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_FALSE(store.InUse(d1));
  gc = store.Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->removed, std::vector<std::string>{d1});
  EXPECT_FALSE(Exists(store.EntryDir(d1)));
  // rm of a name whose entry another name shares keeps the files.
  auto rm_next = store.Remove("next");
  ASSERT_TRUE(rm_next.ok()) << rm_next.error().message();
  EXPECT_TRUE(rm_next->removed.empty());
  EXPECT_TRUE(store.Read(d2));
  auto rm_app = store.Remove("app");
  ASSERT_TRUE(rm_app.ok());
  EXPECT_EQ(rm_app->removed, std::vector<std::string>{d2});
  EXPECT_FALSE(Exists(store.EntryDir(d2)));
  EXPECT_EQ(store.Remove("app").error().code(), Code::kS101);
  EXPECT_EQ(store.Remove("../x").error().code(), Code::kS001);
}

// A lease on an entry that is gone fails instead of handing out its paths.
TEST(Store, LeaseOfAMissingEntryFails) {
  TempDir dir("images-test");
  Store store(dir.path());
  std::string d = Sha256Hex("missing");
  EXPECT_FALSE(store.Lease(d).ok());
  EXPECT_FALSE(store.Lease("../../etc").ok());
  FakeInstall(store, "x", d);
  auto l = store.Lease(d);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(store.InUse(d));
  l = Error(Code::kS300, "released");
  EXPECT_FALSE(store.InUse(d));
}

// ---------- catalog ----------

TEST(Catalog, OrderAllowedInstalled) {
  TempDir dir("images-test");
  Config c;
  c.images_dir = dir.path();
  c.custom_images = {{"zeta", "/nonexistent/zeta.tar"}, {"alpha", "registry.example/alpha:1"}};
  Catalog cat(ImagePolicyFor(c));
  auto list = cat.List();
  std::vector<std::string> names;
  for (const auto& e : list) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"python", "node", "base", "code-interpreter", "host", "alpha",
                                             "zeta"}));
  EXPECT_EQ(list[0].kind, "preset");
  EXPECT_TRUE(list[0].oci_ref.starts_with("skiff.local/preset/python:bookworm-"));
  EXPECT_EQ(list[3].kind, "preset");
  EXPECT_EQ(list[4].kind, "host");
  EXPECT_EQ(list[4].oci_ref, "skiff.local/host");
  EXPECT_EQ(list[5].kind, "custom");
  EXPECT_EQ(list[5].oci_ref, "registry.example/alpha:1");
  // Default allowlist: python, node and code-interpreter only.
  std::vector<bool> allowed;
  for (const auto& e : list) allowed.push_back(e.allowed);
  EXPECT_EQ(allowed, (std::vector<bool>{true, true, false, true, false, false, false}));
  for (const auto& e : list) EXPECT_EQ(e.installed, e.kind == "host") << e.name;

  c.image_allowlist = std::vector<std::string>{"base", "alpha"};
  cat = Catalog(ImagePolicyFor(c));  // the catalog holds a copy of the policy
  list = cat.List();
  allowed.clear();
  for (const auto& e : list) allowed.push_back(e.allowed);
  EXPECT_EQ(allowed, (std::vector<bool>{false, false, true, false, false, true, false}));

  // Installing base (a fake entry under its recipe digest) flips `installed`.
  Store store(dir.path());
  FakeInstall(store, "base", PresetRecipe("base")->digest);
  EXPECT_TRUE(cat.Installed("base"));
  EXPECT_TRUE(cat.List()[2].installed);
  EXPECT_FALSE(cat.Installed("python"));
  EXPECT_TRUE(cat.Known("zeta"));
  EXPECT_FALSE(cat.Known("ghcr.io/x/y"));
}

TEST(Catalog, ResolveInstalledAndErrors) {
  TempDir dir("images-test");
  Config c;
  c.images_dir = dir.path();
  c.allow_all_images = true;
  c.auto_install = false;
  c.custom_images = {{"arch", dir / "missing.tar"}, {"reg", "registry.example/x:1"}};
  Catalog cat(ImagePolicyFor(c));
  Store store(dir.path());
  std::string digest = PresetRecipe("base")->digest;
  FakeInstall(store, "base", digest, {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"});

  auto img = cat.Resolve("base");
  ASSERT_TRUE(img.ok()) << img.error().message();
  EXPECT_EQ(img->name, "base");
  ASSERT_EQ(img->rootfs.layers.size(), 1u);
  EXPECT_EQ(img->rootfs.layers[0].target, "/");
  EXPECT_EQ(img->rootfs.layers[0].lower, (std::vector<std::string>{store.RootfsDir(digest)}));
  EXPECT_EQ(img->env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(img->workdir, "/work");
  EXPECT_EQ(img->user, "1000");
  EXPECT_EQ(img->rootfs.block_fstype, "erofs");
  EXPECT_TRUE(Exists(img->rootfs.block_image));

  auto s101 = cat.Resolve("python");
  ASSERT_FALSE(s101.ok());
  EXPECT_EQ(s101.error().code(), Code::kS101);
  EXPECT_EQ(s101.error().message(), "image 'python' is not installed on this host and auto_install is off");

  auto s100 = cat.Resolve("nope");
  ASSERT_FALSE(s100.ok());
  EXPECT_EQ(s100.error().code(), Code::kS100);
  EXPECT_TRUE(
      s100.error().message().starts_with("image 'nope' is not in the catalog or not allowed; allowed images: "
                                         "python, node, base, code-interpreter"))
      << s100.error().message();

  c.allow_all_images = false;
  c.image_allowlist = std::vector<std::string>{};
  cat = Catalog(ImagePolicyFor(c));  // the catalog holds a copy of the policy
  auto denied = cat.Resolve("base");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().message(),
            "image 'base' is not in the catalog or not allowed; allowed images: none");

  // auto_install: failures are S102 with the detail, never a silent fallback.
  c.allow_all_images = true;
  c.auto_install = true;
  cat = Catalog(ImagePolicyFor(c));  // the catalog holds a copy of the policy
  auto s102 = cat.Resolve("arch");
  ASSERT_FALSE(s102.ok());
  EXPECT_EQ(s102.error().code(), Code::kS102);
  EXPECT_TRUE(s102.error().message().starts_with("auto-install failed for image 'arch': "))
      << s102.error().message();
  auto pull = cat.Resolve("reg");
  ASSERT_FALSE(pull.ok());
  EXPECT_EQ(pull.error().code(), Code::kS102);
}

// What Resolve hands out is leased until the caller drops it.
TEST(Catalog, ResolvedImageHoldsALease) {
  TempDir dir("images-test");
  Config c;
  c.images_dir = dir.path();
  c.allow_all_images = true;
  c.auto_install = false;
  Catalog cat(ImagePolicyFor(c));
  Store store(dir.path());
  std::string digest = PresetRecipe("base")->digest;
  FakeInstall(store, "base", digest);
  auto img = cat.Resolve("base");
  ASSERT_TRUE(img.ok()) << img.error().message();
  ASSERT_TRUE(img->lease);
  EXPECT_TRUE(store.InUse(digest));
  ASSERT_TRUE(store.RemoveCurrent("base").ok());
  auto gc = store.Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->kept_in_use, std::vector<std::string>{digest});
  EXPECT_TRUE(Exists(img->rootfs.layers[0].lower[0] + "/bin/marker"));
  img = Error(Code::kS300, "dropped");
  gc = store.Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->removed, std::vector<std::string>{digest});
  // The preset is gone: not installed, auto_install off.
  auto again = cat.Resolve("base");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kS101);
  // host needs no lease.
  auto host = cat.Resolve("host");
  if (host.ok()) {
    EXPECT_FALSE(host->lease);
  }
}

// ---------- layers ----------

class LayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "rootfs";
    outside_ = dir_ / "outside";
    fs::create_directories(root_);
    fs::create_directories(outside_);
  }
  Result<LayerReport> Apply(const std::vector<TarEntry>& entries, bool gzip = false) {
    std::string tar = dir_ / ("layer" + std::to_string(n_++) + ".tar");
    WriteTar(tar, entries, gzip);
    return ApplyLayer(root_, tar);
  }
  // Nothing was created outside the rootfs.
  void ExpectOutsideUntouched() {
    EXPECT_TRUE(fs::is_empty(outside_));
    for (const auto& e : fs::directory_iterator(dir_.path())) {
      std::string n = e.path().filename().string();
      EXPECT_TRUE(n == "rootfs" || n == "outside" || n.starts_with("layer")) << n;
    }
  }
  TempDir dir_{"images-test"};
  std::string root_, outside_;
  int n_ = 0;
};

TEST_F(LayerTest, ExtractsFilesDirsLinks) {
  auto r = Apply({Dir("etc", 0755),
                  File("etc/hello", "hi\n", 0640),
                  Symlink("link", "etc/hello"),
                  Hardlink("etc/hello2", "etc/hello"),
                  File("deep/a/b/c", "x"),
                  {TarEntry::kFifo, "fifo", "", "", 0600}},
                 /*gzip=*/true);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(Slurp(root_ + "/etc/hello"), "hi\n");
  struct stat st;
  ASSERT_EQ(::lstat((root_ + "/etc/hello").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_EQ(fs::read_symlink(root_ + "/link"), "etc/hello");
  EXPECT_EQ(Slurp(root_ + "/deep/a/b/c"), "x");
  ASSERT_EQ(::lstat((root_ + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(LayerTest, WhiteoutsRemoveLowerEntries) {
  ASSERT_TRUE(Apply({File("a/x", "1"), File("a/y", "2"), File("b/z", "3")}).ok());
  auto r = Apply({File("a/.wh.x", ""), File(".wh.b", ""), File("a/new", "4")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->whiteouts, 2u);
  EXPECT_FALSE(Exists(root_ + "/a/x"));
  EXPECT_FALSE(Exists(root_ + "/a/.wh.x"));
  EXPECT_EQ(Slurp(root_ + "/a/y"), "2");
  EXPECT_FALSE(Exists(root_ + "/b"));
  EXPECT_EQ(Slurp(root_ + "/a/new"), "4");
}

TEST_F(LayerTest, OpaqueDirectoryHidesLowerButKeepsItsOwnLayer) {
  ASSERT_TRUE(Apply({File("d/old1", "1"), File("d/sub/old2", "2"), File("keep", "k")}).ok());
  // The marker comes after the layer's own entry: it must not remove it.
  auto r = Apply({File("d/new", "n"), File("d/.wh..wh..opq", "")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(Exists(root_ + "/d/old1"));
  EXPECT_FALSE(Exists(root_ + "/d/sub"));
  EXPECT_EQ(Slurp(root_ + "/d/new"), "n");
  EXPECT_FALSE(Exists(root_ + "/d/.wh..wh..opq"));
  EXPECT_EQ(Slurp(root_ + "/keep"), "k");
}

TEST_F(LayerTest, AbsolutePathsAreMadeRelative) {
  std::string name = "skiff-abs-" + RandomHex(6);
  auto r = Apply({File(outside_ + "/" + name, "evil"), File("/" + name, "evil")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->absolute_paths, 2u);
  EXPECT_FALSE(Exists("/" + name));
  EXPECT_EQ(Slurp(root_ + "/" + name), "evil");
  EXPECT_EQ(Slurp(root_ + outside_ + "/" + name), "evil");
  ExpectOutsideUntouched();
}

TEST_F(LayerTest, DotDotEntriesAreRefused) {
  auto r = Apply({File("../outside/pwned", "evil")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  auto r2 = Apply({File("a/../../outside/pwned", "evil")});
  ASSERT_FALSE(r2.ok());
  auto r3 = Apply({Dir("a"), File("a/.wh...", "")});  // whiteout of ".."
  ASSERT_FALSE(r3.ok());
  ExpectOutsideUntouched();
}

TEST_F(LayerTest, SymlinkThenFileIsRefused) {
  // Absolute and relative symlinks pointing out, then a write through them.
  auto r = Apply({Symlink("esc", outside_), File("esc/pwned", "evil")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  auto r2 = Apply({Symlink("rel", "../outside"), Dir("rel/sub"), File("rel/sub/pwned", "x")});
  ASSERT_FALSE(r2.ok());
  // Across layers: the symlink comes from a lower layer.
  ASSERT_TRUE(Apply({Symlink("lower", outside_)}).ok());
  auto r3 = Apply({File("lower/pwned", "evil")});
  ASSERT_FALSE(r3.ok());
  // A whiteout through a symlink must not delete outside either.
  std::ofstream(outside_ + "/victim") << "v";
  auto r4 = Apply({File("lower/.wh.victim", "")});
  ASSERT_FALSE(r4.ok());
  EXPECT_TRUE(Exists(outside_ + "/victim"));
  fs::remove(outside_ + "/victim");
  // A final-component symlink is replaced, never written through.
  ASSERT_TRUE(Apply({Symlink("f", outside_ + "/target")}).ok());
  ASSERT_TRUE(Apply({File("f", "data")}).ok());
  EXPECT_EQ(Slurp(root_ + "/f"), "data");
  ExpectOutsideUntouched();
}

TEST_F(LayerTest, HardLinksOutsideAreRefused) {
  std::string victim = outside_ + "/secret";
  std::ofstream(victim) << "secret";
  struct stat before;
  ASSERT_EQ(::stat(victim.c_str(), &before), 0);
  EXPECT_FALSE(Apply({Hardlink("h1", "../outside/secret")}).ok());
  // Absolute targets resolve inside the tree, where nothing exists.
  EXPECT_FALSE(Apply({Hardlink("h2", victim)}).ok());
  // Through a symlink in the tree.
  EXPECT_FALSE(Apply({Symlink("s", outside_), Hardlink("h3", "s/secret")}).ok());
  // To a directory.
  EXPECT_FALSE(Apply({Dir("d"), Hardlink("h4", "d")}).ok());
  struct stat after;
  ASSERT_EQ(::stat(victim.c_str(), &after), 0);
  EXPECT_EQ(after.st_nlink, before.st_nlink);
  EXPECT_EQ(after.st_nlink, 1u);
  // Hard links to a symlink link the symlink itself, not its target.
  ASSERT_TRUE(Apply({Symlink("s2", victim), Hardlink("h5", "s2")}).ok());
  struct stat h5;
  ASSERT_EQ(::lstat((root_ + "/h5").c_str(), &h5), 0);
  EXPECT_TRUE(S_ISLNK(h5.st_mode));
  ASSERT_EQ(::stat(victim.c_str(), &after), 0);
  EXPECT_EQ(after.st_nlink, 1u);
}

TEST_F(LayerTest, DeviceNodesAreNotCreated) {
  auto r = Apply({{TarEntry::kCharDev, "dev/mem2", "", "", 0666},
                  {TarEntry::kBlockDev, "dev/sda2", "", "", 0666},
                  File("ok", "1")});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->skipped_devices, 2u);
  EXPECT_FALSE(Exists(root_ + "/dev/mem2"));
  EXPECT_FALSE(Exists(root_ + "/dev/sda2"));
  EXPECT_EQ(Slurp(root_ + "/ok"), "1");
}

TEST_F(LayerTest, SetuidAndSetgidAreDropped) {
  auto r = Apply(
      {File("suid", "x", 04755), File("sgid", "x", 02755), Dir("sticky", 01777), Dir("sgiddir", 02775)});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stripped_setid, 3u);
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/suid").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(::stat((root_ + "/sgid").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(::stat((root_ + "/sticky").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
  ASSERT_EQ(::stat((root_ + "/sgiddir").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0775u);
}

TEST_F(LayerTest, OwnersAreKeptAndClamped) {
  if (::geteuid() != 0) GTEST_SKIP() << "owners are only applied when running as root";
  TarEntry a = File("a", "x");
  a.uid = 1000;
  a.gid = 1001;
  TarEntry b = File("b", "x");
  b.uid = 4000000;
  b.gid = 70000;
  ASSERT_TRUE(Apply({a, b}).ok());
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1001u);
  ASSERT_EQ(::stat((root_ + "/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
}

// ---------- archives ----------

struct BuiltImage {
  std::string config;  // bytes
  std::vector<std::string> layer_files;
};

// Two layers and a config with Env/WorkingDir/User, written into `dir`.
BuiltImage MakeImage(const TempDir& dir, bool break_diff_id = false) {
  BuiltImage img;
  std::string l1 = dir / "l1.tar", l2 = dir / "l2.tar";
  WriteTar(l1, {File("bin/tool", "v1", 0755), File("etc/os", "test"), File("gone", "g")});
  WriteTar(l2, {File("bin/tool", "v2", 0755), File(".wh.gone", ""), File("app/main", "m")});
  img.layer_files = {l1, l2};
  nlohmann::json diff = nlohmann::json::array();
  for (const auto& l : img.layer_files) diff.push_back(*LayerDiffId(l));
  if (break_diff_id) diff[1] = "sha256:" + Sha256Hex("not it");
  nlohmann::json config = {
      {"architecture", "amd64"},
      {"os", "linux"},
      {"config", {{"Env", {"PATH=/app:/bin", "MODE=test"}}, {"WorkingDir", "/app"}, {"User", "app"}}},
      {"rootfs", {{"type", "layers"}, {"diff_ids", diff}}}};
  img.config = config.dump();
  return img;
}

void WriteMember(archive* a, const std::string& name, const std::string& data) {
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  archive_write_header(a, e);
  archive_write_data(a, data.data(), data.size());
  archive_entry_free(e);
}

std::string DockerSave(const TempDir& dir, const BuiltImage& img, const std::string& out) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, out.c_str());
  std::string cfg_name = Sha256Hex(img.config) + ".json";
  WriteMember(a, cfg_name, img.config);
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < img.layer_files.size(); ++i) {
    std::string n = "layer" + std::to_string(i) + "/layer.tar";
    WriteMember(a, n, Slurp(img.layer_files[i]));
    layers.push_back(n);
  }
  nlohmann::json manifest = {{{"Config", cfg_name}, {"RepoTags", {"test:1"}}, {"Layers", layers}}};
  WriteMember(a, "manifest.json", manifest.dump());
  archive_write_close(a);
  archive_write_free(a);
  (void)dir;
  return out;
}

std::string OciLayout(const BuiltImage& img, const std::string& out, bool corrupt_blob = false) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, out.c_str());
  auto blob = [&](const std::string& data) {
    std::string d = Sha256Hex(data);
    WriteMember(a, "blobs/sha256/" + d, corrupt_blob ? data + "x" : data);
    return nlohmann::json{{"digest", "sha256:" + d}, {"size", data.size()}};
  };
  auto cfg = blob(img.config);
  cfg["mediaType"] = "application/vnd.oci.image.config.v1+json";
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : img.layer_files) {
    auto d = blob(Slurp(l));
    d["mediaType"] = "application/vnd.oci.image.layer.v1.tar";
    layers.push_back(d);
  }
  nlohmann::json manifest = {{"schemaVersion", 2},
                             {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"config", cfg},
                             {"layers", layers}};
  auto md = blob(manifest.dump());
  md["mediaType"] = "application/vnd.oci.image.manifest.v1+json";
  md["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  // A manifest list with an arm64 decoy first: linux/amd64 must be chosen.
  nlohmann::json index = {{"schemaVersion", 2},
                          {"manifests",
                           {{{"digest", "sha256:" + Sha256Hex("decoy")},
                             {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"platform", {{"os", "linux"}, {"architecture", "arm64"}}}},
                            md}}};
  WriteMember(a, "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  WriteMember(a, "index.json", index.dump());
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

TEST(Import, DockerSaveAndOciLayoutGiveTheSameImage) {
  TempDir dir("images-test");
  Store store(dir / "store");
  BuiltImage img = MakeImage(dir);
  auto d = ImportArchive(store, "fromdocker", DockerSave(dir, img, dir / "docker.tar"));
  ASSERT_TRUE(d.ok()) << d.error().message();
  auto o = ImportArchive(store, "fromoci", OciLayout(img, dir / "oci.tar"));
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(d->digest, Sha256Hex(img.config));
  EXPECT_EQ(d->digest, o->digest);
  EXPECT_EQ(store.Current("fromdocker"), store.Current("fromoci"));
  std::string rootfs = store.RootfsDir(d->digest);
  EXPECT_EQ(Slurp(rootfs + "/bin/tool"), "v2");
  EXPECT_EQ(Slurp(rootfs + "/app/main"), "m");
  EXPECT_FALSE(Exists(rootfs + "/gone"));
  EXPECT_EQ(d->env, (std::vector<std::string>{"PATH=/app:/bin", "MODE=test"}));
  EXPECT_EQ(d->workdir, "/app");
  EXPECT_EQ(d->user, "app");
  // Nothing is left in tmp/.
  EXPECT_TRUE(fs::is_empty(dir / "store/tmp"));

  // The catalog resolves the custom image with the config's defaults.
  Config c;
  c.images_dir = dir / "store";
  c.allow_all_images = true;
  c.auto_install = false;
  c.custom_images = {{"fromoci", dir / "oci.tar"}};
  Catalog cat(ImagePolicyFor(c));
  auto r = cat.Resolve("fromoci");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->rootfs.layers[0].lower[0], rootfs);
  EXPECT_EQ(r->workdir, "/app");
}

TEST(Import, AutoInstallImportsAnArchiveOnFirstResolve) {
  TempDir dir("images-test");
  BuiltImage img = MakeImage(dir);
  Config c;
  c.images_dir = dir / "store";
  c.allow_all_images = true;
  c.custom_images = {{"app", DockerSave(dir, img, dir / "app.tar")}};
  Catalog cat(ImagePolicyFor(c));
  EXPECT_FALSE(cat.Installed("app"));
  auto r = cat.Resolve("app");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(cat.Installed("app"));
  EXPECT_EQ(r->env[1], "MODE=test");
}

// Concurrent installs of one image left exactly one store entry and no
// temporary directory behind.
void ExpectOneEntryAndNoTemp(const fs::path& store) {
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(store / "store")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  EXPECT_TRUE(fs::is_empty(store / "tmp"));
}

TEST(Import, ConcurrentImportsOfOneImageBuildOnce) {
  TempDir dir("images-test");
  Store store(dir / "store");
  BuiltImage img = MakeImage(dir);
  std::string tar = DockerSave(dir, img, dir / "img.tar");
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      if (ImportArchive(store, "n" + std::to_string(i), tar).ok()) ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 4);
  ExpectOneEntryAndNoTemp(dir / "store");
}

// Concurrent first uses through the catalog (auto-install) build once: one
// caller applies the layers, the others wait on the lock and reuse it.
TEST(Import, ConcurrentFirstResolvesBuildOnce) {
  TempDir dir("images-test");
  BuiltImage img = MakeImage(dir);
  std::string tar = DockerSave(dir, img, dir / "app.tar");
  std::mutex mu;
  int layer_lines = 0;
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  std::vector<std::string> roots(6);
  for (int i = 0; i < 6; ++i) {
    ts.emplace_back([&, i] {
      Config c;
      c.images_dir = dir / "store";
      c.allow_all_images = true;
      c.custom_images = {{"app", tar}};
      Catalog cat(ImagePolicyFor(c));
      cat.SetProgress([&](const std::string& l) {
        std::lock_guard<std::mutex> lk(mu);
        if (l.starts_with("layer 1/")) ++layer_lines;
      });
      auto r = cat.Resolve("app");
      if (r.ok()) {
        ++ok;
        roots[static_cast<size_t>(i)] = r->rootfs.layers[0].lower[0];
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(layer_lines, 1) << "layers were applied more than once";
  for (const auto& r : roots) EXPECT_EQ(r, roots[0]);
  ExpectOneEntryAndNoTemp(dir / "store");
}

// A build interrupted half-way (an entry without image.json, a temp dir)
// is never used: with auto_install off the image is not installed, with it
// on the image is built afresh over the leftover.
TEST(Catalog, HalfBuiltImageIsNeverUsed) {
  TempDir dir("images-test");
  Store store(dir / "store");
  ASSERT_TRUE(store.Init().ok());
  std::string digest = PresetRecipe("base")->digest;
  fs::create_directories(store.RootfsDir(digest) + "/bin");
  std::ofstream(store.RootfsDir(digest) + "/bin/half") << "x";
  ASSERT_TRUE(store.SetCurrent("base", digest).ok());
  auto tmp = store.MakeTemp(digest);
  ASSERT_TRUE(tmp.ok());
  fs::create_directories(*tmp + "/rootfs");
  Config c;
  c.images_dir = dir / "store";
  c.allow_all_images = true;
  c.auto_install = false;
  Catalog cat(ImagePolicyFor(c));
  EXPECT_FALSE(cat.Installed("base"));
  auto r = cat.Resolve("base");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS101);
  EXPECT_FALSE(store.Read(digest));

  // Same for an archive import whose entry was left half-written.
  BuiltImage img = MakeImage(dir);
  std::string tar = DockerSave(dir, img, dir / "app.tar");
  std::string app = Sha256Hex(img.config);
  fs::create_directories(store.RootfsDir(app));
  std::ofstream(store.RootfsDir(app) + "/half") << "x";
  ASSERT_TRUE(store.SetCurrent("app", app).ok());
  c.custom_images = {{"app", tar}};
  cat = Catalog(ImagePolicyFor(c));  // the catalog holds a copy of the policy
  EXPECT_FALSE(cat.Installed("app"));
  EXPECT_EQ(cat.Resolve("app").error().code(), Code::kS101);
  c.auto_install = true;
  cat = Catalog(ImagePolicyFor(c));  // the catalog holds a copy of the policy
  auto built = cat.Resolve("app");
  ASSERT_TRUE(built.ok()) << built.error().message();
  std::string rootfs = built->rootfs.layers[0].lower[0];
  EXPECT_EQ(rootfs, store.RootfsDir(app));
  EXPECT_FALSE(Exists(rootfs + "/half")) << "the leftover was used";
  EXPECT_EQ(Slurp(rootfs + "/bin/tool"), "v2");
}

TEST(Import, VerificationFailuresInstallNothing) {
  TempDir dir("images-test");
  Store store(dir / "store");
  BuiltImage bad = MakeImage(dir, /*break_diff_id=*/true);
  auto r = ImportArchive(store, "bad", DockerSave(dir, bad, dir / "bad.tar"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("diff_id"), std::string::npos) << r.error().message();
  BuiltImage good = MakeImage(dir);
  auto r2 = ImportArchive(store, "corrupt", OciLayout(good, dir / "corrupt.tar", true));
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message().find("digest mismatch"), std::string::npos);
  EXPECT_FALSE(store.Current("bad"));
  EXPECT_FALSE(store.Current("corrupt"));
  EXPECT_TRUE(fs::is_empty(dir / "store/store"));
  EXPECT_TRUE(fs::is_empty(dir / "store/tmp"));
  // Reserved names.
  EXPECT_FALSE(ImportArchive(store, "python", dir / "bad.tar").ok());
  EXPECT_FALSE(ImportArchive(store, "host", dir / "bad.tar").ok());
}

TEST(Import, HostileOuterArchiveIsRefused) {
  TempDir dir("images-test");
  Store store(dir / "store");
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  std::string out = dir / "evil.tar";
  archive_write_open_filename(a, out.c_str());
  WriteMember(a, "../../escape.json", "{}");
  archive_write_close(a);
  archive_write_free(a);
  auto r = ImportArchive(store, "evil", out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  EXPECT_FALSE(Exists(dir / "escape.json"));
  EXPECT_FALSE(Exists(dir / "store/escape.json"));
}

// ---------- host image skeleton stamp ----------

int64_t NowNs() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class HostStampTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(dir / "certs");
    WriteText(dir / "certs/bundle.crt", "aaaa");
    fs::create_symlink("/usr/share/x", dir / "certs/link.pem");
    WriteText(dir / "ld.so.cache", "cache");
    // Older than the scan: a stamp is only written for paths whose last
    // change is more than the margin before the scan began.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    watched = {dir / "certs", dir / "certs/bundle.crt", dir / "ld.so.cache", dir / "missing"};
    stamp = host_image::MakeStamp(kHash, watched, NowNs());
    ASSERT_FALSE(stamp.empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past a coarse clock tick
  }
  static constexpr const char* kHash = "0123456789abcdef";
  TempDir dir{"images-test"};
  std::vector<std::string> watched;
  std::string stamp;
};

TEST_F(HostStampTest, UnchangedPathsNameTheSkeleton) {
  EXPECT_EQ(host_image::StampedHash(stamp), std::optional<std::string>(kHash));
}

TEST_F(HostStampTest, FileRewrittenInPlaceWithTheSameSize) {
  WriteText(dir / "certs/bundle.crt", "bbbb");
  EXPECT_EQ(host_image::StampedHash(stamp), std::nullopt);
}

TEST_F(HostStampTest, SymlinkReplacedInAWatchedDirectory) {
  fs::remove(dir / "certs/link.pem");
  fs::create_symlink("/usr/share/y", dir / "certs/link.pem");
  EXPECT_EQ(host_image::StampedHash(stamp), std::nullopt);
}

TEST_F(HostStampTest, EntryAddedToAWatchedDirectory) {
  WriteText(dir / "certs/new.pem", "x");
  EXPECT_EQ(host_image::StampedHash(stamp), std::nullopt);
}

TEST_F(HostStampTest, MissingPathAppearsOrPresentPathGoes) {
  WriteText(dir / "missing", "now here");
  EXPECT_EQ(host_image::StampedHash(stamp), std::nullopt);
  fs::remove(dir / "missing");
  EXPECT_EQ(host_image::StampedHash(stamp), std::optional<std::string>(kHash));
  fs::remove(dir / "ld.so.cache");
  EXPECT_EQ(host_image::StampedHash(stamp), std::nullopt);
}

TEST_F(HostStampTest, NoStampForRecentChangesOrUnrepresentablePaths) {
  // ld.so.cache changed after "the scan began": what was read may be older.
  EXPECT_EQ(host_image::MakeStamp(kHash, watched, 0), "");
  WriteText(dir / "a\nb", "x");
  EXPECT_EQ(host_image::MakeStamp(kHash, {dir / "a\nb"}, NowNs()), "");
}

TEST_F(HostStampTest, MalformedStampsNameNothing) {
  std::string body = stamp.substr(stamp.find('\n', stamp.find('\n') + 1) + 1);
  for (const std::string& bad :
       {std::string(), std::string("skiff-host-etc-stamp 2\n") + kHash + "\n" + body,
        "skiff-host-etc-stamp 1\n../../etc/xx\n" + body, "skiff-host-etc-stamp 1\n0123456789ABCDEF\n" + body,
        std::string("skiff-host-etc-stamp 1\n") + kHash + "\n",
        std::string("skiff-host-etc-stamp 1\n") + kHash + "\n/etc/hostname no-tab\n"})
    EXPECT_EQ(host_image::StampedHash(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace skiff::images
