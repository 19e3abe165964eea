#include "hpcml/featurecache/access.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using testing::ScopedEnv;

TEST(AccessContext, UnguardedWithoutZone) {
  ScopedEnv z("HPCML_ZONE", std::nullopt);
  auto ctx = AccessContext::FromEnvironment();
  EXPECT_FALSE(ctx.guarded);
  EXPECT_TRUE(CheckPath(ctx, "/anything", "open").ok());
  EXPECT_TRUE(CheckLabels(ctx, "/anything", "eu", "restricted").ok());
}

TEST(AccessContext, ReadsTheGuardsVariables) {
  ScopedEnv z("HPCML_ZONE", "ae");
  ScopedEnv r("HPCML_ROLE", "ml-engineer");
  ScopedEnv d("HPCML_DATASETS", "/data/ae/a.h5, /data/ae/dir/,");
  ScopedEnv c("HPCML_CLASSIFICATIONS", "public,internal");
  auto ctx = AccessContext::FromEnvironment();
  EXPECT_TRUE(ctx.guarded);
  EXPECT_EQ(ctx.zone, "ae");
  EXPECT_EQ(ctx.role, "ml-engineer");
  EXPECT_EQ(ctx.datasets, (std::vector<std::string>{"/data/ae/a.h5", "/data/ae/dir"}));
  ASSERT_TRUE(ctx.classifications.has_value());
  EXPECT_EQ(ctx.classifications->size(), 2u);
}

TEST(PathApproved, ComponentWise) {
  std::vector<std::string> ok = {"/data/ae", "/x/file.h5"};
  EXPECT_TRUE(PathApproved(ok, "/data/ae"));
  EXPECT_TRUE(PathApproved(ok, "/data/ae/sub/f.h5"));
  EXPECT_FALSE(PathApproved(ok, "/data/aex/f.h5"));
  EXPECT_FALSE(PathApproved(ok, "/data"));
  EXPECT_TRUE(PathApproved(ok, "/x/file.h5"));
  EXPECT_FALSE(PathApproved(ok, "/x/file.h5.bak"));
  EXPECT_FALSE(PathApproved({"relative/path"}, "relative/path"));
  EXPECT_TRUE(PathApproved({"/"}, "/any/thing"));
  EXPECT_FALSE(PathApproved({}, "/any/thing"));
}

TEST(Check, GuardedRefusalsAreClear) {
  AccessContext ctx;
  ctx.guarded = true;
  ctx.zone = "ae";
  ctx.datasets = {"/data/ae"};
  Status p = CheckPath(ctx, "/data/eu/x.h5", "open feature set");
  EXPECT_EQ(p.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(p.message().find("/data/eu/x.h5: access denied (open feature set)"), std::string::npos)
      << p.message();
  EXPECT_NE(p.message().find("HPCML_DATASETS=/data/ae"), std::string::npos);
  EXPECT_TRUE(CheckPath(ctx, "/data/ae/x.h5", "open").ok());

  Status z = CheckLabels(ctx, "/data/ae/x.h5", "eu", "public");
  EXPECT_EQ(z.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(z.message().find("zone 'eu'"), std::string::npos);
  EXPECT_TRUE(CheckLabels(ctx, "/data/ae/x.h5", "ae", "restricted")
                  .ok());  // no classification list: not checked
  ctx.classifications = std::vector<std::string>{"public"};
  Status c = CheckLabels(ctx, "/data/ae/x.h5", "ae", "confidential");
  EXPECT_EQ(c.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(c.message().find("classification 'confidential'"), std::string::npos);
}

TEST(Check, EmptyDatasetListDeniesEverything) {
  ScopedEnv z("HPCML_ZONE", "ae");
  ScopedEnv d("HPCML_DATASETS", std::nullopt);
  auto ctx = AccessContext::FromEnvironment();
  EXPECT_EQ(CheckPath(ctx, "/data/ae/x.h5", "open").code(), StatusCode::kPermissionDenied);
}

TEST(CanonicalPath, ResolvesSymlinksAndMissingFiles) {
  testing::TempDir dir;
  testing::WriteText(dir / "real.h5", "x");
  std::filesystem::create_symlink(dir / "real.h5", dir / "link.h5");
  auto real = CanonicalPath(dir / "real.h5", true);
  ASSERT_TRUE(real.ok());
  EXPECT_EQ(*CanonicalPath(dir / "link.h5", true), *real);
  EXPECT_EQ(CanonicalPath(dir / "nope.h5", true).status().code(), StatusCode::kNotFound);
  auto missing = CanonicalPath(dir / "sub/../nope.h5", false);
  EXPECT_FALSE(missing.ok());  // "sub" does not exist
  auto fresh = CanonicalPath(dir / "nope.h5", false);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(std::filesystem::path(*fresh).filename(), "nope.h5");
  EXPECT_EQ(fresh->front(), '/');
}

}  // namespace
}  // namespace hpcml::featurecache
