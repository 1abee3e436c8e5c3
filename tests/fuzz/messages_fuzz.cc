// Fuzzes the FromJson of every agent protocol message (protocol/messages.h,
// hello.h): arbitrary text, parsed as the host and the agent parse it, fed
// to each. None may crash or throw; whatever one accepts must encode to JSON
// it accepts again, and re-encode to the same JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/json_limits.h"
#include "protocol/hello.h"
#include "protocol/messages.h"

namespace {

template <typename T>
void Check(const nlohmann::json& j) {
  auto v = T::FromJson(j);
  if (!v.ok()) return;
  nlohmann::json once = v->ToJson();
  auto again = T::FromJson(once);
  if (!again.ok() || again->ToJson() != once) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace skiff::proto;
  nlohmann::json j = skiff::ParseJsonBounded(std::string_view(reinterpret_cast<const char*>(data), size));
  if (j.is_discarded()) return 0;
  Check<InfoRequest>(j);
  Check<InfoResult>(j);
  Check<ShutdownRequest>(j);
  Check<QuiesceRequest>(j);
  Check<ClockRequest>(j);
  Check<UsageRequest>(j);
  Check<UsageResult>(j);
  Check<PortConnectRequest>(j);
  Check<PortConnectMeta>(j);
  Check<PortConnectResult>(j);
  Check<EmptyResult>(j);
  Check<AgentError>(j);
  Check<ExecRequest>(j);
  Check<ExecStarted>(j);
  Check<ExecResult>(j);
  Check<FsEntry>(j);
  Check<FsLsRequest>(j);
  Check<FsLsResult>(j);
  Check<FsStatRequest>(j);
  Check<FsMkdirRequest>(j);
  Check<FsMkdirResult>(j);
  Check<FsWriteRequest>(j);
  Check<FsWriteResult>(j);
  Check<FsReadRequest>(j);
  Check<FsReadMeta>(j);
  Check<FsRmRequest>(j);
  Check<FsRmResult>(j);
  Check<FsMvRequest>(j);
  Check<FsMvResult>(j);
  Check<FsChmodRequest>(j);
  Check<FsChmodResult>(j);
  Check<FsGrepRequest>(j);
  Check<FsGrepMatch>(j);
  Check<FsGrepResult>(j);
  Check<FsSedRequest>(j);
  Check<FsSedFileResult>(j);
  Check<FsSedResult>(j);
  Check<FsWatchRequest>(j);
  Check<FsWatchEvent>(j);
  Check<AgentHello>(j);
  Check<HostHello>(j);
  Check<Resume>(j);
  return 0;
}
