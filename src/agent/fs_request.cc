#include "agent/fs_request.h"

#include <string>

namespace skiff::agent {

Error FsError(int err, std::string_view what) {
  Code c = CodeForErrno(err);
  std::string m(FsPrefix(c));
  m.append(what);
  if (c == Code::kS216) m.append(": ").append(ErrnoName(err));
  return Error(c, std::move(m));
}

}  // namespace skiff::agent
