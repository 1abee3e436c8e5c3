// Shared libraries opened on first use (dlopen) instead of at process start.
//
// A library linked the usual way is mapped and relocated, with all of its
// dependencies, before main() of every process, although only some commands
// ever reach it. A program that loads one lazily defines the functions it
// calls with the library's own prototypes (the library's header included,
// so the compiler checks each signature), each forwarding to the real
// function through a table that LoadSharedLibrary fills on the first call.
// Callers are unchanged; a program that links the library itself (a test)
// still works, as dlsym on the library's own handle never returns the
// program's definitions.
#pragma once

namespace skiff {

// dlopen(soname, RTLD_NOW | RTLD_LOCAL): null, logged with the loader's
// reason, when the library cannot be loaded.
void* OpenSharedLibrary(const char* soname);

// The address of `name` in the library `handle`: null, logged, when it has none.
void* ResolveSymbol(void* handle, const char* soname, const char* name);

// Opens `soname` and fills a new Table (a struct with one function pointer
// per function the program forwards) with `resolve(handle, soname, table)`,
// which returns false when a symbol is missing. Null when either fails. The
// table lives for the process, as the library does.
template <typename Table, typename Resolve>
const Table* LoadSharedLibrary(const char* soname, Resolve resolve) {
  void* handle = OpenSharedLibrary(soname);
  if (handle == nullptr) return nullptr;
  auto* table = new Table;  // NOLINT(cppcoreguidelines-owning-memory): lives for the process
  if (!resolve(handle, soname, *table)) {
    delete table;  // NOLINT(cppcoreguidelines-owning-memory)
    return nullptr;
  }
  return table;
}

}  // namespace skiff

// Defines `struct Table`, with one function pointer per name in the X-macro
// list FUNCTIONS, and `const Table* Load()`, which loads `library` on its
// first call (thread-safe: static initialisation) and returns the filled
// table, or null when the library or one of the functions is missing.
// NOLINTBEGIN(bugprone-macro-parentheses): Table is a type name, not an expression.
#define SKIFF_LAZY_LIBRARY(Table, Load, library, FUNCTIONS)                                             \
  struct Table {                                                                                        \
    FUNCTIONS(SKIFF_LAZY_MEMBER)                                                                        \
  };                                                                                                    \
  const Table* Load() {                                                                                 \
    static const Table* loaded =                                                                        \
        ::skiff::LoadSharedLibrary<Table>(library, [](void* handle, const char* soname, Table& table) { \
          bool ok = true;                                                                               \
          FUNCTIONS(SKIFF_LAZY_RESOLVE)                                                                 \
          return ok;                                                                                    \
        });                                                                                             \
    return loaded;                                                                                      \
  }
// NOLINTEND(bugprone-macro-parentheses)

// SKIFF_LAZY_LIBRARY's pieces: a member, and its resolution in the loader.
// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is the member's identifier, not an expression.
#define SKIFF_LAZY_MEMBER(name) decltype(&::name) name = nullptr;
#define SKIFF_LAZY_RESOLVE(name)                                   \
  ok = ok && (table.name = reinterpret_cast<decltype(table.name)>( \
                  ::skiff::ResolveSymbol(handle, soname, #name))) != nullptr;
