// CudaWeights' resident bf16 copies: kept when asked, or when they leave the room asked free
// (resident_bf16_if_room), only for the quantized matrices a product reads — the embedding table
// only when it is the LM head too.
#include "backends/cuda/cuda_weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_test_util.h"
#include "backends/cuda/model_geometry.h"

namespace cellm {
namespace {

std::unique_ptr<CudaWeights> random_weights(const ModelConfig& config, TensorType type,
                                            const CudaWeightsOptions& options) {
  StatusOr<std::unique_ptr<CudaWeights>> weights = CudaWeights::random(config, {type, 3}, options);
  EXPECT_TRUE(weights.ok()) << weights.status().to_string();
  return weights.ok() ? std::move(weights).value() : nullptr;
}

TEST(CudaWeightsTest, QuantizedMatricesKeepBf16CopiesOnlyWhereTheyLeaveTheRoomAsked) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  ASSERT_FALSE(config->tied_embeddings);
  const auto plain = random_weights(*config, TensorType::kQ4_0, CudaWeightsOptions{});
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->has_bf16_copies());
  EXPECT_EQ(plain->bf16_copy(plain->layer(0).gate_up), nullptr);

  CudaWeightsOptions if_room;
  if_room.resident_bf16_if_room = true;
  if_room.keep_free_bytes = 0;  // a tiny model's copies fit
  const auto copied = random_weights(*config, TensorType::kQ4_0, if_room);
  ASSERT_NE(copied, nullptr);
  EXPECT_TRUE(copied->has_bf16_copies());
  for (const kernels::DeviceWeight* m :
       {&copied->layer(0).qkv, &copied->layer(0).wo, &copied->layer(0).gate_up,
        &copied->layer(3).w_down, &copied->output()}) {
    EXPECT_NE(copied->bf16_copy(*m), nullptr);
  }
  EXPECT_EQ(copied->bf16_copy(copied->token_embd()), nullptr) << "an embedding no product reads";
  EXPECT_GT(copied->num_bytes(), plain->num_bytes());

  if_room.keep_free_bytes = uint64_t{1} << 62;  // more than any device has
  const auto no_room = random_weights(*config, TensorType::kQ4_0, if_room);
  ASSERT_NE(no_room, nullptr);
  EXPECT_FALSE(no_room->has_bf16_copies());
  EXPECT_EQ(no_room->num_bytes(), plain->num_bytes());

  if_room.keep_free_bytes = 0;
  const auto bf16 = random_weights(*config, TensorType::kBF16, if_room);
  ASSERT_NE(bf16, nullptr);
  EXPECT_FALSE(bf16->has_bf16_copies()) << "nothing quantized to copy";

  ModelConfig tied = *config;
  tied.tied_embeddings = true;
  CudaWeightsOptions forced;
  forced.resident_bf16 = true;
  const auto tied_copies = random_weights(tied, TensorType::kQ8_0, forced);
  ASSERT_NE(tied_copies, nullptr);
  EXPECT_NE(tied_copies->bf16_copy(tied_copies->token_embd()), nullptr) << "the LM head's";
}

TEST(CudaWeightsTest, TheQ4KMMixPutsQ6KWhereLlamaCppsUseMoreBitsDoes) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  config->num_layers = 16;  // use_more_bits: layers 0, 1 (first eighth), 4, 7, 10, 13, 14, 15
  StatusOr<std::unique_ptr<CudaWeights>> weights =
      CudaWeights::random(*config, {TensorType::kQ4_K, 5, true}, CudaWeightsOptions{});
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const CudaWeights& w = **weights;
  EXPECT_EQ(w.token_embd().type, TensorType::kQ4_K);
  EXPECT_EQ(w.output().type, TensorType::kQ6_K);
  for (int32_t l = 0; l < config->num_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const bool more_bits = l < 2 || l >= 14 || (l - 2) % 3 == 2;
    const CudaLayerWeights& layer = w.layer(l);
    const TensorType v_down = more_bits ? TensorType::kQ6_K : TensorType::kQ4_K;
    EXPECT_EQ(layer.w_down.type, v_down);
    EXPECT_EQ(layer.wo.type, TensorType::kQ4_K);
    EXPECT_EQ(layer.gate_up.type, TensorType::kQ4_K);
    // q | k | v fused only where all three are Q4_K.
    EXPECT_EQ(layer.qkv_fused(), !more_bits);
    if (more_bits) {
      EXPECT_EQ(layer.wq.type, TensorType::kQ4_K);
      EXPECT_EQ(layer.wv.type, TensorType::kQ6_K);
    }
  }
}

}  // namespace
}  // namespace cellm
