// erofs vs ext4 block images for the microVM backend: size on disk and
// guest boot time (QEMU start until the agent's HELLO) for one installed
// image, alternating the two, N runs each. The image's rootfs is copied into
// a temporary store so the block images are built there by the store's own
// code (Store::EnsureBlockImage) and the default store is only read.
//
//   skiff-block-boot-bench [--image base] [--runs 5]   (prints JSON; exit 3 with
//   sizes and "boot_error" when the microVM backend is unavailable)
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/paths.h"
#include "base/text.h"
#include "images/recipe.h"
#include "images/store.h"
#include "isolation/microvm/microvm.h"
#include "protocol/client.h"

using namespace skiff;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string image = "base";
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--image") image = argv[i + 1];
    if (a == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
  }
  images::Store store(images::Store::DefaultRoot());
  auto recipe = images::PresetRecipe(image);
  std::optional<std::string> digest =
      recipe.ok() && store.Read(recipe->digest) ? std::optional(recipe->digest) : store.Current(image);
  auto meta = digest ? store.Read(*digest) : std::nullopt;
  if (!meta) {
    std::fprintf(stderr, "image %s is not installed (scripts/build-image %s)\n", image.c_str(),
                 image.c_str());
    return 2;
  }
  auto lease = store.Lease(*digest);  // keep it from gc while we copy it
  if (!lease.ok()) return 2;
  std::string tmp_root =
      (std::filesystem::temp_directory_path() / ("skiff-block-boot-" + RandomHex(6))).string();
  images::Store tmp(tmp_root);
  int rc = 1;
  nlohmann::json out = {{"image", image}, {"runs", runs}};
  {
    auto dir = tmp.MakeTemp(*digest);
    if (!dir.ok()) return 2;
    std::string cp = "cp -a " + store.RootfsDir(*digest) + " " + *dir + "/rootfs";
    if (std::system(cp.c_str()) != 0 || !tmp.Commit(*dir, *meta).ok()) {
      std::filesystem::remove_all(tmp_root);
      return 2;
    }
    std::map<std::string, std::string> block;
    for (const char* fs : {"erofs", "ext4"}) {
      auto t0 = Clock::now();
      auto b = tmp.EnsureBlockImage(*digest, fs);
      if (!b.ok()) {
        std::fprintf(stderr, "%s: %s\n", fs, b.error().message().c_str());
        std::filesystem::remove_all(tmp_root);
        return 1;
      }
      struct stat st {};
      ::stat(b->c_str(), &st);
      block[fs] = *b;
      out[fs]["build_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      out[fs]["apparent_mib"] = static_cast<double>(st.st_size) / 1048576.0;
      out[fs]["allocated_mib"] = static_cast<double>(st.st_blocks) * 512 / 1048576.0;
    }
    auto iso = MakeMicrovmIsolator();
    auto avail = iso->Available();
    if (!avail.ok()) out["boot_error"] = avail.error().message();  // sizes still reported
    std::map<std::string, std::vector<double>> boot;
    for (int r = 0; avail.ok() && r < runs; ++r) {
      for (const char* fs : {"erofs", "ext4"}) {
        SandboxPolicy p;
        p.id = NewUuid();
        p.hostname = "bench";
        p.rootfs.block_image = block[fs];
        p.rootfs.block_fstype = fs;
        p.rootfs.layers.push_back({"/", {tmp.RootfsDir(*digest)}});
        p.state_dir = paths::RuntimeDir() + "/sandboxes/" + p.id;
        auto t0 = Clock::now();
        auto inst = iso->Start(p);
        if (!inst.ok()) {
          std::fprintf(stderr, "%s boot: %s\n", fs, inst.error().message().c_str());
          continue;
        }
        auto client = proto::Client::Connect((*inst)->TakeChannel(), std::chrono::seconds(60));
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (client.ok()) {
          boot[fs].push_back(ms);
          (*client)->Close();
        } else {
          std::fprintf(stderr, "%s boot: %s\n", fs, client.error().message().c_str());
        }
        (*inst)->Stop(std::chrono::milliseconds(200));
      }
    }
    rc = avail.ok() ? 0 : 3;
    for (const char* fs : {"erofs", "ext4"}) {
      auto& v = boot[fs];
      if (v.empty()) {
        if (avail.ok()) rc = 1;
        continue;
      }
      std::sort(v.begin(), v.end());
      out[fs]["boot_ms_median"] = v[v.size() / 2];
      out[fs]["boot_ms_min"] = v.front();
      out[fs]["boot_ms_max"] = v.back();
      out[fs]["boots"] = v.size();
    }
  }
  std::filesystem::remove_all(tmp_root);
  std::printf("%s\n", out.dump(2).c_str());
  return rc;
}
