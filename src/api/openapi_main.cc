// skiff-genopenapi <docs dir>: writes openapi.json there (api/openapi.h).
#include <cstdio>
#include <fstream>
#include <string>

#include "api/openapi.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: skiff-genopenapi <docs dir>\n");
    return 2;
  }
  std::string path = std::string(argv[1]) + "/openapi.json";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << skiff::api::OpenApiText();
  out.close();
  if (!out) {
    std::fprintf(stderr, "skiff-genopenapi: cannot write %s\n", path.c_str());
    return 1;
  }
  return 0;
}
