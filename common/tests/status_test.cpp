#include "hpcml/common/status.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace hpcml {
namespace {

Status FailsWith(StatusCode code) {
  return Status(code, "boom");
}

Status Propagates(StatusCode code) {
  HPCML_RETURN_IF_ERROR(FailsWith(code));
  return Status::Ok();
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("{} is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  HPCML_ASSIGN_OR_RETURN(int h, Half(x));
  HPCML_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(Status, ErrorKeepsCodeAndMessage) {
  Status s = NotFound("{}: version {} not found", "/data/x.h5", "v3");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "/data/x.h5: version v3 not found");
}

TEST(Status, EmptyMessageGetsCodeName) {
  EXPECT_EQ(Status(StatusCode::kCorrupt, "").message(), "corrupt");
}

TEST(Status, ReturnIfErrorAddsLocation) {
  Status s = Propagates(StatusCode::kIoError);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "boom");
  EXPECT_NE(s.Debug().find("status_test.cpp:"), std::string::npos) << s.Debug();
}

TEST(Status, WithContextPrefixesOnlyErrors) {
  EXPECT_EQ(Status(StatusCode::kIoError, "short read").WithContext("a.h5").message(),
            "a.h5: short read");
  EXPECT_TRUE(Status::Ok().WithContext("a.h5").ok());
}

TEST(Status, ErrnoErrorMapsCommonCodes) {
  EXPECT_EQ(ErrnoError("x", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoError("x", EACCES).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoError("x", EIO).code(), StatusCode::kIoError);
  EXPECT_EQ(ErrnoError("/etc/x", ENOENT).message(), "/etc/x: No such file or directory");
}

TEST(Result, ValueAndError) {
  Result<int> ok = Quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  Result<int> bad = Quarter(6);  // 6/2 = 3, odd
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "3 is odd");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Result, OkStatusIsNotAValue) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(Result, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace hpcml
