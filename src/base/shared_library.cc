#include "base/shared_library.h"

#include <dlfcn.h>

#include "base/log.h"

namespace skiff {

void* OpenSharedLibrary(const char* soname) {
  void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) SKIFF_LOG(Error) << "cannot load " << soname << ": " << ::dlerror();
  return handle;
}

void* ResolveSymbol(void* handle, const char* soname, const char* name) {
  void* fn = ::dlsym(handle, name);
  if (fn == nullptr) SKIFF_LOG(Error) << soname << " has no " << name;
  return fn;
}

}  // namespace skiff
