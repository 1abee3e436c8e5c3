#include "protocol/process_call.h"

#include <string>
#include <type_traits>

#include "protocol/messages.h"

namespace skiff::proto {
namespace {

template <typename Request>
struct AnswerOf {
  using type = EmptyResult;  // proc.signal, proc.resize, proc.forget
};
template <>
struct AnswerOf<ProcStartRequest> {
  using type = ProcInfo;
};
template <>
struct AnswerOf<ProcWaitRequest> {
  using type = ProcInfo;
};
template <>
struct AnswerOf<ProcListRequest> {
  using type = ProcListResult;
};

}  // namespace

nlohmann::json ToJson(const ProcessCall& call) {
  return std::visit([](const auto& r) { return r.ToJson(); }, call);
}

std::string_view OpName(const ProcessCall& call) {
  return std::visit([](const auto& r) { return std::decay_t<decltype(r)>::kOp; }, call);
}

Result<nlohmann::json> CheckAnswer(const ProcessCall& call, nlohmann::json result) {
  return std::visit(
      [&](const auto& r) -> Result<nlohmann::json> {
        using Answer = typename AnswerOf<std::decay_t<decltype(r)>>::type;
        auto a = Answer::FromJson(result);
        result = nullptr;
        if (!a.ok())
          return std::move(a).error().With("reading the agent's " + std::string(OpName(call)) + " result");
        return a->ToJson();
      },
      call);
}

}  // namespace skiff::proto
