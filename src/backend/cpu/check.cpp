#include "backend/cpu/check.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace helium::cpu {

OpDescription::OpDescription(const char* op, std::initializer_list<Named> tensors) : op_(op) {
  for (const Named& t : tensors)
    if (count_ < kMaxTensors) tensors_[count_++] = t;
}

std::string OpDescription::tensors_string() const {
  std::string s = "[";
  for (int i = 0; i < count_; ++i) {
    if (i) s += ", ";
    s += tensors_[i].name;
    s += ' ';
    const Tensor& t = *tensors_[i].tensor;
    s += t.data == nullptr ? std::string("(empty)") : t.shape_string();
  }
  return s + "]";
}

CheckFailure::CheckFailure(const OpDescription& op, const char* condition, const char* file, int line)
    : op_(op), condition_(condition), file_(file), line_(line) {}

CheckFailure::~CheckFailure() {
  std::string why = message_.str();
  std::fprintf(stderr, "helium cpu backend: %s: check failed: %s%s%s %s at %s:%d\n", op_.op(), condition_,
               why.empty() ? "" : ": ", why.c_str(), op_.tensors_string().c_str(), file_, line_);
  std::fflush(stderr);
  std::abort();
}

bool tensors_overlap(const Tensor& a, const Tensor& b) {
  if (a.data == nullptr || b.data == nullptr) return false;
  auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

}  // namespace helium::cpu
