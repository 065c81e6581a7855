// loader/checkpoint.cpp — a Hugging Face checkpoint directory: config files and the weight files they
// sit beside (model.safetensors, or shards listed by model.safetensors.index.json).
#include "loader/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>

#include "loader/json_fields.h"

namespace helium {

using loader_detail::parse_json_text;
using loader_detail::quote;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// exists() that reports "cannot tell" (e.g. permission denied) as an error instead of as "absent".
Result<bool> file_exists(const std::string& path) {
  std::error_code ec;
  bool found = fs::exists(path, ec);
  if (ec) return Status::error(path + ": cannot check: " + ec.message());
  return found;
}

// A shard named by the index must be a file of the checkpoint directory: an index is untrusted input
// and must not make us open files elsewhere.
bool is_inside_dir(const std::string& shard) {
  fs::path p(shard);
  if (shard.empty() || p.is_absolute()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

Status load_sharded(const std::string& dir, WeightMap& map, std::vector<std::string>& warnings) {
  const std::string index_path = join(dir, kIndexName);
  HELIUM_ASSIGN_OR_RETURN(std::string text, read_file(index_path));
  HELIUM_ASSIGN_OR_RETURN(json index, parse_json_text(text, index_path));
  if (!index.is_object())
    return Status::error(index_path + ": must be a JSON object, got " + index.type_name());
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end()) return Status::error(index_path + ": no \"weight_map\"");
  if (!weight_map->is_object())
    return Status::error(index_path + ": \"weight_map\" must be an object, got " + weight_map->type_name());
  if (weight_map->empty()) return Status::error(index_path + ": \"weight_map\" lists no tensors");

  std::map<std::string, std::string> shard_of;             // tensor -> shard file name
  std::map<std::string, std::vector<std::string>> listed;  // shard file name -> its tensors, in order
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string())
      return Status::error(index_path + ": tensor " + quote(name) + ": shard must be a file name, got " +
                           shard.type_name());
    const auto& file = shard.get_ref<const std::string&>();
    if (!is_inside_dir(file))
      return Status::error(index_path + ": tensor " + quote(name) + ": shard " + quote(file) +
                           " is not a file name inside the checkpoint directory");
    shard_of[name] = file;
    listed[file].push_back(name);
  }

  // Every shard must exist before any is read, so a missing one is reported at once.
  for (const auto& [file, tensors] : listed) {
    HELIUM_ASSIGN_OR_RETURN(bool found, file_exists(join(dir, file)));
    if (!found)
      return Status::error(index_path + ": shard " + quote(file) + " does not exist in " + dir +
                           " (listed for " + std::to_string(tensors.size()) + " tensors, e.g. " +
                           quote(tensors.front()) + ")");
  }
  // Each shard once; load_safetensors refuses a name that an earlier shard already gave.
  for (const auto& [file, tensors] : listed) HELIUM_RETURN_IF_ERROR(load_safetensors(join(dir, file), map));

  for (const auto& [name, file] : shard_of) {
    const WeightInfo* info = map.find(name);
    const std::string shard_path = join(dir, file);
    if (info == nullptr)
      return Status::error(index_path + ": tensor " + quote(name) + " is listed for shard " + quote(file) +
                           " but " + shard_path + " does not contain it");
    if (info->file != shard_path)
      return Status::error(index_path + ": tensor " + quote(name) + " is listed for shard " + quote(file) +
                           " but was found in " + info->file);
  }
  // A tensor that only its shard knows about is still a tensor of the checkpoint (the index is only a
  // lookup table); it loads, and the caller learns of the inconsistency.
  for (const std::string& name : map.names())
    if (shard_of.find(name) == shard_of.end())
      warnings.push_back(map.find(name)->file + ": tensor " + quote(name) + " is not listed in " +
                         index_path + "; loaded anyway");
  return Status::ok();
}

Status load_weights(const std::string& dir, WeightMap& map, std::vector<std::string>& warnings) {
  HELIUM_ASSIGN_OR_RETURN(bool has_index, file_exists(join(dir, kIndexName)));
  if (has_index) return load_sharded(dir, map, warnings);
  HELIUM_ASSIGN_OR_RETURN(bool has_single, file_exists(join(dir, kSingleName)));
  if (has_single) return load_safetensors(join(dir, kSingleName), map);

  // Say what was there instead: a PyTorch-only or GGUF-only download is the usual cause.
  std::vector<std::string> others;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".safetensors" || ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".gguf")
      others.push_back(entry.path().filename().string());
  }
  std::sort(others.begin(), others.end());
  std::string message = dir + ": no weights: looked for " + kIndexName + " and " + kSingleName;
  if (!others.empty()) {
    message += "; weight-like files present:";
    // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on "literal" + std::string&& here.
    for (size_t i = 0; i < others.size() && i < 5; ++i) message.append(" ").append(quote(others[i]));
    if (others.size() > 5) message.append(" and ").append(std::to_string(others.size() - 5)).append(" more");
    message += " (only safetensors checkpoints with those names are loaded)";
  }
  return Status::error(message);
}

}  // namespace

Result<Checkpoint> load_checkpoint(const std::string& dir, LoadFormat format) {
  try {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      return Status::error(dir + ": not a directory (a checkpoint is a directory holding config.json)");
    Checkpoint ck;
    ck.dir = dir;

    const std::string config_path = join(dir, "config.json");
    HELIUM_ASSIGN_OR_RETURN(std::string config_text, read_file(config_path));
    HELIUM_ASSIGN_OR_RETURN(ck.full_config, parse_json_text(config_text, config_path));
    HELIUM_ASSIGN_OR_RETURN(ck.config, loader_detail::resolve_text_config(ck.full_config, config_path));
    ck.model_type = ck.config["model_type"].get<std::string>();

    // Hugging Face reads the special tokens from config.json when generation_config.json is absent. When
    // it is present but has no eos_token_id, config.json's is still the model's end of turn, so it fills
    // the gap rather than leaving generation without a stop token.
    GenerationConfig from_config;
    HELIUM_RETURN_IF_ERROR(loader_detail::read_special_tokens(ck.config, config_path, from_config));
    const std::string generation_path = join(dir, "generation_config.json");
    HELIUM_ASSIGN_OR_RETURN(bool has_generation, file_exists(generation_path));
    if (has_generation) {
      HELIUM_ASSIGN_OR_RETURN(std::string text, read_file(generation_path));
      HELIUM_ASSIGN_OR_RETURN(ck.generation, parse_generation_config(text, generation_path));
      if (ck.generation.eos_token_ids.empty()) ck.generation.eos_token_ids = from_config.eos_token_ids;
    } else {
      ck.generation = from_config;
    }

    if (format == LoadFormat::Dummy) {
      // The checkpoint's own dtype (config "dtype" / "torch_dtype"), bf16 when it names none.
      DType dtype = DType::BF16;
      for (const char* key : {"dtype", "torch_dtype"}) {
        auto it = ck.config.find(key);
        if (it != ck.config.end() && it->is_string()) {
          const std::string name = it->get<std::string>();
          dtype = name == "float32" ? DType::F32 : name == "float16" ? DType::F16 : DType::BF16;
          break;
        }
      }
      ck.weights.make_dummy(dtype);
    } else {
      HELIUM_RETURN_IF_ERROR(load_weights(dir, ck.weights, ck.warnings));
    }
    ck.weights.set_origin(dir);
    return ck;
  } catch (const std::exception& e) {  // allocation or filesystem failures: errors stay values
    return Status::error(dir + ": " + e.what());
  }
}

}  // namespace helium
