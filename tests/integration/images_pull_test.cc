// Registry pull against Debian's docker-registry on loopback: the test
// builds an OCI image layout itself, pushes it with skopeo, pulls it
// through skiff, and compares with an import of the same image.
#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "base/sha256.h"
#include "base/text.h"
#include "images/build.h"
#include "images/catalog.h"
#include "images/oci.h"
#include "images/store.h"
#include "sandbox/config.h"
#include "support/temp_dir.h"

namespace skiff::images {
namespace {
namespace fs = std::filesystem;

std::string Slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const std::string& p, const std::string& data) { std::ofstream(p, std::ios::binary) << data; }

// A layer tarball with the given files and symlinks (name -> target).
std::string Layer(const std::string& path, const std::vector<std::pair<std::string, std::string>>& files,
                  const std::vector<std::pair<std::string, std::string>>& symlinks = {}) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, path.c_str());
  for (const auto& [name, target] : symlinks) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFLNK);
    archive_entry_set_perm(e, 0777);
    archive_entry_set_symlink(e, target.c_str());
    archive_entry_set_mtime(e, 1700000000, 0);
    archive_write_header(a, e);
    archive_entry_free(e);
  }
  for (const auto& [name, data] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0755);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_mtime(e, 1700000000, 0);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return path;
}

// A digest of a whole tree: every path with its type, mode, owner, size,
// link count, mtime (not for directories, whose mtime depends on the order
// entries were created in), content hash or link target.
std::string TreeDigest(const std::string& root) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string p = it->path().string();
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return "lstat failed: " + p;
    std::ostringstream l;
    l << p.substr(root.size()) << " " << std::oct << st.st_mode << std::dec << " " << st.st_uid << ":"
      << st.st_gid << " n" << st.st_nlink;
    if (S_ISREG(st.st_mode)) {
      l << " " << st.st_size << " t" << st.st_mtime << " " << Sha256Hex(Slurp(p));
    } else if (S_ISLNK(st.st_mode)) {
      l << " t" << st.st_mtime << " -> " << fs::read_symlink(p).string();
    }
    lines.push_back(l.str());
  }
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return Sha256Hex(all) + " (" + std::to_string(lines.size()) + " entries)";
}

bool Which(const char* prog) { return ::access((std::string("/usr/bin/") + prog).c_str(), X_OK) == 0; }

int FreePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

bool Connects(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Which("docker-registry") || !Which("skopeo")) {
      GTEST_SKIP() << "needs Debian's docker-registry and skopeo (apt-get install docker-registry "
                      "skopeo)";
    }
    tmp_.emplace("pull-test");
    dir_ = tmp_->path();
    port_ = FreePort();
    Spit(dir_ + "/registry.yml",
         "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
         "    rootdirectory: " +
             dir_ + "/registry\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port_) + "\n");
    pid_ = ::fork();
    if (pid_ == 0) {
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      std::string cfg = dir_ + "/registry.yml";
      ::execl("/usr/bin/docker-registry", "docker-registry", "serve", cfg.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && !Connects(port_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(Connects(port_)) << "docker-registry did not start";
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    tmp_.reset();
  }

  // Writes an OCI image layout directory and returns the config bytes.
  std::string MakeLayout(const std::string& layout, size_t big_bytes) {
    fs::create_directories(layout + "/blobs/sha256");
    std::string big(big_bytes, '\0');
    uint64_t x = 0x9e3779b97f4a7c15ull;  // xorshift: incompressible, deterministic
    for (size_t i = 0; i < big.size(); ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      big[i] = static_cast<char>(x);
    }
    std::vector<std::string> layers = {
        Layer(dir_ + "/l1.tar", {{"bin/hello", "#!/bin/sh\necho hi\n"}, {"data/big", big}, {"tmp/gone", "x"}},
              {{"bin/hi", "hello"}}),
        Layer(dir_ + "/l2.tar", {{"etc/release", "pulled\n"}, {"tmp/.wh.gone", ""}})};
    auto blob = [&](const std::string& data) {
      std::string d = Sha256Hex(data);
      Spit(layout + "/blobs/sha256/" + d, data);
      return nlohmann::json{{"digest", "sha256:" + d}, {"size", data.size()}};
    };
    nlohmann::json diff = nlohmann::json::array();
    nlohmann::json descs = nlohmann::json::array();
    for (const auto& l : layers) {
      diff.push_back(*LayerDiffId(l));
      auto d = blob(Slurp(l));
      d["mediaType"] = "application/vnd.oci.image.layer.v1.tar";
      descs.push_back(d);
    }
    nlohmann::json config = {{"architecture", "amd64"},
                             {"os", "linux"},
                             {"config", {{"Env", {"PATH=/bin", "FROM=registry"}}, {"WorkingDir", "/data"}}},
                             {"rootfs", {{"type", "layers"}, {"diff_ids", diff}}}};
    std::string cfg = config.dump();
    auto cd = blob(cfg);
    cd["mediaType"] = "application/vnd.oci.image.config.v1+json";
    nlohmann::json manifest = {{"schemaVersion", 2},
                               {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                               {"config", cd},
                               {"layers", descs}};
    auto md = blob(manifest.dump());
    md["mediaType"] = "application/vnd.oci.image.manifest.v1+json";
    md["annotations"] = {{"org.opencontainers.image.ref.name", "v1"}};
    Spit(layout + "/index.json", nlohmann::json{{"schemaVersion", 2}, {"manifests", {md}}}.dump());
    Spit(layout + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    return cfg;
  }

  std::optional<testing_support::TempDir> tmp_;  // made once the test is not skipped
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(PullTest, PullMatchesImportAndVerifies) {
  std::string layout = dir_ + "/layout";
  std::string config = MakeLayout(layout, 16 << 20);
  std::string ref = "127.0.0.1:" + std::to_string(port_) + "/skiff/test:v1";
  // skopeo compresses the layers on the way: the registry's manifest and
  // layer digests differ from the layout's, the config (the image id) not.
  std::string cmd = "skopeo copy --quiet --dest-tls-verify=false --digestfile " + dir_ +
                    "/pushed.digest oci:" + layout + ":v1 docker://" + ref + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  Store store(dir_ + "/store");
  std::vector<std::string> lines;
  int64_t t0 = MonotonicMillis();
  auto pulled = Pull(store, "pulled", ref, [&](const std::string& l) { lines.push_back(l); });
  int64_t pull_ms = MonotonicMillis() - t0;
  ASSERT_TRUE(pulled.ok()) << pulled.error().message();
  for (const auto& l : lines) std::cout << "  " << l << "\n";
  std::cout << "  pull of 16 MiB from the loopback registry: " << pull_ms << " ms\n";
  EXPECT_EQ(pulled->digest, Sha256Hex(config));
  std::string rootfs = store.RootfsDir(pulled->digest);
  EXPECT_EQ(Slurp(rootfs + "/etc/release"), "pulled\n");
  EXPECT_EQ(fs::file_size(rootfs + "/data/big"), size_t{16} << 20);
  EXPECT_EQ(pulled->env, (std::vector<std::string>{"PATH=/bin", "FROM=registry"}));
  EXPECT_EQ(pulled->workdir, "/data");

  // An import of the same image (as an OCI layout tarball) is the same entry.
  std::string tarball = dir_ + "/layout.tar";
  ASSERT_EQ(std::system(("tar -C " + layout + " -cf " + tarball + " .").c_str()), 0);
  Store store2(dir_ + "/store2");
  auto imported = ImportArchive(store2, "imported", tarball);
  ASSERT_TRUE(imported.ok()) << imported.error().message();
  EXPECT_EQ(imported->digest, pulled->digest);
  // Not just the key: the unpacked trees (in two separate stores) are the
  // same, entry by entry, and so are their erofs block images.
  std::string pulled_tree = TreeDigest(rootfs);
  EXPECT_EQ(TreeDigest(store2.RootfsDir(imported->digest)), pulled_tree);
  EXPECT_NE(pulled_tree.find("(8 entries)"), std::string::npos) << pulled_tree;
  EXPECT_FALSE(fs::exists(rootfs + "/tmp/gone"));
  EXPECT_EQ(fs::read_symlink(rootfs + "/bin/hi"), "hello");
  // Installing does not build the block image (only a microVM needs it).
  EXPECT_FALSE(fs::exists(store.BlockImagePath(pulled->digest, "erofs")));
  auto block1 = store.EnsureBlockImage(pulled->digest, "erofs");
  auto block2 = store2.EnsureBlockImage(imported->digest, "erofs");
  ASSERT_TRUE(block1.ok() && block2.ok());
  EXPECT_EQ(Sha256Hex(Slurp(*block1)), Sha256Hex(Slurp(*block2)));

  // By manifest digest.
  std::string mdigest = Slurp(dir_ + "/pushed.digest");
  while (!mdigest.empty() && std::isspace(static_cast<unsigned char>(mdigest.back()))) {
    mdigest.pop_back();
  }
  Store store3(dir_ + "/store3");
  auto by_digest = Pull(store3, "bydigest", "127.0.0.1:" + std::to_string(port_) + "/skiff/test@" + mdigest);
  ASSERT_TRUE(by_digest.ok()) << by_digest.error().message();
  EXPECT_EQ(by_digest->digest, pulled->digest);

  // A digest the registry does not hold.
  auto wrong = Pull(store3, "wrong",
                    "127.0.0.1:" + std::to_string(port_) + "/skiff/test@sha256:" + Sha256Hex("nothing"));
  ASSERT_FALSE(wrong.ok());

  // Missing tag / unknown repository: an error, nothing installed.
  auto missing = Pull(store3, "missing", "127.0.0.1:" + std::to_string(port_) + "/skiff/test:nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_FALSE(store3.Current("missing"));

  // Through the catalog: auto-install pulls on first resolve.
  Config c;
  c.images_dir = dir_ + "/store4";
  c.allow_all_images = true;
  c.custom_images = {{"reg", ref}};
  Catalog cat(ImagePolicyFor(c));
  EXPECT_FALSE(cat.Installed("reg"));
  auto img = cat.Resolve("reg");
  ASSERT_TRUE(img.ok()) << img.error().message();
  EXPECT_TRUE(cat.Installed("reg"));
  EXPECT_EQ(img->workdir, "/data");
  c.custom_images["gone"] = "127.0.0.1:" + std::to_string(port_) + "/skiff/none:v1";
  cat = Catalog(ImagePolicyFor(c));  // the catalog holds a copy of the policy
  auto s102 = cat.Resolve("gone");
  ASSERT_FALSE(s102.ok());
  EXPECT_EQ(s102.error().code(), Code::kS102);
}

}  // namespace
}  // namespace skiff::images
