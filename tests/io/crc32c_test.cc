#include "slimtorch/io/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace slimtorch {
namespace {

// RFC 3720 (iSCSI), appendix B.4 test vectors.
TEST(Crc32cTest, Rfc3720Vectors) {
  std::string zeros(32, '\0');
  std::string ones(32, '\xff');
  std::string inc(32, '\0');
  std::string dec(32, '\0');
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<char>(i);
    dec[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c::Value(zeros), 0x8a9136aau);
  EXPECT_EQ(crc32c::Value(ones), 0x62a8ab43u);
  EXPECT_EQ(crc32c::Value(inc), 0x46dd794eu);
  EXPECT_EQ(crc32c::Value(dec), 0x113fdb5cu);
  EXPECT_EQ(crc32c::ExtendPortable(0, zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(crc32c::ExtendPortable(0, ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c::ExtendPortable(0, inc.data(), 32), 0x46dd794eu);
  EXPECT_EQ(crc32c::ExtendPortable(0, dec.data(), 32), 0x113fdb5cu);
}

// An iSCSI SCSI Read (10) command PDU, RFC 3720 B.4.
TEST(Crc32cTest, Rfc3720ReadCommandPdu) {
  const unsigned char pdu[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(crc32c::Value(pdu, sizeof(pdu)), 0xd9963a56u);
  EXPECT_EQ(crc32c::ExtendPortable(0, pdu, sizeof(pdu)), 0xd9963a56u);
}

TEST(Crc32cTest, ExtendEqualsWholeAndPathsAgreeOnOddLengths) {
  std::vector<char> buf(1000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 7 + 3);
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 999u}) {
    for (size_t split : {size_t(0), n / 3, n}) {
      uint32_t whole = crc32c::Value(buf.data() + 1, n);
      uint32_t parts = crc32c::Extend(crc32c::Value(buf.data() + 1, split),
                                      buf.data() + 1 + split, n - split);
      EXPECT_EQ(whole, parts) << n << " " << split;
      EXPECT_EQ(whole, crc32c::ExtendPortable(0, buf.data() + 1, n)) << n;
    }
  }
}

TEST(Crc32cTest, MaskRoundTripsAndMatchesTensorFlowConstant) {
  for (uint32_t v : {0u, 1u, 0x8a9136aau, 0xffffffffu}) {
    EXPECT_EQ(crc32c::Unmask(crc32c::Mask(v)), v);
    EXPECT_NE(crc32c::Mask(v), v);
  }
  // Mask(0) is the delta itself; worked by hand from the rotation formula.
  EXPECT_EQ(crc32c::Mask(0), 0xa282ead8u);
  EXPECT_EQ(crc32c::Mask(1), (1u << 17) + 0xa282ead8u);
}

}  // namespace
}  // namespace slimtorch
