// models/rope.h — rotary-embedding frequencies from a config, as Hugging Face computes them.
// Owns: the inv_freq table and attention scaling for rope types default, linear, llama3 and yarn, read
// from `rope_parameters` (transformers 5) or `rope_scaling` + `rope_theta` (older configs), with
// `partial_rotary_factor`. Must not: apply the rotation (that is the backend's rope op).
#pragma once

#include <string>
#include <vector>

#include "models/config_reader.h"

namespace helium {

struct RopeFrequencies {
  std::string type;              // "default", "linear", "llama3", "yarn"
  int rot_dim = 0;               // rotated dims per head (even)
  std::vector<float> inv_freq;   // rot_dim / 2
  float attention_scaling = 1.0f;
};

Result<RopeFrequencies> compute_rope_frequencies(const ConfigReader& config, int head_dim);

}  // namespace helium
