// HF names -> GGUF names (models/tensor_names.h): llama.cpp's where it has the
// tensor, glm5-next's own (tools/gen_glm5_next_gguf.py) for KDA's A_log, mHC and
// KPool, and an unknown name, with or without a suffix, passed through unchanged.
#include "models/tensor_names.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

TEST(TensorNames, Glm5NextKdaMhcAndKPoolTensors) {
  const std::pair<const char*, const char*> cases[] = {
      {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
      {"model.layers.0.self_attn.q_conv1d.weight", "blk.0.ssm_conv1d_q.weight"},
      {"model.layers.0.self_attn.v_conv1d.weight", "blk.0.ssm_conv1d_v.weight"},
      {"model.layers.0.self_attn.f_a_proj.weight", "blk.0.ssm_f_a.weight"},
      {"model.layers.0.self_attn.f_b_proj.weight", "blk.0.ssm_f_b.weight"},
      {"model.layers.0.self_attn.b_proj.weight", "blk.0.ssm_beta.weight"},
      {"model.layers.0.self_attn.g_a_proj.weight", "blk.0.ssm_g_a.weight"},
      {"model.layers.0.self_attn.g_b_proj.weight", "blk.0.ssm_g_b.weight"},
      {"model.layers.0.self_attn.o_norm.weight", "blk.0.ssm_norm.weight"},
      {"model.layers.0.self_attn.dt_bias", "blk.0.ssm_dt.bias"},
      {"model.layers.0.self_attn.A_log", "blk.0.ssm_a_log"},
      {"model.layers.12.hc_attn_fn", "blk.12.hc_attn_fn"},
      {"model.layers.12.hc_ffn_scale", "blk.12.hc_ffn_scale"},
      {"model.layers.3.self_attn.indexer.index_kpool_compress_ape", "blk.3.indexer.kpool_ape"},
      {"model.layers.3.self_attn.indexer.index_kpool_compress_gate", "blk.3.indexer.kpool_gate"},
      {"model.layers.3.mlp.gate.e_score_correction_bias", "blk.3.exp_probs_b.bias"},
      // Unknown names, a suffix-less one among them, stay as they are.
      {"model.layers.0.attn_hc.fn", "model.layers.0.attn_hc.fn"},
      {"model.layers.0.mystery", "model.layers.0.mystery"},
      {"model.layers.0.self_attn.forget_gate.A_log", "model.layers.0.self_attn.forget_gate.A_log"},
  };
  for (const auto& [hf, gguf] : cases) EXPECT_EQ(GgufTensorName("glm5-next", hf), gguf) << hf;
}

}  // namespace
}  // namespace anymoe
