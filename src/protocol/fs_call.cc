#include "protocol/fs_call.h"

#include <string>
#include <type_traits>

namespace skiff::proto {
namespace {

// The type each one-shot op answers with.
template <typename Request>
struct AnswerOf;
template <>
struct AnswerOf<FsLsRequest> {
  using type = FsLsResult;
};
template <>
struct AnswerOf<FsStatRequest> {
  using type = FsEntry;
};
template <>
struct AnswerOf<FsMkdirRequest> {
  using type = FsMkdirResult;
};
template <>
struct AnswerOf<FsRmRequest> {
  using type = FsRmResult;
};
template <>
struct AnswerOf<FsMvRequest> {
  using type = FsMvResult;
};
template <>
struct AnswerOf<FsChmodRequest> {
  using type = FsChmodResult;
};
template <>
struct AnswerOf<FsGrepRequest> {
  using type = FsGrepResult;
};
template <>
struct AnswerOf<FsSedRequest> {
  using type = FsSedResult;
};

}  // namespace

nlohmann::json ToJson(const FsCall& call) {
  return std::visit([](const auto& r) { return r.ToJson(); }, call);
}

std::string_view OpName(const FsCall& call) {
  return std::visit([](const auto& r) { return std::decay_t<decltype(r)>::kOp; }, call);
}

Result<nlohmann::json> CheckAnswer(const FsCall& call, nlohmann::json result) {
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
