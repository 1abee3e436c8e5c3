// libssl (and the libcrypto it needs), loaded on first use instead of at
// process start (base/shared_library.h).
//
// Only `wss://` to an iii engine uses TLS (engine_socket.cc, through
// Boost.Asio's ssl streams), but linked the usual way every `skiff` process
// mapped and relocated libssl and libcrypto before main(): about a third of
// a cold `skiff` start's page faults. Dependencies of the library are
// searched too, so libcrypto's functions resolve through libssl's handle.
// When the library cannot be loaded, the functions that make a context or
// a method fail the way OpenSSL documents (NULL), Boost.Asio turns that
// into an error, and no other function can be reached.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/shared_library.h"

namespace skiff::api {
namespace {

// The soname of the ABI the headers above describe (libssl3).
static_assert(OPENSSL_VERSION_MAJOR == 3, "OpenSSL 3.x has soname libssl.so.3");
constexpr const char* kOpenSslSoname = "libssl.so.3";
constexpr const char* kUnloaded = "libssl.so.3 could not be loaded";

// clang-format off (it reflows X-macro lists differently on every run)
#define SKIFF_OPENSSL_FUNCTIONS(X)          \
  X(BIO_ctrl)                               \
  X(BIO_ctrl_pending)                       \
  X(BIO_free)                               \
  X(BIO_new_bio_pair)                       \
  X(BIO_read)                               \
  X(BIO_write)                              \
  X(ERR_clear_error)                        \
  X(ERR_get_error)                          \
  X(ERR_reason_error_string)                \
  X(SSL_CTX_ctrl)                           \
  X(SSL_CTX_free)                           \
  X(SSL_CTX_get_default_passwd_cb_userdata) \
  X(SSL_CTX_get_ex_data)                    \
  X(SSL_CTX_get_verify_callback)            \
  X(SSL_CTX_load_verify_locations)          \
  X(SSL_CTX_new)                            \
  X(SSL_CTX_set_default_passwd_cb_userdata) \
  X(SSL_CTX_set_default_verify_paths)       \
  X(SSL_CTX_set_ex_data)                    \
  X(SSL_CTX_set_options)                    \
  X(SSL_CTX_set_verify)                     \
  X(SSL_accept)                             \
  X(SSL_connect)                            \
  X(SSL_ctrl)                               \
  X(SSL_free)                               \
  X(SSL_get0_param)                         \
  X(SSL_get_error)                          \
  X(SSL_get_ex_data)                        \
  X(SSL_get_shutdown)                       \
  X(SSL_get_verify_result)                  \
  X(SSL_new)                                \
  X(SSL_read)                               \
  X(SSL_set_bio)                            \
  X(SSL_set_ex_data)                        \
  X(SSL_shutdown)                           \
  X(SSL_write)                              \
  X(TLS_client_method)                      \
  X(TLS_method)                             \
  X(TLS_server_method)                      \
  X(X509_VERIFY_PARAM_set1_host)            \
  X(X509_VERIFY_PARAM_set1_ip_asc)          \
  X(X509_VERIFY_PARAM_set_hostflags)        \
  X(X509_verify_cert_error_string)
// clang-format on

// LoadOpenSsl(): null when the library is unusable.
SKIFF_LAZY_LIBRARY(OpenSsl, LoadOpenSsl, kOpenSslSoname, SKIFF_OPENSSL_FUNCTIONS)

// Functions reached only through an object that a successful load created.
const OpenSsl& S() { return *LoadOpenSsl(); }

}  // namespace
}  // namespace skiff::api

using skiff::api::kUnloaded;
using skiff::api::LoadOpenSsl;
using skiff::api::S;

extern "C" {

long BIO_ctrl(BIO* bp, int cmd, long larg, void* parg) { return S().BIO_ctrl(bp, cmd, larg, parg); }
size_t BIO_ctrl_pending(BIO* b) { return S().BIO_ctrl_pending(b); }
int BIO_free(BIO* a) { return a != nullptr ? S().BIO_free(a) : 0; }  // non-null only if libssl made it
int BIO_new_bio_pair(BIO** bio1, size_t writebuf1, BIO** bio2, size_t writebuf2) {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->BIO_new_bio_pair(bio1, writebuf1, bio2, writebuf2) : 0;
}
int BIO_read(BIO* b, void* data, int dlen) { return S().BIO_read(b, data, dlen); }
int BIO_write(BIO* b, const void* data, int dlen) { return S().BIO_write(b, data, dlen); }
void ERR_clear_error() {
  if (const auto* t = LoadOpenSsl()) t->ERR_clear_error();
}
unsigned long ERR_get_error() {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->ERR_get_error() : 0;
}
const char* ERR_reason_error_string(unsigned long e) {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->ERR_reason_error_string(e) : kUnloaded;
}
long SSL_CTX_ctrl(SSL_CTX* ctx, int cmd, long larg, void* parg) {
  return S().SSL_CTX_ctrl(ctx, cmd, larg, parg);
}
void SSL_CTX_free(SSL_CTX* ctx) {
  if (ctx != nullptr) S().SSL_CTX_free(ctx);  // non-null only if libssl made it
}
void* SSL_CTX_get_default_passwd_cb_userdata(SSL_CTX* ctx) {
  return S().SSL_CTX_get_default_passwd_cb_userdata(ctx);
}
void* SSL_CTX_get_ex_data(const SSL_CTX* ssl, int idx) { return S().SSL_CTX_get_ex_data(ssl, idx); }
SSL_verify_cb SSL_CTX_get_verify_callback(const SSL_CTX* ctx) { return S().SSL_CTX_get_verify_callback(ctx); }
int SSL_CTX_load_verify_locations(SSL_CTX* ctx, const char* CAfile, const char* CApath) {
  return S().SSL_CTX_load_verify_locations(ctx, CAfile, CApath);
}
SSL_CTX* SSL_CTX_new(const SSL_METHOD* meth) {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->SSL_CTX_new(meth) : nullptr;
}
void SSL_CTX_set_default_passwd_cb_userdata(SSL_CTX* ctx, void* u) {
  S().SSL_CTX_set_default_passwd_cb_userdata(ctx, u);
}
int SSL_CTX_set_default_verify_paths(SSL_CTX* ctx) { return S().SSL_CTX_set_default_verify_paths(ctx); }
int SSL_CTX_set_ex_data(SSL_CTX* ssl, int idx, void* data) { return S().SSL_CTX_set_ex_data(ssl, idx, data); }
uint64_t SSL_CTX_set_options(SSL_CTX* ctx, uint64_t op) { return S().SSL_CTX_set_options(ctx, op); }
void SSL_CTX_set_verify(SSL_CTX* ctx, int mode, SSL_verify_cb callback) {
  S().SSL_CTX_set_verify(ctx, mode, callback);
}
int SSL_accept(SSL* ssl) { return S().SSL_accept(ssl); }
int SSL_connect(SSL* ssl) { return S().SSL_connect(ssl); }
long SSL_ctrl(SSL* ssl, int cmd, long larg, void* parg) { return S().SSL_ctrl(ssl, cmd, larg, parg); }
void SSL_free(SSL* ssl) {
  if (ssl != nullptr) S().SSL_free(ssl);
}
X509_VERIFY_PARAM* SSL_get0_param(SSL* ssl) { return S().SSL_get0_param(ssl); }
int SSL_get_error(const SSL* s, int ret_code) { return S().SSL_get_error(s, ret_code); }
void* SSL_get_ex_data(const SSL* ssl, int idx) { return S().SSL_get_ex_data(ssl, idx); }
int SSL_get_shutdown(const SSL* ssl) { return S().SSL_get_shutdown(ssl); }
long SSL_get_verify_result(const SSL* ssl) { return S().SSL_get_verify_result(ssl); }
SSL* SSL_new(SSL_CTX* ctx) { return S().SSL_new(ctx); }
int SSL_read(SSL* ssl, void* buf, int num) { return S().SSL_read(ssl, buf, num); }
void SSL_set_bio(SSL* s, BIO* rbio, BIO* wbio) { S().SSL_set_bio(s, rbio, wbio); }
int SSL_set_ex_data(SSL* ssl, int idx, void* data) { return S().SSL_set_ex_data(ssl, idx, data); }
int SSL_shutdown(SSL* s) { return S().SSL_shutdown(s); }
int SSL_write(SSL* ssl, const void* buf, int num) { return S().SSL_write(ssl, buf, num); }
const SSL_METHOD* TLS_client_method() {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->TLS_client_method() : nullptr;
}
const SSL_METHOD* TLS_method() {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->TLS_method() : nullptr;
}
const SSL_METHOD* TLS_server_method() {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->TLS_server_method() : nullptr;
}
int X509_VERIFY_PARAM_set1_host(X509_VERIFY_PARAM* param, const char* name, size_t namelen) {
  return S().X509_VERIFY_PARAM_set1_host(param, name, namelen);
}
int X509_VERIFY_PARAM_set1_ip_asc(X509_VERIFY_PARAM* param, const char* ipasc) {
  return S().X509_VERIFY_PARAM_set1_ip_asc(param, ipasc);
}
void X509_VERIFY_PARAM_set_hostflags(X509_VERIFY_PARAM* param, unsigned int flags) {
  S().X509_VERIFY_PARAM_set_hostflags(param, flags);
}
const char* X509_verify_cert_error_string(long n) {
  const auto* t = LoadOpenSsl();
  return t != nullptr ? t->X509_verify_cert_error_string(n) : kUnloaded;
}

}  // extern "C"
