// Shared by the model tests: the tiny golden checkpoints under tests/data/models (made by
// tools/goldens/make_tiny_models.py with transformers) and their reference logits.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/checkpoint.h"

namespace helium::testing {

// A name with a slash is a directory relative to the repository (the trained models under models/);
// a bare name is one of the tiny golden checkpoints.
inline std::string golden_dir(const std::string& name) {
  if (name.find('/') != std::string::npos) return std::string(HELIUM_SOURCE_DIR) + "/" + name;
  return std::string(HELIUM_SOURCE_DIR) + "/tests/data/models/" + name;
}

struct GoldenPrompt {
  std::vector<int32_t> ids;  // prompt followed by the 32 greedy tokens of the reference
  int prompt_len = 0;
  std::vector<float> logits;  // (ids.size(), vocab), from one full forward
};

inline std::vector<GoldenPrompt> read_goldens(const std::string& model) {
  WeightMap map;
  Status st = load_safetensors(golden_dir(model) + "/goldens.safetensors", map);
  EXPECT_TRUE(st.is_ok()) << st.message();
  std::vector<GoldenPrompt> out;
  for (int i = 0;; ++i) {
    std::string p = "p";  // built in two steps: g++ 12 -O3 warns falsely (-Wrestrict) on "p" + to_string
    p += std::to_string(i);
    const WeightInfo* ids = map.find(p + ".ids");
    if (ids == nullptr) break;
    GoldenPrompt g;
    const auto* id64 = static_cast<const int64_t*>(ids->data);
    for (int64_t j = 0; j < ids->shape[0]; ++j) g.ids.push_back(static_cast<int32_t>(id64[j]));
    g.prompt_len = static_cast<int>(*static_cast<const int64_t*>(map.find(p + ".prompt_len")->data));
    const WeightInfo* lg = map.find(p + ".logits");
    const auto* f = static_cast<const float*>(lg->data);
    g.logits.assign(f, f + lg->bytes / 4);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace helium::testing
