// libcurl and libarchive, loaded on first use instead of at process start
// (base/shared_library.h).
//
// Only image pulls and imports use them, but linked the usual way every
// `skiff` process mapped and relocated them and their ~30 dependencies (TLS,
// Kerberos, LDAP, ICU, XML, compressors) before main(): about 8 ms of a
// ~30 ms cold `skiff run`. When a library cannot be loaded (or lacks a
// symbol), the functions that create a handle fail the way the library
// documents (NULL, CURLE_FAILED_INIT), so no other function can be reached.
#define CURL_DISABLE_TYPECHECK 1
#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>

#include <cstdarg>
#include <type_traits>

#include "base/shared_library.h"

namespace skiff {
namespace {

// The sonames of the ABI the headers above describe (libcurl4, libarchive13).
static_assert(ARCHIVE_VERSION_NUMBER >= 3000000 && ARCHIVE_VERSION_NUMBER < 4000000,
              "libarchive 3.x has soname libarchive.so.13");
constexpr const char* kCurlSoname = "libcurl.so.4";
constexpr const char* kArchiveSoname = "libarchive.so.13";

// Each library's functions, listed once: the table's members and their
// resolution are both generated from the list (base/shared_library.h).
// clang-format off (it reflows X-macro lists differently on every run)
#define SKIFF_CURL_FUNCTIONS(X) \
  X(curl_global_init)           \
  X(curl_easy_init)             \
  X(curl_easy_setopt)           \
  X(curl_easy_getinfo)          \
  X(curl_easy_perform)          \
  X(curl_easy_cleanup)          \
  X(curl_easy_strerror)         \
  X(curl_easy_escape)           \
  X(curl_free)                  \
  X(curl_slist_append)          \
  X(curl_slist_free_all)
#define SKIFF_ARCHIVE_FUNCTIONS(X)      \
  X(archive_read_new)                   \
  X(archive_read_free)                  \
  X(archive_read_support_filter_all)    \
  X(archive_read_support_format_tar)    \
  X(archive_read_support_format_gnutar) \
  X(archive_read_support_format_raw)    \
  X(archive_read_open_filename)         \
  X(archive_read_next_header)           \
  X(archive_read_data)                  \
  X(archive_read_data_block)            \
  X(archive_read_data_into_fd)          \
  X(archive_error_string)               \
  X(archive_entry_filetype)             \
  X(archive_entry_gid)                  \
  X(archive_entry_uid)                  \
  X(archive_entry_hardlink)             \
  X(archive_entry_symlink)              \
  X(archive_entry_mtime)                \
  X(archive_entry_pathname)             \
  X(archive_entry_perm)
// clang-format on

// LoadCurl(), LoadArchive(): null when the library is unusable.
SKIFF_LAZY_LIBRARY(Curl, LoadCurl, kCurlSoname, SKIFF_CURL_FUNCTIONS)
SKIFF_LAZY_LIBRARY(Archive, LoadArchive, kArchiveSoname, SKIFF_ARCHIVE_FUNCTIONS)

// Functions reached only through a handle that a successful load created.
const Curl& C() { return *LoadCurl(); }
const Archive& A() { return *LoadArchive(); }

// curl_easy_setopt's variadic argument, read from `ap` as a T and passed on.
template <typename T>
CURLcode SetoptAs(CURL* h, CURLoption option, va_list ap) {
  return C().curl_easy_setopt(h, option, va_arg(ap, T));
}

}  // namespace
}  // namespace skiff

using skiff::A;
using skiff::C;

extern "C" {

// ---- libcurl

CURLcode curl_global_init(long flags) {
  auto* c = skiff::LoadCurl();
  return c ? c->curl_global_init(flags) : CURLE_FAILED_INIT;
}

CURL* curl_easy_init(void) {
  auto* c = skiff::LoadCurl();
  return c ? c->curl_easy_init() : nullptr;
}

// curl.h declares the two variadic functions below with an enum as the last
// named parameter, and va_start on a parameter whose type changes under
// default argument promotion (as an unscoped enum's does) is undefined in
// C++. So they are defined with the enum's underlying type, which the
// calling convention passes exactly like the enum, under other names that
// asm labels bind to the libcurl symbols; the static_asserts tie both to the
// header's prototypes.
using CurlOptionInt = std::underlying_type_t<CURLoption>;
using CurlInfoInt = std::underlying_type_t<CURLINFO>;
static_assert(std::is_same_v<decltype(&::curl_easy_setopt), CURLcode (*)(CURL*, CURLoption, ...)>);
static_assert(std::is_same_v<decltype(&::curl_easy_getinfo), CURLcode (*)(CURL*, CURLINFO, ...)>);
static_assert(sizeof(CurlOptionInt) >= sizeof(int) && sizeof(CurlInfoInt) >= sizeof(int),
              "the underlying types must not undergo promotion themselves");
CURLcode SkiffCurlEasySetopt(CURL* h, CurlOptionInt option, ...) __asm__("curl_easy_setopt");
CURLcode SkiffCurlEasyGetinfo(CURL* h, CurlInfoInt info, ...) __asm__("curl_easy_getinfo");

// The one variadic argument's type follows from the option number, as in
// libcurl itself: long, object pointer, function pointer, curl_off_t, blob.
CURLcode SkiffCurlEasySetopt(CURL* h, CurlOptionInt option, ...) {
  va_list ap;
  va_start(ap, option);
  CURLcode r;
  const auto o = static_cast<CURLoption>(option);
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    r = skiff::SetoptAs<long>(h, o, ap);
  } else if (option >= CURLOPTTYPE_FUNCTIONPOINT && option < CURLOPTTYPE_OFF_T) {
    r = skiff::SetoptAs<void (*)(void)>(h, o, ap);
  } else if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB) {
    r = skiff::SetoptAs<curl_off_t>(h, o, ap);
  } else {  // object pointers (strings, lists, callback data) and blobs
    r = skiff::SetoptAs<void*>(h, o, ap);
  }
  va_end(ap);
  return r;
}

// Every CURLINFO_* takes a pointer to where the value goes.
CURLcode SkiffCurlEasyGetinfo(CURL* h, CurlInfoInt info, ...) {
  va_list ap;
  va_start(ap, info);
  CURLcode r = C().curl_easy_getinfo(h, static_cast<CURLINFO>(info), va_arg(ap, void*));
  va_end(ap);
  return r;
}

CURLcode curl_easy_perform(CURL* h) { return C().curl_easy_perform(h); }
void curl_easy_cleanup(CURL* h) { C().curl_easy_cleanup(h); }

const char* curl_easy_strerror(CURLcode code) {
  auto* c = skiff::LoadCurl();
  return c ? c->curl_easy_strerror(code) : "libcurl could not be loaded";
}

char* curl_easy_escape(CURL* h, const char* s, int length) { return C().curl_easy_escape(h, s, length); }

void curl_free(void* p) {
  if (p != nullptr) C().curl_free(p);  // non-null only if libcurl made it
}

struct curl_slist* curl_slist_append(struct curl_slist* list, const char* s) {
  auto* c = skiff::LoadCurl();
  return c ? c->curl_slist_append(list, s) : nullptr;
}

void curl_slist_free_all(struct curl_slist* list) {
  if (list != nullptr) C().curl_slist_free_all(list);
}

// ---- libarchive

struct archive* archive_read_new(void) {
  auto* a = skiff::LoadArchive();
  return a ? a->archive_read_new() : nullptr;
}

int archive_read_free(struct archive* a) { return a ? A().archive_read_free(a) : ARCHIVE_OK; }
int archive_read_support_filter_all(struct archive* a) { return A().archive_read_support_filter_all(a); }
int archive_read_support_format_tar(struct archive* a) { return A().archive_read_support_format_tar(a); }
int archive_read_support_format_gnutar(struct archive* a) {
  return A().archive_read_support_format_gnutar(a);
}
int archive_read_support_format_raw(struct archive* a) { return A().archive_read_support_format_raw(a); }
int archive_read_open_filename(struct archive* a, const char* name, size_t block) {
  return A().archive_read_open_filename(a, name, block);
}
int archive_read_next_header(struct archive* a, struct archive_entry** e) {
  return A().archive_read_next_header(a, e);
}
la_ssize_t archive_read_data(struct archive* a, void* buf, size_t n) {
  return A().archive_read_data(a, buf, n);
}
int archive_read_data_block(struct archive* a, const void** buf, size_t* n, la_int64_t* off) {
  return A().archive_read_data_block(a, buf, n, off);
}
int archive_read_data_into_fd(struct archive* a, int fd) { return A().archive_read_data_into_fd(a, fd); }
const char* archive_error_string(struct archive* a) { return A().archive_error_string(a); }

__LA_MODE_T archive_entry_filetype(struct archive_entry* e) { return A().archive_entry_filetype(e); }
la_int64_t archive_entry_gid(struct archive_entry* e) { return A().archive_entry_gid(e); }
la_int64_t archive_entry_uid(struct archive_entry* e) { return A().archive_entry_uid(e); }
const char* archive_entry_hardlink(struct archive_entry* e) { return A().archive_entry_hardlink(e); }
const char* archive_entry_symlink(struct archive_entry* e) { return A().archive_entry_symlink(e); }
time_t archive_entry_mtime(struct archive_entry* e) { return A().archive_entry_mtime(e); }
const char* archive_entry_pathname(struct archive_entry* e) { return A().archive_entry_pathname(e); }
__LA_MODE_T archive_entry_perm(struct archive_entry* e) { return A().archive_entry_perm(e); }

}  // extern "C"
