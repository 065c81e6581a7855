// models/dense_transformer.h — the pre-norm decoder shared by the dense Llama-like families
// (llama, qwen2, qwen3): RMSNorm -> GQA attention with RoPE -> residual -> RMSNorm -> SwiGLU -> residual.
// Family files (llama.cpp, qwen2.cpp, qwen3.cpp) read their config and map their tensor names into these
// structs; the few real differences (q/k/v biases, per-head q/k norms, tied head) are fields, not forks
// of the forward.
#pragma once

#include <memory>
#include <vector>

#include "models/model.h"
#include "models/rope.h"

namespace helium {

struct DenseConfig {
  std::string family;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t max_context = 0;
  float rms_norm_eps = 1e-6f;
  bool qkv_bias = false;     // qwen2; llama's attention_bias
  bool o_bias = false;       // llama's attention_bias
  bool mlp_bias = false;     // llama's mlp_bias
  bool qk_norm = false;      // qwen3: per-head RMSNorm of q and k before RoPE
  bool tied_embeddings = false;
  RopeFrequencies rope;
};

struct DenseLayerWeights {
  Tensor input_norm;            // (hidden)
  Tensor q_proj, q_bias;        // (n_heads * head_dim, hidden), (n_heads * head_dim)
  Tensor k_proj, k_bias;        // (n_kv_heads * head_dim, hidden), (n_kv_heads * head_dim)
  Tensor v_proj, v_bias;        // (n_kv_heads * head_dim, hidden), (n_kv_heads * head_dim)
  Tensor o_proj, o_bias;        // (hidden, n_heads * head_dim), (hidden)
  Tensor q_norm, k_norm;        // (head_dim), qk_norm only
  Tensor post_attention_norm;   // (hidden)
  Tensor gate_proj, gate_bias;  // (intermediate, hidden), (intermediate)
  Tensor up_proj, up_bias;      // (intermediate, hidden), (intermediate)
  Tensor down_proj, down_bias;  // (hidden, intermediate), (hidden)
  // Set when the backend prefers stacked projections (one pass over the weights): q/k/v_proj above are
  // then views into qkv_proj, gate/up_proj into gate_up_proj (biases likewise, when present).
  Tensor qkv_proj, qkv_bias;          // ((n_heads + 2 * n_kv_heads) * head_dim, hidden), (same rows)
  Tensor gate_up_proj, gate_up_bias;  // (2 * intermediate, hidden), (2 * intermediate)
};

struct DenseWeights {
  Tensor embed_tokens;  // (vocab, hidden)
  std::vector<DenseLayerWeights> layers;
  Tensor final_norm;    // (hidden)
  Tensor lm_head;       // (vocab, hidden); the embedding when tied
};

// Tensor names of one layer in the Hugging Face layout "model.layers.{i}.<suffix>".
Result<DenseWeights> map_dense_weights(const DenseConfig& config, const WeightMap& weights);

// Builds the model on `backend`: imports weights and plans every activation buffer for max_rows.
Result<std::unique_ptr<Model>> make_dense_transformer(DenseConfig config, DenseWeights host_weights,
                                                       const WeightMap& weights, Backend& backend,
                                                       const ModelOptions& options);

// Reads the keys every Llama-like config has (sizes, eps, rope); families add their own flags.
Result<DenseConfig> read_dense_config(const Checkpoint& checkpoint);

}  // namespace helium
