#include <gtest/gtest.h>

#include "lowbit/status.h"

TEST(Status, CarriesCodeAndMessage) {
  lowbit::Status s = lowbit::make_status(lowbit::StatusCode::kInvalidArgument, "n=%d bad", 7);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), lowbit::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "InvalidArgument: n=7 bad");
  EXPECT_TRUE(lowbit::Status::Ok().ok());
}
