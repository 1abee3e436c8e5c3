// TenantScope (docs/configuration.md#tenants) over the SandboxService double:
// creates are recorded as the scope's tenant's, list shows only them, and
// every call naming another tenant's sandbox gets exactly the S002 of an
// unknown id without reaching the service.
#include "sandbox/tenant_scope.h"

#include <gtest/gtest.h>

#include <string>

#include "functions_fake_manager.h"

namespace skiff {
namespace {

using testing::Fake;
using testing::FakeSandboxService;
using testing::kLiveId;
using testing::kUnknownId;

constexpr const char* kOthersId = "5b1d2c3e-4f50-4a61-8b72-9c83d4e5f607";

class TenantScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake().Reset();
    Fake().live = {kLiveId, kOthersId};
    Fake().tenants = {{kLiveId, "alice"}, {kOthersId, "bob"}};
    ListEntry mine, theirs;
    mine.sandbox_id = kLiveId;
    mine.tenant = "alice";
    theirs.sandbox_id = kOthersId;
    theirs.tenant = "bob";
    Fake().list = {mine, theirs};
  }
  // The S002 `call` gives for `id`, with the id replaced by "<id>".
  template <class F>
  static std::string NotFoundText(const std::string& id, F call) {
    Status st = call(id);
    EXPECT_FALSE(st.ok());
    if (st.ok()) return "";
    EXPECT_EQ(st.error().code(), Code::kS002);
    std::string m = st.error().message();
    auto at = m.find(id);
    EXPECT_NE(at, std::string::npos) << m;
    if (at != std::string::npos) m.replace(at, id.size(), "<id>");
    return m;
  }

  FakeSandboxService inner;
  TenantScope alice{inner, "alice"};
};

TEST_F(TenantScopeTest, CreateAndRunRecordTheTenant) {
  CreateSpec spec;
  spec.image = "python";
  spec.tenant = "forged";  // never taken from the caller
  ASSERT_TRUE(alice.Create(spec).ok());
  EXPECT_EQ(Fake().last_create.tenant, "alice");
  RunSpec run;
  run.create.image = "python";
  ASSERT_TRUE(alice.Run(run).ok());
  EXPECT_EQ(Fake().last_run.create.tenant, "alice");
}

TEST_F(TenantScopeTest, ListShowsOnlyTheTenantsOwn) {
  auto list = alice.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].sandbox_id, kLiveId);
  TenantScope carol(inner, "carol");
  EXPECT_TRUE(carol.List().empty());
  EXPECT_EQ(alice.TenantOf(kLiveId), "alice");
  EXPECT_EQ(alice.TenantOf(kOthersId), std::nullopt);
}

TEST_F(TenantScopeTest, OwnSandboxIsDrivenAsBefore) {
  ExecSpec es;
  es.sandbox_id = kLiveId;
  EXPECT_TRUE(alice.Exec(es).ok());
  EXPECT_TRUE(alice.Fs(kLiveId, proto::FsStatRequest{"/"}).ok());
  EXPECT_TRUE(alice.Stop(kLiveId, false).ok());
  EXPECT_EQ(Fake().last_stop, kLiveId);
}

TEST_F(TenantScopeTest, AnotherTenantsSandboxIsAnUnknownId) {
  auto exec = [&](const std::string& id) -> Status {
    ExecSpec es;
    es.sandbox_id = id;
    auto r = alice.Exec(es);
    return r.ok() ? OkStatus() : Status(r.error());
  };
  auto stop = [&](const std::string& id) { return alice.Stop(id, true); };
  auto fs = [&](const std::string& id) -> Status {
    auto r = alice.Fs(id, proto::FsStatRequest{"/"});
    return r.ok() ? OkStatus() : Status(r.error());
  };
  auto write = [&](const std::string& id) -> Status {
    auto r = alice.FsWrite(id, "/f", 0644, false, [] { return Result<std::string>(std::string()); }, {});
    return r.ok() ? OkStatus() : Status(r.error());
  };
  auto read = [&](const std::string& id) {
    return alice.FsRead(
        id, "/f", [](const FsReadMeta&) {}, [](std::string_view) { return true; });
  };
  int before = Fake().calls;
  EXPECT_EQ(NotFoundText(kOthersId, exec), NotFoundText(kUnknownId, exec));
  EXPECT_EQ(NotFoundText(kOthersId, stop), NotFoundText(kUnknownId, stop));
  EXPECT_EQ(NotFoundText(kOthersId, fs), NotFoundText(kUnknownId, fs));
  EXPECT_EQ(NotFoundText(kOthersId, write), NotFoundText(kUnknownId, write));
  EXPECT_EQ(NotFoundText(kOthersId, read), NotFoundText(kUnknownId, read));
  EXPECT_EQ(Fake().calls, before);  // none of them reached the service
  EXPECT_TRUE(Fake().last_stop.empty());
  EXPECT_TRUE(Fake().fs_calls.empty());
}

}  // namespace
}  // namespace skiff
