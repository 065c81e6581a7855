// models/qwen2.cpp — Qwen2 / Qwen2.5 (model_type "qwen2"): the dense decoder with q/k/v biases (always
// present in these checkpoints) and no o_proj bias.
#include "models/dense_transformer.h"
#include "models/families.h"

namespace helium {

Result<std::unique_ptr<Model>> load_qwen2(const Checkpoint& checkpoint, Backend& backend, const ModelOptions& options) {
  HELIUM_ASSIGN_OR_RETURN(DenseConfig config, read_dense_config(checkpoint));
  ConfigReader r(checkpoint.config, checkpoint.dir + "/config.json");
  if (r.boolean_or("use_sliding_window", false))
    return r.error("use_sliding_window=true is not supported yet");
  config.qkv_bias = true;
  HELIUM_ASSIGN_OR_RETURN(DenseWeights weights, map_dense_weights(config, checkpoint.weights));
  return make_dense_transformer(std::move(config), std::move(weights), checkpoint.weights, backend, options);
}

}  // namespace helium
