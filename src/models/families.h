// models/families.h — the loader of each model family; the registry in model.cpp maps model_type to
// these. One file per family (named by the Hugging Face model_type) defines one of them.
#pragma once

#include <memory>

#include "models/model.h"

namespace helium {

Result<std::unique_ptr<Model>> load_llama(const Checkpoint&, Backend&, const ModelOptions&);
Result<std::unique_ptr<Model>> load_qwen2(const Checkpoint&, Backend&, const ModelOptions&);
Result<std::unique_ptr<Model>> load_qwen3(const Checkpoint&, Backend&, const ModelOptions&);

}  // namespace helium
