// loader/checkpoint.h — a checkpoint directory as the engine sees it, whatever the file format.
// Owns: reading config.json / generation_config.json and the weight files (safetensors, single or
// sharded through model.safetensors.index.json) into a format-neutral WeightMap of mmapped host tensors.
// Must not: know model families (the models layer maps names to its weight structs), or touch devices.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace helium {

struct WeightInfo {
  std::string name;
  std::string file;  // the file it came from, for error messages
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // inside an mmapped file, kept alive by the WeightMap
  size_t bytes = 0;
};

// Tensors by name. Lookups that fail name the tensor and the checkpoint.
class WeightMap {
 public:
  const WeightInfo* find(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // The tensor `name` as a host Tensor view, checked against `shape` (any float dtype);
  // an error names the tensor, its file, and the expected and actual shape/dtype. The view points into a
  // read-only mapping (Tensor has no const flavour): writing through it faults.
  Result<Tensor> get(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;
  // Dummy mode (LoadFormat::Dummy): get() returns a data-less Tensor of the asked shape and this dtype for
  // any name, and records it so that names() and the counts see the tensors the model asked for.
  void make_dummy(DType dtype) {
    dummy_ = true;
    dummy_dtype_ = dtype;
  }
  bool dummy() const { return dummy_; }
  size_t size() const { return tensors_.size(); }
  size_t total_bytes() const;

  // Used by the loaders (and by tests that build maps in memory). add() replaces an entry of the same
  // name; the loaders check contains() first so that a checkpoint never overwrites a tensor silently.
  void add(WeightInfo info) { tensors_[info.name] = std::move(info); }
  void keep_alive(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }
  const std::string& origin() const { return origin_; }
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  std::map<std::string, WeightInfo> tensors_;
  std::vector<std::shared_ptr<const void>> owners_;
  std::string origin_;  // the checkpoint directory, for messages
  bool dummy_ = false;
  DType dummy_dtype_ = DType::BF16;
  mutable std::map<std::string, WeightInfo> dummy_requests_;
};

// generation_config.json, with the defaults Hugging Face applies when a key is absent.
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;  // eos_token_id may be a number or a list
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> pad_token_id;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<bool> do_sample;
};

struct Checkpoint {
  std::string dir;
  nlohmann::json config;       // the text model's config: `text_config` when nested, else the top level
  nlohmann::json full_config;  // config.json as written
  std::string model_type;      // of the text model (config["model_type"])
  GenerationConfig generation;
  WeightMap weights;
  // Problems that do not stop loading (e.g. a shard holds a tensor the index does not list), for the
  // caller to log: the loader itself does not log.
  std::vector<std::string> warnings;
};

// Weights: read the checkpoint's files. Dummy: no weight files are read; the WeightMap answers every
// request with a tensor of the asked shape and no data, which the model creates on its device with
// deterministic random values (`--load-format dummy`: real shapes without downloading weights).
enum class LoadFormat { Weights, Dummy };

// Loads config.json, generation_config.json (optional) and the weights of `dir`.
Result<Checkpoint> load_checkpoint(const std::string& dir, LoadFormat format = LoadFormat::Weights);

// Parses one safetensors file into `map` (its tensors and an owner keeping the mapping alive). Errors
// name the file and, where one is at fault, the tensor; on error `map` is left as it was. A name that
// `map` already holds (e.g. from another shard) is an error. Tensors whose offset is not a multiple of
// their element size are copied to aligned memory owned by `map`; the rest stay in the mapping, so the
// file must not be truncated or rewritten while `map` lives (reading a vanished page faults).
Status load_safetensors(const std::string& path, WeightMap& map);

// One safetensors header, parsed and validated against a buffer of `size` bytes (the whole file).
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the start of the data region
};
struct SafetensorsHeader {
  uint64_t data_offset = 0;                // where the data region starts in the file: 8 + header length
  uint64_t data_bytes = 0;                 // bytes from data_offset to the end of the file
  std::vector<SafetensorsTensor> tensors;  // in data order (by begin offset)
  std::map<std::string, std::string> metadata;
};
// `file` is only used in messages. Never reads outside [bytes, bytes + size).
Result<SafetensorsHeader> parse_safetensors(const uint8_t* bytes, size_t size, const std::string& file);

// Parses config.json's text (resolving nested text_config) and generation_config.json's text.
Result<nlohmann::json> parse_text_config(const std::string& config_json, const std::string& origin);
Result<GenerationConfig> parse_generation_config(const std::string& json_text, const std::string& origin);

// Writes tensors as a safetensors file (used by tests and by tools that build checkpoints).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace helium
