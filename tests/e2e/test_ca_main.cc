// test-ca: the test CA (test_ca.h) as a command, for suites outside C++.
//
//   test-ca DIR [IP...]
//
// Writes DIR/ca.pem, DIR/server.pem and DIR/server-key.pem; the server
// certificate names 127.0.0.1, localhost and every IP given.
#include <iostream>
#include <string>
#include <vector>

#include "test_ca.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: test-ca DIR [IP...]\n";
    return 2;
  }
  std::vector<std::string> ips(argv + 2, argv + argc);
  try {
    skiff::e2e::MakeTestCa(argv[1], ips);
  } catch (const std::exception& e) {
    std::cerr << "test-ca: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
