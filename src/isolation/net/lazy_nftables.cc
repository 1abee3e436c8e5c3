// libnftables, loaded on first use instead of at process start
// (base/shared_library.h).
//
// Only sandboxes with a network load an egress filter, but linked the usual
// way every `skiff` process mapped and relocated libnftables and its five
// dependencies (libmnl, libnftnl, libxtables, jansson, GMP) before main().
// When the library cannot be loaded (or lacks a symbol), nft_ctx_new returns
// NULL as it does when it fails, so no other function can be reached.
#include <nftables/libnftables.h>

#include "base/shared_library.h"

namespace skiff::net {
namespace {

// The soname of the ABI the header above describes (libnftables1).
constexpr const char* kNftablesSoname = "libnftables.so.1";

// clang-format off (it reflows X-macro lists differently on every run)
#define SKIFF_NFTABLES_FUNCTIONS(X) \
  X(nft_ctx_new)                    \
  X(nft_ctx_free)                   \
  X(nft_ctx_buffer_output)          \
  X(nft_ctx_buffer_error)           \
  X(nft_ctx_get_error_buffer)       \
  X(nft_run_cmd_from_buffer)
// clang-format on

// LoadNftables(): null when the library is unusable.
SKIFF_LAZY_LIBRARY(Nftables, LoadNftables, kNftablesSoname, SKIFF_NFTABLES_FUNCTIONS)

// Functions reached only through a context that a successful load created.
const Nftables& N() { return *LoadNftables(); }

}  // namespace
}  // namespace skiff::net

using skiff::net::N;

extern "C" {

struct nft_ctx* nft_ctx_new(uint32_t flags) {
  const auto* n = skiff::net::LoadNftables();
  return n != nullptr ? n->nft_ctx_new(flags) : nullptr;
}

void nft_ctx_free(struct nft_ctx* ctx) {
  if (ctx != nullptr) N().nft_ctx_free(ctx);  // non-null only if libnftables made it
}

int nft_ctx_buffer_output(struct nft_ctx* ctx) { return N().nft_ctx_buffer_output(ctx); }
int nft_ctx_buffer_error(struct nft_ctx* ctx) { return N().nft_ctx_buffer_error(ctx); }
const char* nft_ctx_get_error_buffer(struct nft_ctx* ctx) { return N().nft_ctx_get_error_buffer(ctx); }
int nft_run_cmd_from_buffer(struct nft_ctx* nft, const char* buf) {
  return N().nft_run_cmd_from_buffer(nft, buf);
}

}  // extern "C"
