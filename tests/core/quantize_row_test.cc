// QuantizeRow (the quantised KV cache's rows) against the `gguf` package's
// numpy quantisers (tools/gen_dequant_golden.py): the same block bytes, for
// rounding ties, zero, constant and outlier blocks and random rows.
#include "core/quantize_row.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/npy.h"

namespace anymoe {
namespace {

const std::string kDir = std::string(ANYMOE_GOLDEN_DIR) + "/dequant/";

TEST(QuantizeRow, GivesTheGgufPackagesBlocks) {
  for (auto [name, type] : {std::pair{"q8_0", DType::kQ8_0}, {"q4_0", DType::kQ4_0}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(IsRowQuantizable(type));
    auto in = ReadNpy(kDir + "f32_to_" + name + "_in.npy");
    auto want = ReadNpy(kDir + "f32_to_" + name + "_out.npy");
    ASSERT_TRUE(in.ok() && want.ok());
    const std::vector<float> x = in->F32().value();
    const std::vector<uint8_t> blocks = want->U8().value();
    ASSERT_EQ(BytesFor(type, x.size()).value(), blocks.size());
    std::vector<uint8_t> got(blocks.size(), 0xAA);
    QuantizeRow(type, x.data(), got.data(), int64_t(x.size()));
    const int64_t block_bytes = Info(type).block_bytes;
    int bad = 0;
    for (size_t b = 0; b < blocks.size() / size_t(block_bytes); ++b) {
      const auto first = got.begin() + int64_t(b) * block_bytes;
      if (!std::equal(first, first + block_bytes, blocks.begin() + int64_t(b) * block_bytes)) {
        if (++bad <= 3) ADD_FAILURE() << "block " << b << " differs";
      }
    }
    EXPECT_EQ(bad, 0);
  }
  EXPECT_FALSE(IsRowQuantizable(DType::kF16));
}

}  // namespace
}  // namespace anymoe
