#include <string>

#include "loader/checkpoint.h"
#include "loader/json_fields.h"

namespace helium {

using loader_detail::quote;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

}  // namespace

const WeightInfo* WeightMap::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return &it->second;
  auto d = dummy_requests_.find(name);
  return d == dummy_requests_.end() ? nullptr : &d->second;
}

Result<Tensor> WeightMap::get(const std::string& name, const std::vector<int64_t>& shape) const {
  if (dummy_ && find(name) == nullptr) {
    Tensor t;
    if (shape.size() > t.shape.size()) return Status::error("dummy tensor " + quote(name) + " has too many dimensions");
    t.dtype = dummy_dtype_;
    for (int64_t d : shape) t.shape[t.rank++] = d;
    WeightInfo info;
    info.name = name;
    info.file = "(dummy)";
    info.dtype = dummy_dtype_;
    info.shape = shape;
    info.bytes = t.bytes();
    dummy_requests_[name] = info;
    return t;
  }
  const WeightInfo* info = find(name);
  if (info == nullptr)
    return Status::error((origin_.empty() ? std::string("checkpoint") : origin_) + ": tensor " + quote(name) +
                         " not found (" + std::to_string(tensors_.size()) + " tensors in the checkpoint)");
  const std::string where = info->file + ": tensor " + quote(name);
  if (info->shape != shape)
    return Status::error(where + " has shape " + shape_text(info->shape) + " but " + shape_text(shape) +
                         " was expected");
  if (!is_float(info->dtype))
    return Status::error(where + " has dtype " + std::string(dtype_name(info->dtype)) +
                         " but a float dtype (F32, F16, BF16) was expected");
  Tensor t;
  if (shape.size() > t.shape.size())
    return Status::error(where + " has rank " + std::to_string(shape.size()) + ", more than the " +
                         std::to_string(t.shape.size()) + " a Tensor holds");
  // Tensor has no const flavour; the view points into a read-only mapping (see WeightMap::get).
  t.data = const_cast<void*>(info->data);
  t.dtype = info->dtype;
  for (int64_t d : shape) t.shape[t.rank++] = d;
  return t;
}

std::vector<std::string> WeightMap::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  for (const auto& [name, info] : dummy_requests_) out.push_back(name);
  return out;
}

size_t WeightMap::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, info] : tensors_) total += info.bytes;
  for (const auto& [name, info] : dummy_requests_) total += info.bytes;
  return total;
}

}  // namespace helium
