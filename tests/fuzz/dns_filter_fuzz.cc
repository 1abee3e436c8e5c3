// Fuzzes the DNS filter's message screening: bit 0 of the first byte says
// UDP or TCP, bit 1 whether the rest is a query from the sandbox or an
// upstream answer to a fixed allowed query.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "isolation/net/dns_filter.h"

namespace {

using namespace skiff::net;

const DomainPolicy& Policy() {
  static const DomainPolicy p = *DomainPolicy::Parse({"example.com", "*.example.org"});
  return p;
}

// "example.com IN A", id 0x1234, recursion desired.
const QueryVerdict& AllowedQuery() {
  static const QueryVerdict q = [] {
    const uint8_t wire[] = {0x12, 0x34, 0x01, 0x00, 0,   1, 0,   0,   0,   0, 0, 0, 7, 'e', 'x',
                            'a',  'm',  'p',  'l',  'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1};
    QueryVerdict v = ScreenQuery(Policy(), wire, sizeof wire, false);
    if (v.kind != QueryVerdict::Kind::kForward) std::abort();
    return v;
  }();
  return q;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool tcp = data[0] & 1;
  const uint8_t* msg = data + 1;
  const size_t len = size - 1;
  if (data[0] & 2) {
    const QueryVerdict& q = AllowedQuery();
    auto a = ScreenAnswer(
        q, 0x4321, msg, len, [](in_addr) { return true; }, tcp);
    if (a.ok()) {
      if (a->wire.size() < 12) std::abort();
      // The client gets its own id back.
      if (((a->wire[0] << 8) | a->wire[1]) != q.id) std::abort();
      if (!tcp && a->wire.size() > q.udp_limit) std::abort();
      for (const auto& [addr, ttl] : a->addresses)
        if (ttl < kDnsMinTtl || ttl > kDnsMaxTtl) std::abort();
    }
    return 0;
  }
  QueryVerdict v = ScreenQuery(Policy(), msg, len, tcp);
  if (v.kind == QueryVerdict::Kind::kForward) {
    if (!Policy().Allows(v.qname) || v.wire.size() < 12) std::abort();
  } else if (v.kind == QueryVerdict::Kind::kReply) {
    if (v.wire.size() < 12) std::abort();
    (void)ErrorReply(v, 2);
  }
  return 0;
}
