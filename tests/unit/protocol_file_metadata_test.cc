// File metadata on the agent protocol (protocol/file_metadata.h): the rules
// both sides apply to keys, values and sizes, and fs.write / FsEntry
// carrying them, refusing hostile JSON from a caller or from the agent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/file_metadata.h"
#include "protocol/fs_messages.h"

namespace skiff::proto {
namespace {

using nlohmann::json;
using L = FileMetadataLimits;

TEST(FileMetadata, KeysAreHttpTokensAndValuesPrintableAscii) {
  EXPECT_TRUE(IsMetadataKey("owner"));
  EXPECT_TRUE(IsMetadataKey("a-b_c.d~1!#$%&'*+^`|"));
  EXPECT_FALSE(IsMetadataKey(""));
  EXPECT_FALSE(IsMetadataKey("a b"));
  EXPECT_FALSE(IsMetadataKey("a:b"));
  EXPECT_FALSE(IsMetadataKey("a/b"));
  EXPECT_FALSE(IsMetadataKey(std::string("a\0b", 3)));
  EXPECT_FALSE(IsMetadataKey("caf\xc3\xa9"));
  EXPECT_TRUE(IsMetadataKey(std::string(L::kMaxKeyBytes, 'k')));
  EXPECT_FALSE(IsMetadataKey(std::string(L::kMaxKeyBytes + 1, 'k')));

  EXPECT_TRUE(IsMetadataValue(""));
  EXPECT_TRUE(IsMetadataValue("any printable: ~!@ {}"));
  EXPECT_FALSE(IsMetadataValue("tab\there"));
  EXPECT_FALSE(IsMetadataValue("line\n"));
  EXPECT_FALSE(IsMetadataValue("\x7f"));
  EXPECT_FALSE(IsMetadataValue("caf\xc3\xa9"));
  EXPECT_TRUE(IsMetadataValue(std::string(L::kMaxValueBytes, 'v')));
  EXPECT_FALSE(IsMetadataValue(std::string(L::kMaxValueBytes + 1, 'v')));
}

TEST(FileMetadata, CountsAndTotalSizeAreBounded) {
  FileMetadata m;
  for (size_t i = 0; i < L::kMaxEntries; ++i) m["k" + std::to_string(i)] = "v";
  EXPECT_TRUE(CheckMetadata(m).ok());
  m["one-more"] = "v";
  EXPECT_EQ(CheckMetadata(m).error().code(), Code::kS210);

  FileMetadata big;
  for (size_t i = 0; big.size() * L::kMaxValueBytes <= L::kMaxTotalBytes; ++i)
    big["k" + std::to_string(i)] = std::string(L::kMaxValueBytes, 'v');
  auto st = CheckMetadata(big);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("together"), std::string::npos) << st.error().message();
}

TEST(FileMetadata, FsWriteCarriesItAndTheAgentRefusesBadPairs) {
  FsWriteRequest w{"/f", 0644, true, {{"owner", "me"}, {"tag", ""}}};
  json j = w.ToJson();
  EXPECT_EQ(j["metadata"], json({{"owner", "me"}, {"tag", ""}}));
  auto back = FsWriteRequest::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_TRUE(*back == w);
  FsWriteRequest plain{"/f", 0644, true, {}};
  EXPECT_FALSE(plain.ToJson().contains("metadata")) << "absent when empty";

  for (const json& bad :
       {json("str"), json::array({"a"}), json({{"k", 1}}), json({{"bad key", "v"}}),
        json({{"k", "new\nline"}}), json({{"k", std::string(L::kMaxValueBytes + 1, 'v')}})}) {
    json req = j;
    req["metadata"] = bad;
    auto r = FsWriteRequest::FromJson(req);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_TRUE(r.error().code() == Code::kS210 || r.error().code() == Code::kS001) << r.error().ToString();
  }
  json many = json::object();
  for (size_t i = 0; i <= L::kMaxEntries; ++i) many["k" + std::to_string(i)] = "v";
  json req = j;
  req["metadata"] = many;
  EXPECT_FALSE(FsWriteRequest::FromJson(req).ok());
}

TEST(FileMetadata, TheWriteResultSaysTheMetadataWasSet) {
  FsWriteResult without{3, false}, with{3, true};
  EXPECT_EQ(without.ToJson().dump(), R"({"bytes_written":3})") << "as before metadata";
  EXPECT_EQ(with.ToJson().dump(), R"({"bytes_written":3,"metadata_set":true})");
  EXPECT_TRUE(
      FsWriteResult::FromJson(json::parse(R"({"bytes_written":3,"metadata_set":true})"))->metadata_set);
  EXPECT_FALSE(FsWriteResult::FromJson(json::parse(R"({"bytes_written":3})"))->metadata_set);
  EXPECT_EQ(FsWriteResult::FromJson(json::parse(R"({"bytes_written":3,"metadata_set":1})")).error().code(),
            Code::kS300);
}

TEST(FileMetadata, AnEntryFromTheAgentIsCheckedLikeACallersRequest) {
  FsEntry e;
  e.name = "f";
  e.mode = "0644";
  e.owner = "root";
  e.group = "root";
  e.metadata = {{"k", "v"}};
  json j = e.ToJson();
  EXPECT_EQ(j["metadata"], json({{"k", "v"}}));
  auto back = FsEntry::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_TRUE(*back == e);

  e.metadata.clear();
  EXPECT_FALSE(e.ToJson().contains("metadata"));

  // A hostile agent: malformed answers (S300), never passed on.
  for (const json& bad : {json(7), json({{"k", json::object()}}), json({{"", "v"}}), json({{"k", "\x01"}})}) {
    json h = j;
    h["metadata"] = bad;
    auto r = FsEntry::FromJson(h);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.error().code(), Code::kS300) << r.error().ToString();
  }
}

}  // namespace
}  // namespace skiff::proto
