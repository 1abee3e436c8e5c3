// ldns, loaded on first use instead of at process start
// (base/shared_library.h).
//
// Only the `network.allow` DNS filter (dns_filter.cc) parses and builds DNS
// messages, but linked the usual way every `skiff` process mapped and
// relocated ldns, and with it libssl and libcrypto, before main(). When the
// library cannot be loaded, the functions that make a packet, a record, a
// list or a name fail the way ldns documents (NULL, LDNS_STATUS_ERR), so no
// other function can be reached.
#include <ldns/ldns.h>

#include "base/shared_library.h"

namespace skiff::net {
namespace {

// The soname of the ABI the header above describes (libldns3).
constexpr const char* kLdnsSoname = "libldns.so.3";

// clang-format off (it reflows X-macro lists differently on every run)
#define SKIFF_LDNS_FUNCTIONS(X) \
  X(ldns_dname_new_frm_data)    \
  X(ldns_pkt2wire)              \
  X(ldns_pkt_aa)                \
  X(ldns_pkt_ad)                \
  X(ldns_pkt_additional)        \
  X(ldns_pkt_ancount)           \
  X(ldns_pkt_answer)            \
  X(ldns_pkt_authority)         \
  X(ldns_pkt_cd)                \
  X(ldns_pkt_edns)              \
  X(ldns_pkt_edns_do)           \
  X(ldns_pkt_edns_udp_size)     \
  X(ldns_pkt_free)              \
  X(ldns_pkt_get_rcode)         \
  X(ldns_pkt_id)                \
  X(ldns_pkt_new)               \
  X(ldns_pkt_nscount)           \
  X(ldns_pkt_push_rr)           \
  X(ldns_pkt_qdcount)           \
  X(ldns_pkt_qr)                \
  X(ldns_pkt_question)          \
  X(ldns_pkt_ra)                \
  X(ldns_pkt_rd)                \
  X(ldns_pkt_set_aa)            \
  X(ldns_pkt_set_ad)            \
  X(ldns_pkt_set_additional)    \
  X(ldns_pkt_set_ancount)       \
  X(ldns_pkt_set_answer)        \
  X(ldns_pkt_set_arcount)       \
  X(ldns_pkt_set_authority)     \
  X(ldns_pkt_set_cd)            \
  X(ldns_pkt_set_edns_do)       \
  X(ldns_pkt_set_edns_udp_size) \
  X(ldns_pkt_set_id)            \
  X(ldns_pkt_set_nscount)       \
  X(ldns_pkt_set_opcode)        \
  X(ldns_pkt_set_qr)            \
  X(ldns_pkt_set_ra)            \
  X(ldns_pkt_set_rcode)         \
  X(ldns_pkt_set_rd)            \
  X(ldns_pkt_set_tc)            \
  X(ldns_pkt_tc)                \
  X(ldns_rdf_data)              \
  X(ldns_rdf_deep_free)         \
  X(ldns_rdf_get_type)          \
  X(ldns_rdf_size)              \
  X(ldns_rr_clone)              \
  X(ldns_rr_get_class)          \
  X(ldns_rr_get_type)           \
  X(ldns_rr_list_deep_free)     \
  X(ldns_rr_list_new)           \
  X(ldns_rr_list_rr)            \
  X(ldns_rr_list_rr_count)      \
  X(ldns_rr_new)                \
  X(ldns_rr_owner)              \
  X(ldns_rr_rd_count)           \
  X(ldns_rr_rdf)                \
  X(ldns_rr_set_class)          \
  X(ldns_rr_set_owner)          \
  X(ldns_rr_set_question)       \
  X(ldns_rr_set_ttl)            \
  X(ldns_rr_set_type)           \
  X(ldns_rr_ttl)                \
  X(ldns_str2rdf_dname)         \
  X(ldns_wire2pkt)
// clang-format on

// LoadLdns(): null when the library is unusable.
SKIFF_LAZY_LIBRARY(Ldns, LoadLdns, kLdnsSoname, SKIFF_LDNS_FUNCTIONS)

// Functions reached only through an object that a successful load created.
const Ldns& L() { return *LoadLdns(); }

}  // namespace
}  // namespace skiff::net

using skiff::net::L;
using skiff::net::LoadLdns;

extern "C" {

ldns_rdf* ldns_dname_new_frm_data(uint16_t size, const void* data) {
  const auto* t = LoadLdns();
  return t != nullptr ? t->ldns_dname_new_frm_data(size, data) : nullptr;
}
ldns_status ldns_pkt2wire(uint8_t** dest, const ldns_pkt* p, size_t* size) {
  return L().ldns_pkt2wire(dest, p, size);
}
bool ldns_pkt_aa(const ldns_pkt* p) { return L().ldns_pkt_aa(p); }
bool ldns_pkt_ad(const ldns_pkt* p) { return L().ldns_pkt_ad(p); }
ldns_rr_list* ldns_pkt_additional(const ldns_pkt* p) { return L().ldns_pkt_additional(p); }
uint16_t ldns_pkt_ancount(const ldns_pkt* p) { return L().ldns_pkt_ancount(p); }
ldns_rr_list* ldns_pkt_answer(const ldns_pkt* p) { return L().ldns_pkt_answer(p); }
ldns_rr_list* ldns_pkt_authority(const ldns_pkt* p) { return L().ldns_pkt_authority(p); }
bool ldns_pkt_cd(const ldns_pkt* p) { return L().ldns_pkt_cd(p); }
bool ldns_pkt_edns(const ldns_pkt* packet) { return L().ldns_pkt_edns(packet); }
bool ldns_pkt_edns_do(const ldns_pkt* packet) { return L().ldns_pkt_edns_do(packet); }
uint16_t ldns_pkt_edns_udp_size(const ldns_pkt* packet) { return L().ldns_pkt_edns_udp_size(packet); }
void ldns_pkt_free(ldns_pkt* packet) {
  if (packet != nullptr) L().ldns_pkt_free(packet);  // non-null only if ldns made it
}
ldns_pkt_rcode ldns_pkt_get_rcode(const ldns_pkt* p) { return L().ldns_pkt_get_rcode(p); }
uint16_t ldns_pkt_id(const ldns_pkt* p) { return L().ldns_pkt_id(p); }
ldns_pkt* ldns_pkt_new() {
  const auto* t = LoadLdns();
  return t != nullptr ? t->ldns_pkt_new() : nullptr;
}
uint16_t ldns_pkt_nscount(const ldns_pkt* p) { return L().ldns_pkt_nscount(p); }
bool ldns_pkt_push_rr(ldns_pkt* packet, ldns_pkt_section section, ldns_rr* rr) {
  return L().ldns_pkt_push_rr(packet, section, rr);
}
uint16_t ldns_pkt_qdcount(const ldns_pkt* p) { return L().ldns_pkt_qdcount(p); }
bool ldns_pkt_qr(const ldns_pkt* p) { return L().ldns_pkt_qr(p); }
ldns_rr_list* ldns_pkt_question(const ldns_pkt* p) { return L().ldns_pkt_question(p); }
bool ldns_pkt_ra(const ldns_pkt* p) { return L().ldns_pkt_ra(p); }
bool ldns_pkt_rd(const ldns_pkt* p) { return L().ldns_pkt_rd(p); }
void ldns_pkt_set_aa(ldns_pkt* p, bool b) { L().ldns_pkt_set_aa(p, b); }
void ldns_pkt_set_ad(ldns_pkt* p, bool b) { L().ldns_pkt_set_ad(p, b); }
void ldns_pkt_set_additional(ldns_pkt* p, ldns_rr_list* rr) { L().ldns_pkt_set_additional(p, rr); }
void ldns_pkt_set_ancount(ldns_pkt* p, uint16_t c) { L().ldns_pkt_set_ancount(p, c); }
void ldns_pkt_set_answer(ldns_pkt* p, ldns_rr_list* rr) { L().ldns_pkt_set_answer(p, rr); }
void ldns_pkt_set_arcount(ldns_pkt* p, uint16_t c) { L().ldns_pkt_set_arcount(p, c); }
void ldns_pkt_set_authority(ldns_pkt* p, ldns_rr_list* rr) { L().ldns_pkt_set_authority(p, rr); }
void ldns_pkt_set_cd(ldns_pkt* p, bool b) { L().ldns_pkt_set_cd(p, b); }
void ldns_pkt_set_edns_do(ldns_pkt* packet, bool value) { L().ldns_pkt_set_edns_do(packet, value); }
void ldns_pkt_set_edns_udp_size(ldns_pkt* packet, uint16_t s) { L().ldns_pkt_set_edns_udp_size(packet, s); }
void ldns_pkt_set_id(ldns_pkt* p, uint16_t id) { L().ldns_pkt_set_id(p, id); }
void ldns_pkt_set_nscount(ldns_pkt* p, uint16_t c) { L().ldns_pkt_set_nscount(p, c); }
void ldns_pkt_set_opcode(ldns_pkt* p, ldns_pkt_opcode c) { L().ldns_pkt_set_opcode(p, c); }
void ldns_pkt_set_qr(ldns_pkt* p, bool b) { L().ldns_pkt_set_qr(p, b); }
void ldns_pkt_set_ra(ldns_pkt* p, bool b) { L().ldns_pkt_set_ra(p, b); }
void ldns_pkt_set_rcode(ldns_pkt* p, uint8_t c) { L().ldns_pkt_set_rcode(p, c); }
void ldns_pkt_set_rd(ldns_pkt* p, bool b) { L().ldns_pkt_set_rd(p, b); }
void ldns_pkt_set_tc(ldns_pkt* p, bool b) { L().ldns_pkt_set_tc(p, b); }
bool ldns_pkt_tc(const ldns_pkt* p) { return L().ldns_pkt_tc(p); }
uint8_t* ldns_rdf_data(const ldns_rdf* rd) { return L().ldns_rdf_data(rd); }
void ldns_rdf_deep_free(ldns_rdf* rd) {
  if (rd != nullptr) L().ldns_rdf_deep_free(rd);
}
ldns_rdf_type ldns_rdf_get_type(const ldns_rdf* rd) { return L().ldns_rdf_get_type(rd); }
size_t ldns_rdf_size(const ldns_rdf* rd) { return L().ldns_rdf_size(rd); }
ldns_rr* ldns_rr_clone(const ldns_rr* rr) { return L().ldns_rr_clone(rr); }
ldns_rr_class ldns_rr_get_class(const ldns_rr* rr) { return L().ldns_rr_get_class(rr); }
ldns_rr_type ldns_rr_get_type(const ldns_rr* rr) { return L().ldns_rr_get_type(rr); }
void ldns_rr_list_deep_free(ldns_rr_list* rr_list) {
  if (rr_list != nullptr) L().ldns_rr_list_deep_free(rr_list);
}
ldns_rr_list* ldns_rr_list_new() {
  const auto* t = LoadLdns();
  return t != nullptr ? t->ldns_rr_list_new() : nullptr;
}
ldns_rr* ldns_rr_list_rr(const ldns_rr_list* rr_list, size_t nr) { return L().ldns_rr_list_rr(rr_list, nr); }
size_t ldns_rr_list_rr_count(const ldns_rr_list* rr_list) { return L().ldns_rr_list_rr_count(rr_list); }
ldns_rr* ldns_rr_new() {
  const auto* t = LoadLdns();
  return t != nullptr ? t->ldns_rr_new() : nullptr;
}
ldns_rdf* ldns_rr_owner(const ldns_rr* rr) { return L().ldns_rr_owner(rr); }
size_t ldns_rr_rd_count(const ldns_rr* rr) { return L().ldns_rr_rd_count(rr); }
ldns_rdf* ldns_rr_rdf(const ldns_rr* rr, size_t nr) { return L().ldns_rr_rdf(rr, nr); }
void ldns_rr_set_class(ldns_rr* rr, ldns_rr_class rr_class) { L().ldns_rr_set_class(rr, rr_class); }
void ldns_rr_set_owner(ldns_rr* rr, ldns_rdf* owner) { L().ldns_rr_set_owner(rr, owner); }
void ldns_rr_set_question(ldns_rr* rr, bool question) { L().ldns_rr_set_question(rr, question); }
void ldns_rr_set_ttl(ldns_rr* rr, uint32_t ttl) { L().ldns_rr_set_ttl(rr, ttl); }
void ldns_rr_set_type(ldns_rr* rr, ldns_rr_type rr_type) { L().ldns_rr_set_type(rr, rr_type); }
uint32_t ldns_rr_ttl(const ldns_rr* rr) { return L().ldns_rr_ttl(rr); }
ldns_status ldns_str2rdf_dname(ldns_rdf** rd, const char* str) {
  const auto* t = LoadLdns();
  return t != nullptr ? t->ldns_str2rdf_dname(rd, str) : LDNS_STATUS_ERR;
}
ldns_status ldns_wire2pkt(ldns_pkt** packet, const uint8_t* data, size_t len) {
  const auto* t = LoadLdns();
  return t != nullptr ? t->ldns_wire2pkt(packet, data, len) : LDNS_STATUS_ERR;
}

}  // extern "C"
