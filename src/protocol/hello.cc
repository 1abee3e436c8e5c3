#include "protocol/hello.h"

#include "protocol/frame.h"

namespace skiff::proto {

std::string EncodeHostHello() {
  return EncodeFrame(0, Type::kHello, 0, nlohmann::json{{"proto", kVersion}}.dump());
}

std::string EncodeResumeHello(const nlohmann::json& resume) {
  return EncodeFrame(0, Type::kHello, 0, nlohmann::json{{"proto", kVersion}, {"resume", resume}}.dump());
}

}  // namespace skiff::proto
