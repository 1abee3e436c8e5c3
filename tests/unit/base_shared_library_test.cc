// LoadSharedLibrary: a table filled from a real library, and the refusals
// (no such library, a symbol it lacks) that callers turn into their
// library's own failure value.
#include "base/shared_library.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

namespace skiff {
namespace {

// zlib: linked by no unit test of base, present wherever skiff builds.
#define ZLIB_FUNCTIONS(X) \
  X(zlibVersion)          \
  X(crc32)

struct Zlib {
  ZLIB_FUNCTIONS(SKIFF_LAZY_MEMBER)
};

const Zlib* LoadZlib(const char* soname) {
  return LoadSharedLibrary<Zlib>(soname, [](void* handle, const char* soname, Zlib& table) {
    bool ok = true;
    ZLIB_FUNCTIONS(SKIFF_LAZY_RESOLVE)
    return ok;
  });
}

// As the lazy libraries of src/ declare theirs.
SKIFF_LAZY_LIBRARY(ZlibTable, LoadZlibOnce, "libz.so.1", ZLIB_FUNCTIONS)

TEST(SharedLibrary, TheDeclaredLibraryLoadsOnceAndForwards) {
  const ZlibTable* z = LoadZlibOnce();
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(LoadZlibOnce(), z);  // the same table on every call
  const char text[] = "123456789";
  EXPECT_EQ(z->crc32(0, reinterpret_cast<const Bytef*>(text), std::strlen(text)), 0xcbf43926u);
}

TEST(SharedLibrary, FillsTheTableFromTheLibrary) {
  const Zlib* z = LoadZlib("libz.so.1");
  ASSERT_NE(z, nullptr);
  ASSERT_NE(z->zlibVersion, nullptr);
  EXPECT_EQ(z->zlibVersion()[0], ZLIB_VERSION[0]);  // same major version as the header
  const char text[] = "123456789";
  // The check value of CRC-32 (ISO 3309) for "123456789".
  EXPECT_EQ(z->crc32(0, reinterpret_cast<const Bytef*>(text), std::strlen(text)), 0xcbf43926u);
}

TEST(SharedLibrary, AMissingLibraryGivesNoTable) {
  EXPECT_EQ(OpenSharedLibrary("libskiff-no-such-library.so.0"), nullptr);
  EXPECT_EQ(LoadZlib("libskiff-no-such-library.so.0"), nullptr);
}

TEST(SharedLibrary, ALibraryLackingAFunctionGivesNoTable) {
  // libm is a real library, but has neither function.
  EXPECT_EQ(LoadZlib("libm.so.6"), nullptr);
  void* m = OpenSharedLibrary("libm.so.6");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(ResolveSymbol(m, "libm.so.6", "skiff_no_such_function"), nullptr);
  EXPECT_NE(ResolveSymbol(m, "libm.so.6", "cos"), nullptr);
}

}  // namespace
}  // namespace skiff
