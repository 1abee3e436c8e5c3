// A throwaway certificate authority for tests that speak TLS: a CA and a
// server certificate it signed for 127.0.0.1 and localhost (and any other IP
// asked for), made with the OpenSSL API (no `openssl` command needed),
// written as PEM files.
//
//   TestCa ca = MakeTestCa(dir);        // dir must exist
//   TestCa ca = MakeTestCa(dir, {"10.0.0.2"});  // also valid for 10.0.0.2
//   server: ca.server_cert_file, ca.server_key_file
//   client: trust ca.ca_cert_file (or ca.ca_cert_pem)
//
// Keys are EC P-256; both certificates are valid from an hour ago for 30
// days. Link OpenSSL::SSL and OpenSSL::Crypto.
#pragma once

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace skiff::e2e {

struct TestCa {
  // Paths of the PEM files written into the directory.
  std::string ca_cert_file;      // ca.pem: the CA certificate, for clients to trust
  std::string server_cert_file;  // server.pem: the server certificate (SANs IP:127.0.0.1, DNS:localhost, …)
  std::string server_key_file;   // server-key.pem: its private key (PKCS#8, unencrypted, mode 0600)
  // The same contents in memory.
  std::string ca_cert_pem, server_cert_pem, server_key_pem;
};

namespace test_ca_detail {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
template <class T>
using Ptr = std::unique_ptr<T, Free>;

[[noreturn]] inline void Fail(const std::string& what) {
  char buf[256] = "no OpenSSL error queued";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  throw std::runtime_error("test CA: " + what + ": " + buf);
}
inline void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

inline Ptr<EVP_PKEY> NewKey() {
  Ptr<EVP_PKEY> key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  Check(key != nullptr, "generate an EC P-256 key");
  return key;
}

// A certificate for `key` named `cn`, signed by `issuer_key` (as `issuer`,
// or self-signed when null), with the extensions given as `nid`=value.
inline Ptr<X509> NewCert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                         std::initializer_list<std::pair<int, const char*>> extensions) {
  Ptr<X509> cert(X509_new());
  Check(cert != nullptr, "allocate a certificate");
  Check(X509_set_version(cert.get(), 2) == 1, "set the version");  // v3
  Ptr<BIGNUM> serial(BN_new());
  Check(serial && BN_rand(serial.get(), 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1, "draw a serial");
  Check(BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr, "set the serial");
  Check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr, "set notBefore");
  Check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), 30L * 24 * 3600) != nullptr, "set notAfter");
  X509_NAME* name = X509_get_subject_name(cert.get());
  Check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) == 1,
        "set the subject");
  Check(X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name) == 1,
        "set the issuer");
  Check(X509_set_pubkey(cert.get(), key) == 1, "set the public key");
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : extensions) {
    Ptr<X509_EXTENSION> ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value));
    Check(ext != nullptr, std::string("make extension ") + OBJ_nid2sn(nid) + "=" + value);
    Check(X509_add_ext(cert.get(), ext.get(), -1) == 1, std::string("add extension ") + OBJ_nid2sn(nid));
  }
  Check(X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0, "sign " + cn);
  return cert;
}

inline std::string Pem(X509* cert) {
  Ptr<BIO> bio(BIO_new(BIO_s_mem()));
  Check(bio && PEM_write_bio_X509(bio.get(), cert) == 1, "write a certificate");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}
inline std::string Pem(EVP_PKEY* key) {
  Ptr<BIO> bio(BIO_new(BIO_s_mem()));
  Check(bio && PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "write a private key");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

inline void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("test CA: open " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error("test CA: write " + path + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace test_ca_detail

// Makes a fresh CA and server certificate and writes ca.pem, server.pem and
// server-key.pem into `dir`. The certificate's names are IP:127.0.0.1,
// DNS:localhost and IP:<each of extra_ips>. Throws std::runtime_error on
// failure (a bad IP included).
inline TestCa MakeTestCa(const std::string& dir, const std::vector<std::string>& extra_ips = {}) {
  using namespace test_ca_detail;
  auto ca_key = NewKey();
  auto ca = NewCert("skiff test CA", ca_key.get(), nullptr, ca_key.get(),
                    {{NID_basic_constraints, "critical,CA:TRUE"},
                     {NID_key_usage, "critical,keyCertSign,cRLSign"},
                     {NID_subject_key_identifier, "hash"}});
  std::string names = "IP:127.0.0.1,DNS:localhost";
  for (const auto& ip : extra_ips) names += ",IP:" + ip;
  auto key = NewKey();
  auto server = NewCert("localhost", key.get(), ca.get(), ca_key.get(),
                        {{NID_basic_constraints, "critical,CA:FALSE"},
                         {NID_key_usage, "critical,digitalSignature"},
                         {NID_ext_key_usage, "serverAuth"},
                         {NID_subject_alt_name, names.c_str()},
                         {NID_authority_key_identifier, "keyid"}});
  TestCa out;
  out.ca_cert_file = dir + "/ca.pem";
  out.server_cert_file = dir + "/server.pem";
  out.server_key_file = dir + "/server-key.pem";
  out.ca_cert_pem = Pem(ca.get());
  out.server_cert_pem = Pem(server.get());
  out.server_key_pem = Pem(key.get());
  WriteFile(out.ca_cert_file, out.ca_cert_pem, 0644);
  WriteFile(out.server_cert_file, out.server_cert_pem, 0644);
  WriteFile(out.server_key_file, out.server_key_pem, 0600);
  return out;
}

}  // namespace skiff::e2e
