// backend/counting_backend.h — a Backend that runs nothing and only adds up what it is asked to allocate:
// planning a model's memory (helium info, the memory-plan tests) without allocating or reading weights.
// Must not: hand out memory (buffers have null data) or run ops (every op is a no-op).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace helium {

class CountingBackend final : public Backend {
 public:
  size_t allocated = 0;
  std::string name() const override { return "count"; }
  Result<std::shared_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    allocated += bytes;
    struct Nothing final : DeviceBuffer {
      size_t n;
      explicit Nothing(size_t b) : n(b) {}
      void* data() override { return nullptr; }
      size_t bytes() const override { return n; }
    };
    return std::shared_ptr<DeviceBuffer>(std::make_shared<Nothing>(bytes));
  }
  Result<Tensor> import_weight(const Tensor& host) override { return host; }
  void copy_to_device(Tensor, const void*) override {}
  void copy_to_host(void*, const Tensor&) override {}
  void synchronize() override {}
  void embedding(const Tensor&, const Tensor&, Tensor) override {}
  void embedding_from(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor) override {}
  void matmul(const Tensor&, const Tensor&, const Tensor&, Tensor) override {}
  void rms_norm(const Tensor&, const Tensor&, float, bool, Tensor) override {}
  void rope(Tensor, int, const Tensor&, const Tensor&, const RopeParams&) override {}
  void kv_write(const Tensor&, const Tensor&, const Tensor&, Tensor, Tensor) override {}
  void attention(const Tensor&, const Tensor&, const Tensor&, const AttentionShape&, const AttentionLayout&,
                 Tensor) override {}
  void swiglu(const Tensor&, const Tensor&, Tensor) override {}
  void add(const Tensor&, const Tensor&, Tensor) override {}
  void gather_rows(const Tensor&, const Tensor&, Tensor) override {}
  void argmax_rows(const Tensor&, Tensor) override {}
  void copy_rows(Tensor, const Tensor&, const Tensor&) override {}
  void fill_random(Tensor, uint64_t, float, float) override {}
};

}  // namespace helium
