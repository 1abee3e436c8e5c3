// Builds (or reuses the cached) `base` preset with mmdebstrap from the
// Debian package registry, then resolves it through the catalog.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "base/text.h"
#include "images/build.h"
#include "images/catalog.h"
#include "images/recipe.h"
#include "images/store.h"
#include "sandbox/config.h"

namespace skiff::images {
namespace {

TEST(PresetImage, BaseBuildsOnceAndResolves) {
  if (::geteuid() != 0) GTEST_SKIP() << "building presets needs root (mmdebstrap --mode=root)";
  Store store(Store::DefaultRoot());
  int lines = 0;
  auto built = BuildPreset(store, "base", [&](const std::string&) { ++lines; });
  ASSERT_TRUE(built.ok()) << built.error().message();
  EXPECT_GT(lines, 0);
  auto recipe = PresetRecipe("base");
  ASSERT_TRUE(recipe.ok());
  EXPECT_EQ(built->digest, recipe->digest);
  EXPECT_EQ(store.Current("base"), recipe->digest);

  // Cached: a second build (two at once) returns the same entry quickly.
  int64_t t0 = MonotonicMillis();
  Result<ImageMeta> a = Error(Code::kS300, ""), b = Error(Code::kS300, "");
  std::thread ta([&] { a = BuildPreset(store, "base"); });
  std::thread tb([&] { b = BuildPreset(store, "base"); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->digest, b->digest);
  EXPECT_LT(MonotonicMillis() - t0, 5000);

  Config config;
  config.allow_all_images = true;
  config.auto_install = false;
  config.images_dir = store.root();
  Catalog catalog(ImagePolicyFor(config));
  EXPECT_TRUE(catalog.Installed("base"));
  auto img = catalog.Resolve("base");
  ASSERT_TRUE(img.ok()) << img.error().message();
  ASSERT_EQ(img->rootfs.layers.size(), 1u);
  const std::string rootfs = img->rootfs.layers[0].lower.at(0);
  EXPECT_EQ(rootfs, store.RootfsDir(recipe->digest));

  // A real Debian userland, owned by uid 0 as mmdebstrap made it, trimmed.
  struct stat st;
  ASSERT_EQ(::stat((rootfs + "/usr/bin/ls").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(::stat((rootfs + "/bin/sh").c_str(), &st), 0);
  EXPECT_EQ(::stat((rootfs + "/usr/bin/dash").c_str(), &st), 0);
  std::ifstream os(rootfs + "/etc/os-release");
  std::string os_text((std::istreambuf_iterator<char>(os)), {});
  EXPECT_NE(os_text.find("bookworm"), std::string::npos);
  EXPECT_NE(::stat((rootfs + "/usr/share/man/man1/ls.1.gz").c_str(), &st), 0) << "man not trimmed";
  EXPECT_NE(::stat((rootfs + "/usr/share/locale/de/LC_MESSAGES/coreutils.mo").c_str(), &st), 0);

  bool has_path = false;
  for (const auto& e : img->env) has_path |= e.starts_with("PATH=");
  EXPECT_TRUE(has_path);
  EXPECT_EQ(img->workdir, "/root");

  // The microVM block image: an erofs superblock at offset 1024.
  ASSERT_EQ(img->rootfs.block_fstype, "erofs");
  std::ifstream blk(img->rootfs.block_image, std::ios::binary);
  ASSERT_TRUE(blk.good()) << img->rootfs.block_image;
  blk.seekg(1024);
  unsigned char magic[4] = {};
  blk.read(reinterpret_cast<char*>(magic), 4);
  EXPECT_EQ(magic[0], 0xe2);
  EXPECT_EQ(magic[1], 0xe1);
  EXPECT_EQ(magic[2], 0xf5);
  EXPECT_EQ(magic[3], 0xe0);
}

}  // namespace
}  // namespace skiff::images
