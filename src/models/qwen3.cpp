// models/qwen3.cpp — Qwen3 dense (model_type "qwen3"): the dense decoder with a per-head RMSNorm on q and
// k (over head_dim, before RoPE), no biases unless attention_bias, head_dim set explicitly (128 for
// Qwen3-8B, not hidden / heads).
#include "models/dense_transformer.h"
#include "models/families.h"

namespace helium {

Result<std::unique_ptr<Model>> load_qwen3(const Checkpoint& checkpoint, Backend& backend, const ModelOptions& options) {
  HELIUM_ASSIGN_OR_RETURN(DenseConfig config, read_dense_config(checkpoint));
  ConfigReader r(checkpoint.config, checkpoint.dir + "/config.json");
  if (r.boolean_or("use_sliding_window", false))
    return r.error("use_sliding_window=true is not supported yet");
  config.qk_norm = true;
  config.qkv_bias = config.o_bias = r.boolean_or("attention_bias", false);
  HELIUM_ASSIGN_OR_RETURN(DenseWeights weights, map_dense_weights(config, checkpoint.weights));
  return make_dense_transformer(std::move(config), std::move(weights), checkpoint.weights, backend, options);
}

}  // namespace helium
