// skiff-gendocs <docs dir>: regenerates api.md and errors.md there.
#include <cstdio>
#include <fstream>
#include <string>

#include "functions/docs.h"

namespace {
bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "skiff-gendocs: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: skiff-gendocs <docs dir>\n");
    return 2;
  }
  std::string dir = argv[1];
  bool ok = WriteFile(dir + "/api.md", skiff::RenderApiDoc()) &&
            WriteFile(dir + "/errors.md", skiff::RenderErrorsDoc());
  return ok ? 0 : 1;
}
