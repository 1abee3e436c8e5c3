#include "isolation/jail/jail_snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "base/unique_fd.h"
#include "isolation/jail/layer_copy.h"

namespace skiff::jail {
namespace {

constexpr const char* kFormat = "skiff-jail-snapshot-1";
constexpr int kMaxGenerations = 16;

struct Meta {
  std::vector<std::string> targets;
  int generations = 0;
};

Result<Meta> ReadMeta(const std::string& dir) {
  SKIFF_ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/jail.json"));
  nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
  Meta meta;
  if (!m.is_object() || m.value("format", std::string()) != kFormat || !m["targets"].is_array() ||
      !m["generations"].is_number_integer())
    return Platform("snapshot", "jail: " + dir + "/jail.json is not a jail snapshot");
  for (const auto& t : m["targets"]) {
    if (!t.is_string()) return Platform("snapshot", "jail: bad snapshot targets");
    meta.targets.push_back(t.get<std::string>());
  }
  meta.generations = m["generations"].get<int>();
  if (meta.generations < 1 || meta.generations > kMaxGenerations)
    return Platform("snapshot", "jail: bad snapshot generations");
  return meta;
}

Result<UniqueFd> MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0) return Error::Sys(Code::kS300, "mkdir", path, errno);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  return fd;
}

Result<UniqueFd> OpenDir(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  return fd;
}

std::string Layer(const std::string& dir, int gen, size_t i) {
  return dir + "/gen" + std::to_string(gen) + "/layer" + std::to_string(i);
}

}  // namespace

Result<SnapshotContents> SaveJailSnapshot(int state_root, int tmp_root, int shm_root, uint32_t base,
                                          const std::vector<std::string>& targets,
                                          const std::string& restored_from, const std::string& dir,
                                          uint64_t max_bytes) {
  uint64_t total = 0;
  auto copy = [&](int src, int dst, IdShift shift) -> Status {
    uint64_t n = 0;
    Status st = CopyTree(src, dst, shift, max_bytes - total, &n);
    total += n;
    return st;
  };
  int gens = 0;
  if (!restored_from.empty()) {
    SKIFF_ASSIGN_OR_RETURN(Meta parent, ReadMeta(restored_from));
    if (parent.targets != targets)
      return Platform("snapshot", "jail: the source snapshot does not fit this sandbox");
    if (parent.generations >= kMaxGenerations)
      return Error(Code::kS400, "resource limit exceeded: a snapshot chain is at most " +
                                    std::to_string(kMaxGenerations) + " generations deep");
    for (int g = 0; g < parent.generations; ++g) {
      SKIFF_ASSIGN_OR_RETURN(UniqueFd gd, MakeDir(dir + "/gen" + std::to_string(g)));
      (void)gd;
      for (size_t i = 0; i < targets.size(); ++i) {
        SKIFF_ASSIGN_OR_RETURN(UniqueFd src, OpenDir(Layer(restored_from, g, i)));
        SKIFF_ASSIGN_OR_RETURN(UniqueFd dst, MakeDir(Layer(dir, g, i)));
        SKIFF_RETURN_IF_ERROR(copy(src.get(), dst.get(), IdShift{0, 0}));
      }
    }
    gens = parent.generations;
  }
  SKIFF_ASSIGN_OR_RETURN(UniqueFd gd, MakeDir(dir + "/gen" + std::to_string(gens)));
  (void)gd;
  for (size_t i = 0; i < targets.size(); ++i) {
    std::string upper = "u" + std::to_string(i);
    UniqueFd src(::openat(state_root, upper.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!src) return Error::Sys(Code::kS300, "open", "the sandbox's " + upper, errno);
    SKIFF_ASSIGN_OR_RETURN(UniqueFd dst, MakeDir(Layer(dir, gens, i)));
    SKIFF_RETURN_IF_ERROR(copy(src.get(), dst.get(), IdShift{base, 0}));
  }
  SKIFF_ASSIGN_OR_RETURN(UniqueFd tmp, MakeDir(dir + "/tmp"));
  SKIFF_RETURN_IF_ERROR(copy(tmp_root, tmp.get(), IdShift{base, 0}));
  SKIFF_ASSIGN_OR_RETURN(UniqueFd shm, MakeDir(dir + "/shm"));
  SKIFF_RETURN_IF_ERROR(copy(shm_root, shm.get(), IdShift{base, 0}));
  nlohmann::json meta = {{"format", kFormat}, {"targets", targets}, {"generations", gens + 1}};
  std::string text = meta.dump() + "\n";
  SKIFF_RETURN_IF_ERROR(WriteFileAtomic(dir + "/jail.json", text, 0600));
  return SnapshotContents{false, total + text.size()};
}

Status AddSnapshotLayers(SandboxPolicy& policy, const std::string& dir) {
  SKIFF_ASSIGN_OR_RETURN(Meta meta, ReadMeta(dir));
  std::vector<std::string> targets;
  for (const auto& l : policy.rootfs.layers) targets.push_back(l.target);
  if (meta.targets != targets)
    return Platform("snapshot", "jail: this snapshot was taken of another image's layout");
  for (size_t i = 0; i < policy.rootfs.layers.size(); ++i) {
    auto& lower = policy.rootfs.layers[i].lower;
    for (int g = 0; g < meta.generations; ++g) lower.insert(lower.begin(), Layer(dir, g, i));
  }
  return OkStatus();
}

Status RestoreScratch(const std::string& dir, int tmp_root, int shm_root, uint32_t base, uint64_t max_bytes) {
  SKIFF_ASSIGN_OR_RETURN(UniqueFd tmp, OpenDir(dir + "/tmp"));
  uint64_t n = 0;
  SKIFF_RETURN_IF_ERROR(CopyTree(tmp.get(), tmp_root, IdShift{0, base}, max_bytes, &n));
  UniqueFd shm(::open((dir + "/shm").c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!shm) {
    if (errno == ENOENT) return OkStatus();  // saved before /dev/shm was kept
    return Error::Sys(Code::kS300, "open", dir + "/shm", errno);
  }
  return CopyTree(shm.get(), shm_root, IdShift{0, base}, max_bytes - n, &n);
}

}  // namespace skiff::jail
