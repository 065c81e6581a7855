// hub/catalog.cpp — parsing and validating catalog/models.json, and the parameter arithmetic of a shape.
#include "hub/catalog.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/mapped_file.h"
#include "hub/cache.h"

namespace helium {
namespace {

// ordered: entries keep the file's order (`helium models` lists them as written).
using json = nlohmann::ordered_json;

// Reads one JSON object field by field; every field read is marked, so that leftovers are reported as
// unknown (a typo in the catalog must not be silently ignored).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  Status check_object() const {
    if (!object_.is_object()) return Status::error(where_ + ": expected an object");
    return Status::ok();
  }
  bool has(const char* key) const { return object_.contains(key); }

  Result<std::string> string(const char* key, bool required, std::string fallback = "") {
    seen_.insert(key);
    if (!object_.contains(key)) {
      if (required) return missing(key);
      return fallback;
    }
    const json& v = object_[key];
    if (!v.is_string()) return Status::error(where_ + "." + key + ": expected a string");
    return v.get<std::string>();
  }

  // Integers in [lo, hi]; JSON numbers written as 1.5e9 are accepted when they are whole.
  Result<int64_t> integer(const char* key, bool required, int64_t lo, int64_t hi, int64_t fallback = 0) {
    seen_.insert(key);
    if (!object_.contains(key)) {
      if (required) return missing(key);
      return fallback;
    }
    const json& v = object_[key];
    int64_t n = 0;
    if (v.is_number_integer()) {
      n = v.get<int64_t>();
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e18)
        return Status::error(where_ + "." + key + ": expected a whole number, got " + v.dump());
      n = static_cast<int64_t>(d);
    } else {
      return Status::error(where_ + "." + key + ": expected a number, got " + v.dump());
    }
    if (n < lo || n > hi)
      return Status::error(where_ + "." + key + ": " + std::to_string(n) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return n;
  }

  Result<bool> boolean(const char* key, bool required, bool fallback = false) {
    seen_.insert(key);
    if (!object_.contains(key)) {
      if (required) return missing(key);
      return fallback;
    }
    if (!object_[key].is_boolean()) return Status::error(where_ + "." + key + ": expected true or false");
    return object_[key].get<bool>();
  }

  // A sub-object (nullptr when absent and not required).
  Result<const json*> object(const char* key, bool required) {
    seen_.insert(key);
    if (!object_.contains(key)) {
      if (required) return missing(key);
      return static_cast<const json*>(nullptr);
    }
    if (!object_[key].is_object()) return Status::error(where_ + "." + key + ": expected an object");
    return &object_[key];
  }

  Result<std::vector<std::string>> strings(const char* key, bool required) {
    seen_.insert(key);
    std::vector<std::string> out;
    if (!object_.contains(key)) {
      if (required) return missing(key);
      return out;
    }
    const json& v = object_[key];
    if (!v.is_array()) return Status::error(where_ + "." + key + ": expected an array of strings");
    for (const auto& s : v) {
      if (!s.is_string()) return Status::error(where_ + "." + key + ": expected an array of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  }

  // Errors for every key that was never read.
  Status no_unknown_fields() const {
    std::string unknown;
    for (const auto& [key, value] : object_.items())
      if (!seen_.count(key)) unknown += (unknown.empty() ? "" : ", ") + key;
    if (!unknown.empty()) return Status::error(where_ + ": unknown field(s): " + unknown);
    return Status::ok();
  }

  const std::string& where() const { return where_; }

 private:
  Status missing(const char* key) const {
    return Status::error(where_ + ": missing required field '" + key + "'");
  }
  const json& object_;
  std::string where_;
  std::set<std::string> seen_;
};

constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden sizes, FFN widths
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = 4096;
constexpr int64_t kMaxContext = int64_t{1} << 26;     // 64M positions
constexpr int64_t kMaxParameters = int64_t{1} << 46;  // 70 trillion

Status parse_attention(ObjectReader& parent, AttentionFacts& a) {
  HELIUM_ASSIGN_OR_RETURN(const json* obj, parent.object("attention", false));
  if (obj == nullptr) return Status::ok();
  ObjectReader r(*obj, parent.where() + ".attention");
  HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("layers", true, 0, kMaxLayers));
  HELIUM_ASSIGN_OR_RETURN(int64_t heads, r.integer("heads", true, 1, kMaxHeads));
  HELIUM_ASSIGN_OR_RETURN(int64_t kv_heads, r.integer("kv_heads", true, 1, kMaxHeads));
  HELIUM_ASSIGN_OR_RETURN(int64_t head_dim, r.integer("head_dim", true, 1, kMaxHeadDim));
  HELIUM_ASSIGN_OR_RETURN(a.output_gate, r.boolean("output_gate", false));
  HELIUM_RETURN_IF_ERROR(r.no_unknown_fields());
  if (heads % kv_heads != 0)
    return Status::error(r.where() + ": heads (" + std::to_string(heads) +
                         ") is not a multiple of kv_heads (" + std::to_string(kv_heads) + ")");
  a.layers = static_cast<int>(layers);
  a.heads = static_cast<int>(heads);
  a.kv_heads = static_cast<int>(kv_heads);
  a.head_dim = static_cast<int>(head_dim);
  return Status::ok();
}

Status parse_recurrent(ObjectReader& parent, RecurrentFacts& rf) {
  HELIUM_ASSIGN_OR_RETURN(const json* obj, parent.object("recurrent", false));
  if (obj == nullptr) return Status::ok();
  ObjectReader r(*obj, parent.where() + ".recurrent");
  HELIUM_ASSIGN_OR_RETURN(rf.kind, r.string("kind", true));
  HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("layers", true, 0, kMaxLayers));
  HELIUM_ASSIGN_OR_RETURN(int64_t conv, r.integer("conv_kernel", true, 1, 64));
  rf.layers = static_cast<int>(layers);
  rf.conv_kernel = static_cast<int>(conv);
  if (rf.kind == "gated_deltanet") {
    HELIUM_ASSIGN_OR_RETURN(int64_t kh, r.integer("key_heads", true, 1, kMaxHeads));
    HELIUM_ASSIGN_OR_RETURN(int64_t vh, r.integer("value_heads", true, 1, kMaxHeads));
    HELIUM_ASSIGN_OR_RETURN(int64_t kd, r.integer("key_dim", true, 1, kMaxHeadDim));
    HELIUM_ASSIGN_OR_RETURN(int64_t vd, r.integer("value_dim", true, 1, kMaxHeadDim));
    if (vh % kh != 0)
      return Status::error(r.where() + ": value_heads (" + std::to_string(vh) +
                           ") is not a multiple of key_heads (" + std::to_string(kh) + ")");
    rf.key_heads = static_cast<int>(kh);
    rf.value_heads = static_cast<int>(vh);
    rf.key_dim = static_cast<int>(kd);
    rf.value_dim = static_cast<int>(vd);
  } else if (rf.kind == "mamba2") {
    HELIUM_ASSIGN_OR_RETURN(int64_t heads, r.integer("heads", true, 1, kMaxHeads));
    HELIUM_ASSIGN_OR_RETURN(int64_t hd, r.integer("head_dim", true, 1, kMaxHeadDim));
    HELIUM_ASSIGN_OR_RETURN(int64_t state, r.integer("state", true, 1, kMaxHeadDim));
    HELIUM_ASSIGN_OR_RETURN(int64_t groups, r.integer("groups", true, 1, kMaxHeads));
    if (heads % groups != 0)
      return Status::error(r.where() + ": heads (" + std::to_string(heads) +
                           ") is not a multiple of groups (" + std::to_string(groups) + ")");
    rf.heads = static_cast<int>(heads);
    rf.head_dim = static_cast<int>(hd);
    rf.state = static_cast<int>(state);
    rf.groups = static_cast<int>(groups);
  } else {
    return Status::error(r.where() + ".kind: '" + rf.kind + "' is not one of gated_deltanet, mamba2");
  }
  return r.no_unknown_fields();
}

Status check_activation(const std::string& where, const std::string& activation) {
  if (activation != "swiglu" && activation != "relu2")
    return Status::error(where + ".activation: '" + activation + "' is not one of swiglu, relu2");
  return Status::ok();
}

Status parse_ffn(ObjectReader& parent, FfnFacts& f) {
  HELIUM_ASSIGN_OR_RETURN(const json* obj, parent.object("ffn", false));
  if (obj == nullptr) return Status::ok();
  ObjectReader r(*obj, parent.where() + ".ffn");
  HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("layers", true, 0, kMaxLayers));
  HELIUM_ASSIGN_OR_RETURN(f.intermediate, r.integer("intermediate", true, 1, kMaxWidth));
  HELIUM_ASSIGN_OR_RETURN(f.activation, r.string("activation", false, "swiglu"));
  HELIUM_RETURN_IF_ERROR(check_activation(r.where(), f.activation));
  f.layers = static_cast<int>(layers);
  return r.no_unknown_fields();
}

Status parse_moe(ObjectReader& parent, MoeFacts& m) {
  HELIUM_ASSIGN_OR_RETURN(const json* obj, parent.object("moe", false));
  if (obj == nullptr) return Status::ok();
  ObjectReader r(*obj, parent.where() + ".moe");
  HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("layers", true, 0, kMaxLayers));
  HELIUM_ASSIGN_OR_RETURN(int64_t experts, r.integer("experts", true, 1, 1 << 16));
  HELIUM_ASSIGN_OR_RETURN(int64_t active, r.integer("active", true, 1, 1 << 16));
  HELIUM_ASSIGN_OR_RETURN(m.intermediate, r.integer("intermediate", true, 1, kMaxWidth));
  HELIUM_ASSIGN_OR_RETURN(int64_t shared, r.integer("shared_experts", false, 0, 64));
  HELIUM_ASSIGN_OR_RETURN(m.shared_intermediate, r.integer("shared_intermediate", shared > 0, 1, kMaxWidth));
  HELIUM_ASSIGN_OR_RETURN(m.activation, r.string("activation", false, "swiglu"));
  HELIUM_RETURN_IF_ERROR(check_activation(r.where(), m.activation));
  if (active > experts)
    return Status::error(r.where() + ": active (" + std::to_string(active) + ") exceeds experts (" +
                         std::to_string(experts) + ")");
  m.layers = static_cast<int>(layers);
  m.experts = static_cast<int>(experts);
  m.active = static_cast<int>(active);
  m.shared_experts = static_cast<int>(shared);
  return r.no_unknown_fields();
}

Status parse_shape(ObjectReader& entry, ModelShape& s) {
  HELIUM_ASSIGN_OR_RETURN(const json* obj, entry.object("shape", true));
  ObjectReader r(*obj, entry.where() + ".shape");
  HELIUM_ASSIGN_OR_RETURN(std::string layout, r.string("block_layout", false, "mixer_and_ffn"));
  if (layout == "mixer_and_ffn")
    s.block_layout = BlockLayout::MixerAndFfn;
  else if (layout == "one_op_per_block")
    s.block_layout = BlockLayout::OneOpPerBlock;
  else
    return Status::error(r.where() + ".block_layout: '" + layout +
                         "' is not one of mixer_and_ffn, one_op_per_block");
  HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("layers", true, 1, kMaxLayers));
  s.layers = static_cast<int>(layers);
  HELIUM_ASSIGN_OR_RETURN(s.hidden, r.integer("hidden", true, 1, kMaxWidth));
  HELIUM_ASSIGN_OR_RETURN(s.vocab, r.integer("vocab", true, 1, kMaxVocab));
  HELIUM_ASSIGN_OR_RETURN(s.tied_embeddings, r.boolean("tied_embeddings", true));
  HELIUM_ASSIGN_OR_RETURN(int64_t mtp, r.integer("mtp_layers", false, 0, 16));
  s.mtp_layers = static_cast<int>(mtp);
  HELIUM_RETURN_IF_ERROR(parse_attention(r, s.attention));
  HELIUM_RETURN_IF_ERROR(parse_recurrent(r, s.recurrent));
  HELIUM_RETURN_IF_ERROR(parse_ffn(r, s.ffn));
  HELIUM_RETURN_IF_ERROR(parse_moe(r, s.moe));
  HELIUM_RETURN_IF_ERROR(r.no_unknown_fields());

  const int mixers = s.attention.layers + s.recurrent.layers, ffns = s.ffn.layers + s.moe.layers;
  auto count = [](const char* what, int n) { return std::string(what) + " " + std::to_string(n); };
  if (s.block_layout == BlockLayout::MixerAndFfn) {
    if (mixers != s.layers)
      return Status::error(r.where() + ": " + count("attention.layers", s.attention.layers) + " + " +
                           count("recurrent.layers", s.recurrent.layers) +
                           " != " + count("layers", s.layers));
    if (ffns != s.layers)
      return Status::error(r.where() + ": " + count("ffn.layers", s.ffn.layers) + " + " +
                           count("moe.layers", s.moe.layers) + " != " + count("layers", s.layers));
  } else if (mixers + ffns != s.layers) {
    return Status::error(r.where() + ": attention, recurrent, ffn and moe layers add up to " +
                         std::to_string(mixers + ffns) + ", not " + count("layers", s.layers));
  }
  if (s.attention.layers == 0 && s.recurrent.layers == 0)
    return Status::error(r.where() + ": no token mixer (neither attention nor recurrent layers)");
  return Status::ok();
}

// fnmatch-style patterns only: no absolute paths, no "..", nothing that could name a file outside the repo.
Status check_file_patterns(const std::string& where, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return Status::error(where + ".files: empty (nothing would be downloaded)");
  for (const auto& p : patterns) {
    if (p.empty() || p.front() == '/' || p.find("..") != std::string::npos ||
        p.find('\\') != std::string::npos)
      return Status::error(where + ".files: '" + p + "' is not a relative file pattern");
  }
  return Status::ok();
}

bool is_version(std::string_view v) {
  if (v.empty() || v.front() == '.' || v.back() == '.') return false;
  for (char c : v)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.')) return false;
  return v.find("..") == std::string_view::npos;
}

Result<CatalogEntry> parse_entry(const std::string& name, const json& value, const std::string& origin) {
  CatalogEntry e;
  e.name = name;
  ObjectReader r(value, origin + ": model '" + name + "'");
  HELIUM_RETURN_IF_ERROR(r.check_object());
  HELIUM_ASSIGN_OR_RETURN(e.description, r.string("description", true));
  HELIUM_ASSIGN_OR_RETURN(e.repo, r.string("repo", false));
  HELIUM_ASSIGN_OR_RETURN(e.revision, r.string("revision", false));
  HELIUM_ASSIGN_OR_RETURN(e.files, r.strings("files", false));
  HELIUM_ASSIGN_OR_RETURN(e.local_path, r.string("path", false));
  HELIUM_ASSIGN_OR_RETURN(std::string family, r.string("family", true));
  HELIUM_ASSIGN_OR_RETURN(e.context, r.integer("context", true, 1, kMaxContext));
  HELIUM_ASSIGN_OR_RETURN(e.drafter, r.string("drafter", false));
  HELIUM_ASSIGN_OR_RETURN(e.quantization, r.string("quantization", true));
  HELIUM_ASSIGN_OR_RETURN(e.supported_since, r.string("supported_since", true));
  HELIUM_ASSIGN_OR_RETURN(e.unsupported_reason, r.string("unsupported_reason", false));
  HELIUM_ASSIGN_OR_RETURN(e.notes, r.string("notes", false));
  HELIUM_ASSIGN_OR_RETURN(const json* params, r.object("parameters", true));
  {
    ObjectReader p(*params, r.where() + ".parameters");
    HELIUM_ASSIGN_OR_RETURN(e.parameters.total, p.integer("total", true, 1, kMaxParameters));
    HELIUM_ASSIGN_OR_RETURN(e.parameters.active,
                            p.integer("active", false, 1, kMaxParameters, e.parameters.total));
    HELIUM_RETURN_IF_ERROR(p.no_unknown_fields());
    if (e.parameters.active > e.parameters.total) return Status::error(p.where() + ": active exceeds total");
  }
  HELIUM_RETURN_IF_ERROR(parse_shape(r, e.shape));
  e.shape.family = family;
  HELIUM_RETURN_IF_ERROR(r.no_unknown_fields());

  const std::string& where = r.where();
  if (e.repo.empty() == e.local_path.empty())
    return Status::error(where + ": exactly one of 'repo' and 'path' must be given");
  if (!e.repo.empty()) {
    if (!is_repo_id(e.repo))
      return Status::error(where + ".repo: '" + e.repo + "' is not an org/name repo id");
    if (e.revision.empty()) return Status::error(where + ": missing required field 'revision'");
    if (!is_safe_revision(e.revision))
      return Status::error(where + ".revision: '" + e.revision + "' is not a valid revision");
    HELIUM_RETURN_IF_ERROR(check_file_patterns(where, e.files));
  } else {
    if (!e.revision.empty() || !e.files.empty())
      return Status::error(where + ": 'revision' and 'files' belong to repo entries, not local 'path' ones");
    if (!is_safe_repo_path(e.local_path))
      return Status::error(where + ".path: '" + e.local_path +
                           "' must be a relative path inside the source tree");
  }
  if (!bytes_per_parameter(e.quantization))
    return Status::error(where + ".quantization: '" + e.quantization +
                         "' is not one of f32, bf16, f16, fp8, int4");
  if (e.supported_since != "unsupported" && !is_version(e.supported_since))
    return Status::error(where + ".supported_since: '" + e.supported_since +
                         "' is neither a version nor \"unsupported\"");
  if (e.supported_since == "unsupported" && e.unsupported_reason.empty())
    return Status::error(where + ": an unsupported entry needs 'unsupported_reason'");
  if (e.drafter == "mtp" && e.shape.mtp_layers == 0)
    return Status::error(where + ".drafter: 'mtp' but shape.mtp_layers is 0");
  if (e.drafter == name) return Status::error(where + ".drafter: a model cannot draft for itself");
  if (e.shape.moe.layers > 0 && e.parameters.active == e.parameters.total)
    return Status::error(where + ".parameters.active: an MoE model activates fewer parameters than it has");
  const int64_t computed = parameter_breakdown(e.shape).total();
  // The published total counts the whole checkpoint (vision towers, MTP heads): the text model the shape
  // describes must be somewhat smaller, never larger. A 2% margin absorbs the vectors we do not count.
  if (computed > e.parameters.total + e.parameters.total / 50)
    return Status::error(where + ": the shape gives " + std::to_string(computed) +
                         " parameters, more than parameters.total (" + std::to_string(e.parameters.total) +
                         "): a shape field is wrong");
  if (computed < e.parameters.total / 2)
    return Status::error(where + ": the shape gives " + std::to_string(computed) +
                         " parameters, less than half of parameters.total (" +
                         std::to_string(e.parameters.total) + "): a shape field is wrong");
  return e;
}

}  // namespace

int64_t RecurrentFacts::conv_channels() const {
  if (kind == "gated_deltanet") return 2LL * key_heads * key_dim + int64_t{value_heads} * value_dim;
  if (kind == "mamba2") return int64_t{heads} * head_dim + 2LL * groups * state;
  return 0;
}

int64_t RecurrentFacts::state_bytes_per_layer() const {
  if (kind == "gated_deltanet") return int64_t{value_heads} * key_dim * value_dim * 4;
  if (kind == "mamba2") return int64_t{heads} * head_dim * state * 4;
  return 0;
}

int64_t RecurrentFacts::conv_state_bytes_per_layer(int element_bytes) const {
  return conv_channels() * std::max(conv_kernel - 1, 0) * element_bytes;
}

int64_t matrices_per_ffn(const std::string& activation) {
  return activation == "relu2" ? 2 : 3;
}

int64_t ParameterBreakdown::total() const {
  return embedding + lm_head + attention + recurrent + dense_ffn + routed_experts + moe_always + norms;
}

namespace {

int64_t attention_layer_parameters(const ModelShape& s) {
  const AttentionFacts& a = s.attention;
  const int64_t q = int64_t{a.heads} * a.head_dim, kv = int64_t{a.kv_heads} * a.head_dim;
  return s.hidden * q * (a.output_gate ? 2 : 1) + 2 * s.hidden * kv + q * s.hidden;
}

int64_t recurrent_layer_parameters(const ModelShape& s) {
  const RecurrentFacts& r = s.recurrent;
  const int64_t conv = r.conv_channels() * r.conv_kernel;
  if (r.kind == "gated_deltanet") {
    const int64_t value = int64_t{r.value_heads} * r.value_dim;
    // in_proj_qkv, in_proj_z, in_proj_b and in_proj_a, the conv, A_log and dt_bias, the gated norm, out_proj.
    return s.hidden * r.conv_channels() + s.hidden * value + 2 * s.hidden * r.value_heads + conv +
           2LL * r.value_heads + r.value_dim + value * s.hidden;
  }
  if (r.kind == "mamba2") {
    const int64_t inner = int64_t{r.heads} * r.head_dim;
    // in_proj (z, xBC, dt), the conv with its bias, dt_bias, A_log and D, the grouped norm, out_proj.
    return s.hidden * (inner + r.conv_channels() + r.heads) + conv + r.conv_channels() + 3LL * r.heads +
           inner + inner * s.hidden;
  }
  return 0;
}

}  // namespace

ParameterBreakdown parameter_breakdown(const ModelShape& s) {
  ParameterBreakdown p;
  p.embedding = s.vocab * s.hidden;
  p.lm_head = s.tied_embeddings ? 0 : s.vocab * s.hidden;
  p.attention = s.attention.layers * attention_layer_parameters(s);
  p.recurrent = s.recurrent.layers * recurrent_layer_parameters(s);
  p.dense_ffn = s.ffn.layers * matrices_per_ffn(s.ffn.activation) * s.hidden * s.ffn.intermediate;
  const int64_t expert = matrices_per_ffn(s.moe.activation) * s.hidden * s.moe.intermediate;
  p.routed_experts = int64_t{s.moe.layers} * s.moe.experts * expert;
  p.moe_always = int64_t{s.moe.layers} * (int64_t{s.moe.experts} * s.hidden +
                                          s.moe.shared_experts * matrices_per_ffn(s.moe.activation) *
                                              s.hidden * s.moe.shared_intermediate);
  const int norms_per_block = s.block_layout == BlockLayout::MixerAndFfn ? 2 : 1;
  p.norms = (int64_t{s.layers} * norms_per_block + 1) * s.hidden;
  const int64_t chosen_experts = int64_t{s.moe.layers} * s.moe.active * expert;
  p.per_token = p.total() - p.embedding - p.routed_experts + chosen_experts;
  if (s.tied_embeddings) p.per_token += p.embedding;  // the tied table is read whole as the head
  return p;
}

int64_t mtp_parameters(const ModelShape& s) {
  if (s.mtp_layers == 0) return 0;
  int64_t per_layer = attention_layer_parameters(s) + 2 * s.hidden;
  if (s.moe.layers > 0) {
    per_layer +=
        matrices_per_ffn(s.moe.activation) * s.hidden *
            (int64_t{s.moe.experts} * s.moe.intermediate + s.moe.shared_experts * s.moe.shared_intermediate) +
        int64_t{s.moe.experts} * s.hidden;
  } else {
    per_layer += matrices_per_ffn(s.ffn.activation) * s.hidden * s.ffn.intermediate;
  }
  // fc: [embedding ; hidden] (2·hidden) -> hidden, with a norm on each half and a final norm.
  return 2 * s.hidden * s.hidden + 3 * s.hidden + s.mtp_layers * per_layer;
}

std::optional<double> bytes_per_parameter(std::string_view q) {
  if (q == "f32") return 4.0;
  if (q == "bf16" || q == "f16") return 2.0;
  if (q == "fp8") return 1.0;
  if (q == "int4") return 0.5;
  return std::nullopt;
}

int compare_versions(std::string_view a, std::string_view b) {
  auto next = [](std::string_view& v) {
    int64_t n = 0;
    while (!v.empty() && v.front() != '.') {
      if (std::isdigit(static_cast<unsigned char>(v.front()))) n = n * 10 + (v.front() - '0');
      v.remove_prefix(1);
    }
    if (!v.empty()) v.remove_prefix(1);
    return n;
  };
  while (!a.empty() || !b.empty()) {
    const int64_t x = next(a), y = next(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

bool supported_by_version(const CatalogEntry& entry, std::string_view version) {
  if (entry.supported_since == "unsupported") return false;
  return compare_versions(entry.supported_since, version) <= 0;
}

const CatalogEntry* Catalog::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> Catalog::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

Result<Catalog> Catalog::parse(const std::string& json_text, const std::string& origin) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::error(origin + ": not valid JSON");
  ObjectReader top(doc, origin);
  HELIUM_RETURN_IF_ERROR(top.check_object());
  HELIUM_ASSIGN_OR_RETURN(int64_t version, top.integer("catalog_version", true, 1, 1));
  (void)version;
  HELIUM_ASSIGN_OR_RETURN(std::string comment, top.string("comment", false));
  (void)comment;
  HELIUM_ASSIGN_OR_RETURN(const json* models, top.object("models", true));
  HELIUM_RETURN_IF_ERROR(top.no_unknown_fields());

  Catalog catalog;
  catalog.origin_ = origin;
  for (const auto& [name, value] : models->items()) {
    bool name_ok = !name.empty() && name.size() <= 64;
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) name_ok = false;
    if (!name_ok || name.find('/') != std::string::npos)
      return Status::error(origin + ": '" + name +
                           "' is not a valid short name (letters, digits, '-', '_', '.')");
    HELIUM_ASSIGN_OR_RETURN(CatalogEntry entry, parse_entry(name, value, origin));
    catalog.entries_.push_back(std::move(entry));
  }
  if (catalog.entries_.empty()) return Status::error(origin + ": 'models' is empty");
  // Drafters: another entry with the same vocabulary (the drafter's tokens are the target's tokens).
  for (const auto& e : catalog.entries_) {
    if (e.drafter.empty() || e.drafter == "mtp") continue;
    const CatalogEntry* d = catalog.find(e.drafter);
    const std::string where = origin + ": model '" + e.name + "'.drafter";
    if (d == nullptr) return Status::error(where + ": no model named '" + e.drafter + "' in the catalog");
    if (d->shape.vocab != e.shape.vocab)
      return Status::error(where + ": '" + e.drafter + "' has a vocabulary of " +
                           std::to_string(d->shape.vocab) + ", the target " + std::to_string(e.shape.vocab));
  }
  return catalog;
}

Result<Catalog> Catalog::load(const std::string& path) {
  HELIUM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse(text, path);
}

}  // namespace helium
