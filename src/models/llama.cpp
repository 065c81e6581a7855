// models/llama.cpp — Llama (1/2/3.x) and its many derivatives (model_type "llama"): the dense decoder
// with optional attention_bias (q/k/v/o) and mlp_bias.
#include "models/dense_transformer.h"
#include "models/families.h"

namespace helium {

Result<std::unique_ptr<Model>> load_llama(const Checkpoint& checkpoint, Backend& backend, const ModelOptions& options) {
  HELIUM_ASSIGN_OR_RETURN(DenseConfig config, read_dense_config(checkpoint));
  ConfigReader r(checkpoint.config, checkpoint.dir + "/config.json");
  config.qkv_bias = config.o_bias = r.boolean_or("attention_bias", false);
  config.mlp_bias = r.boolean_or("mlp_bias", false);
  HELIUM_ASSIGN_OR_RETURN(DenseWeights weights, map_dense_weights(config, checkpoint.weights));
  return make_dense_transformer(std::move(config), std::move(weights), checkpoint.weights, backend, options);
}

}  // namespace helium
