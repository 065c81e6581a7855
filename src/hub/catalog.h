// hub/catalog.h — the model catalog: short names (`35b`, `flint`, `8b`) for real checkpoints, read from
// a data file (catalog/models.json; its fields are described in catalog/README.md).
// Owns: the catalog's types, parsing and validation, and the shape arithmetic derived from the facts
// (parameter counts per component), which the memory plan and `helium models` share.
// Must not: touch the network or the cache (resolve.h does), or know device memory (engine/memory_plan).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace helium {

// Full (softmax) attention layers: the only layers that keep a KV cache.
struct AttentionFacts {
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  bool output_gate = false;  // q_proj also produces a sigmoid gate per head (Qwen3.5/3.6): twice the rows
};

// Recurrent token mixers: a fixed-size state per sequence instead of a KV cache.
//   gated_deltanet (Qwen3-Next/3.5/3.6): state value_heads × key_dim × value_dim (fp32) per layer, a
//     causal conv over 2·key_heads·key_dim + value_heads·value_dim channels.
//   mamba2 (Nemotron-H): state heads × head_dim × state (fp32) per layer, a causal conv over
//     heads·head_dim + 2·groups·state channels.
struct RecurrentFacts {
  std::string kind;  // "gated_deltanet", "mamba2", or empty when there are none
  int layers = 0;
  int key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0;  // gated_deltanet
  int heads = 0, head_dim = 0, state = 0, groups = 0;              // mamba2
  int conv_kernel = 0;
  int64_t conv_channels() const;
  int64_t state_bytes_per_layer() const;                        // the fp32 recurrent state of one sequence
  int64_t conv_state_bytes_per_layer(int element_bytes) const;  // the last conv_kernel-1 inputs
};

// "swiglu": gate, up, down (3 matrices); "relu2": up, down (2 matrices; Nemotron-H).
struct FfnFacts {
  int layers = 0;
  int64_t intermediate = 0;
  std::string activation = "swiglu";
};

struct MoeFacts {
  int layers = 0;
  int experts = 0;
  int active = 0;  // routed experts per token
  int64_t intermediate = 0;
  int shared_experts = 0;
  int64_t shared_intermediate = 0;  // of each shared expert
  std::string activation = "swiglu";
};

// How a decoder block is built. mixer_and_ffn: every block has a token mixer (attention or recurrent) and
// an FFN (dense or MoE), so attention+recurrent = ffn+moe = layers. one_op_per_block (Nemotron-H): each
// block is exactly one of attention, recurrent, FFN or MoE, so the four counts add up to layers.
enum class BlockLayout { MixerAndFfn, OneOpPerBlock };

struct ModelShape {
  std::string family;  // the Hugging Face model_type of the checkpoint's config.json
  BlockLayout block_layout = BlockLayout::MixerAndFfn;
  int layers = 0;
  int64_t hidden = 0;
  int64_t vocab = 0;
  bool tied_embeddings = false;
  AttentionFacts attention;
  RecurrentFacts recurrent;
  FfnFacts ffn;
  MoeFacts moe;
  int mtp_layers = 0;  // multi-token-prediction layers shipped with the checkpoint (a built-in drafter)
};

// Parameters by component, computed from a shape (the text model: no vision tower, no MTP layers).
// Norm vectors are counted; small per-head vectors (q/k norms, biases, router biases) are not.
struct ParameterBreakdown {
  int64_t embedding = 0;       // vocab × hidden
  int64_t lm_head = 0;         // 0 when tied to the embedding
  int64_t attention = 0;       // all full-attention layers
  int64_t recurrent = 0;       // all recurrent layers
  int64_t dense_ffn = 0;       // all dense FFN layers
  int64_t routed_experts = 0;  // all routed experts of all MoE layers (the offloadable part)
  int64_t moe_always = 0;      // routers and shared experts
  int64_t norms = 0;
  int64_t total() const;
  // Weights one token reads: everything but the embedding table (one row is read) and the routed experts
  // not chosen. For a dense model, total() − embedding.
  int64_t per_token = 0;
};
ParameterBreakdown parameter_breakdown(const ModelShape& shape);
// Parameters of the checkpoint's MTP head (mtp_layers > 0): the input projection (2·hidden → hidden), its
// norms, and per layer one full-attention layer plus one FFN or MoE layer shaped like the model's.
int64_t mtp_parameters(const ModelShape& shape);
int64_t matrices_per_ffn(const std::string& activation);

struct CatalogParameters {
  int64_t total = 0;   // as published (model card / safetensors metadata), whole checkpoint
  int64_t active = 0;  // per token, as published; equals total for dense models
};

struct CatalogEntry {
  std::string name;         // the short name, e.g. "35b"
  std::string description;  // one line
  // Where the weights are: a Hugging Face repo at a pinned revision, or a directory in helium's source
  // tree (the embedded models). Exactly one of repo and local_path is set.
  std::string repo;
  std::string revision;            // a commit hash, or a branch name when none was known
  std::vector<std::string> files;  // fnmatch patterns of the repo files to download ("*" matches '/')
  std::string local_path;          // relative to the source tree
  std::string quantization;        // the checkpoint's weight format: "bf16", "fp8", "int4"
  int64_t context = 0;             // default context length (max_position_embeddings)
  std::string drafter;          // "" (none), "mtp" (the checkpoint's own MTP head), or another entry's name
  std::string supported_since;  // the first helium version that runs it, or "unsupported"
  std::string unsupported_reason;  // why not yet, when supported_since is "unsupported"
  std::string notes;               // provenance of the facts (free text)
  CatalogParameters parameters;
  ModelShape shape;

  bool is_local() const { return !local_path.empty(); }
};

class Catalog {
 public:
  const std::vector<CatalogEntry>& entries() const { return entries_; }
  const CatalogEntry* find(std::string_view name) const;
  std::vector<std::string> names() const;
  std::string origin() const { return origin_; }

  // Parses and validates catalog JSON; `origin` names it in messages. Every error names the entry and the
  // field: unknown fields, missing required fields, wrong types, numbers out of range, layer counts that
  // do not add up, drafters that do not exist or use another vocabulary, unsafe file patterns.
  static Result<Catalog> parse(const std::string& json_text, const std::string& origin);
  static Result<Catalog> load(const std::string& path);

 private:
  std::vector<CatalogEntry> entries_;
  std::string origin_;
};

// Bytes per weight of a quantization name ("bf16"/"f16": 2, "fp8": 1, "int4": 0.5, "f32": 4), or nullopt.
std::optional<double> bytes_per_parameter(std::string_view quantization);

// Whether `entry` runs on helium `version` ("0.1.0"): supported_since is a version not above it.
bool supported_by_version(const CatalogEntry& entry, std::string_view version);
// Compares dotted numeric versions ("0.10.0" > "0.9.2"); missing parts count as 0.
int compare_versions(std::string_view a, std::string_view b);

}  // namespace helium
