#include "models/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace helium {
namespace {

// float32 arithmetic where transformers computes in float32 (base ** (2j / dim) and 1 / that), so the
// tables agree to the last bit or two.
std::vector<float> default_inv_freq(double base, int dim) {
  std::vector<float> inv(dim / 2);
  for (int j = 0; j < dim / 2; ++j) {
    float exponent = static_cast<float>(2 * j) / static_cast<float>(dim);
    inv[j] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  return inv;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

double yarn_correction_dim(double rotations, int dim, double base, double max_positions) {
  return (dim * std::log(max_positions / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
}

}  // namespace

Result<RopeFrequencies> compute_rope_frequencies(const ConfigReader& config, int head_dim) {
  // Parameters live in rope_parameters (transformers >= 5) or rope_scaling (+ top-level rope_theta).
  nlohmann::json params = nlohmann::json::object();
  if (const auto* p = config.find("rope_parameters")) {
    if (!p->is_object()) return config.error("'rope_parameters' must be an object");
    params = *p;
  } else if (const auto* s = config.find("rope_scaling")) {
    if (!s->is_object()) return config.error("'rope_scaling' must be an object");
    params = *s;
  }
  ConfigReader rp(params, config.origin() + " (rope parameters)");
  double theta = rp.number_or("rope_theta", config.number_or("rope_theta", 10000.0));
  double partial = rp.number_or("partial_rotary_factor", config.number_or("partial_rotary_factor", 1.0));
  std::string type = "default";
  if (const auto* t = rp.find("rope_type")) type = t->get<std::string>();
  else if (const auto* t2 = rp.find("type")) type = t2->get<std::string>();

  RopeFrequencies rope;
  rope.type = type;
  rope.rot_dim = static_cast<int>(head_dim * partial);
  rope.rot_dim -= rope.rot_dim % 2;
  if (rope.rot_dim <= 0 || rope.rot_dim > head_dim)
    return config.error("partial_rotary_factor " + std::to_string(partial) + " gives no rotary dims");
  const int dim = rope.rot_dim;
  rope.inv_freq = default_inv_freq(theta, dim);

  if (type == "default") return rope;
  if (type == "linear") {
    HELIUM_ASSIGN_OR_RETURN(double factor, rp.number("factor"));
    for (float& f : rope.inv_freq) f = static_cast<float>(f / factor);
    return rope;
  }
  if (type == "llama3") {
    HELIUM_ASSIGN_OR_RETURN(double factor, rp.number("factor"));
    HELIUM_ASSIGN_OR_RETURN(double low_freq_factor, rp.number("low_freq_factor"));
    HELIUM_ASSIGN_OR_RETURN(double high_freq_factor, rp.number("high_freq_factor"));
    HELIUM_ASSIGN_OR_RETURN(int64_t old_context, rp.integer("original_max_position_embeddings"));
    double low_freq_wavelen = old_context / low_freq_factor;
    double high_freq_wavelen = old_context / high_freq_factor;
    for (float& f : rope.inv_freq) {
      float wavelen = static_cast<float>(2 * std::numbers::pi) / f;
      if (wavelen < high_freq_wavelen) continue;  // high frequencies stay
      if (wavelen > low_freq_wavelen) {           // low frequencies are interpolated
        f = static_cast<float>(f / factor);
        continue;
      }
      float smooth = static_cast<float>((old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor));
      f = (1 - smooth) * static_cast<float>(f / factor) + smooth * f;
    }
    return rope;
  }
  if (type == "yarn") {
    HELIUM_ASSIGN_OR_RETURN(double factor, rp.number("factor"));
    int64_t max_positions = config.integer_or("max_position_embeddings", 0);
    int64_t original = rp.integer_or("original_max_position_embeddings", 0);
    // As transformers does: with an explicit original length, the factor is the ratio of the two.
    if (original > 0 && max_positions > 0) factor = static_cast<double>(max_positions) / original;
    if (original <= 0) original = max_positions;
    if (original <= 0) return config.error("yarn rope needs original_max_position_embeddings");
    double attention_factor;
    const double mscale = rp.number_or("mscale", 0), mscale_all_dim = rp.number_or("mscale_all_dim", 0);
    if (const auto* af = rp.find("attention_factor"); af != nullptr && af->is_number()) {
      attention_factor = af->get<double>();
    } else if (mscale != 0 && mscale_all_dim != 0) {
      attention_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
    } else {
      attention_factor = yarn_mscale(factor, 1.0);
    }
    double beta_fast = rp.number_or("beta_fast", 32), beta_slow = rp.number_or("beta_slow", 1);
    bool truncate = rp.boolean_or("truncate", true);
    double low = yarn_correction_dim(beta_fast, dim, theta, static_cast<double>(original));
    double high = yarn_correction_dim(beta_slow, dim, theta, static_cast<double>(original));
    if (truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (int j = 0; j < dim / 2; ++j) {
      float pos_freq = 1.0f / rope.inv_freq[j];
      float extrapolation = rope.inv_freq[j];
      float interpolation = 1.0f / (static_cast<float>(factor) * pos_freq);
      float ramp = std::clamp(static_cast<float>((j - low) / (high - low)), 0.0f, 1.0f);
      float extrapolation_factor = 1.0f - ramp;
      rope.inv_freq[j] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    rope.attention_scaling = static_cast<float>(attention_factor);
    return rope;
  }
  return config.error("unsupported rope type '" + type + "' (supported: default, linear, llama3, yarn)");
}

}  // namespace helium
