#include "models/model.h"

#include "models/families.h"

namespace helium {
namespace {

using Loader = Result<std::unique_ptr<Model>> (*)(const Checkpoint&, Backend&, const ModelOptions&);

struct Family {
  const char* model_type;
  Loader load;
};

constexpr Family kFamilies[] = {
    {"llama", load_llama},
    {"qwen2", load_qwen2},
    {"qwen3", load_qwen3},
};

}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> names;
  for (const auto& f : kFamilies) names.emplace_back(f.model_type);
  return names;
}

Result<std::unique_ptr<Model>> load_model(const Checkpoint& checkpoint, Backend& backend, const ModelOptions& options) {
  for (const auto& f : kFamilies)
    if (checkpoint.model_type == f.model_type) return f.load(checkpoint, backend, options);
  std::string supported;
  for (const auto& name : supported_model_types()) supported += (supported.empty() ? "" : ", ") + name;
  return Status::error(checkpoint.dir + "/config.json: unknown model_type '" + checkpoint.model_type +
                       "' (supported: " + supported + ")");
}

}  // namespace helium
