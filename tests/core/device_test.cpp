#include "kiln/core/device.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(Device::parse("cpu:0"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cpu"), Device::cpu(0));
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  std::ostringstream os;
  os << Device::cpu(2);
  EXPECT_EQ(os.str(), "cpu:2");
  for (const Device& d : {Device::cpu(0), Device::cpu(7), Device::cuda(0), Device::cuda(12)})
    EXPECT_EQ(Device::parse(d.str()), d);
}

TEST(Device, DefaultIsCpuZero) {
  EXPECT_TRUE(Device().is_cpu());
  EXPECT_EQ(Device().index(), 0);
}

TEST(Device, BadIndexIsRejected) {
  KILN_EXPECT_THROW_MSG(Device::parse("cuda:x"), UserError, "'cuda:x'", "'x'",
                        "non-negative integer", "cuda:0");
  KILN_EXPECT_THROW_MSG(Device::parse("cpu:-1"), UserError, "'-1'");
  KILN_EXPECT_THROW_MSG(Device::parse("cpu:"), UserError, "index ''");
  KILN_EXPECT_THROW_MSG(Device::parse("cpu:1x"), UserError, "'1x'");
  KILN_EXPECT_THROW_MSG(Device::cpu(-2), UserError, "index -2 is negative");
}

TEST(Device, UnknownKindIsRejected) {
  KILN_EXPECT_THROW_MSG(Device::parse("tpu:0"), UserError, "kind 'tpu'", "cpu:0 or cuda:0");
  KILN_EXPECT_THROW_MSG(Device::parse(""), UserError, "unknown device ''");
}

}  // namespace
}  // namespace kiln
