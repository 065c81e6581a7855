// backend/cpu/check.h — loud precondition checks for the CPU ops.
// Owns: HELIUM_CHECK and the op description it prints. The ops are `virtual void` (backend.h), so a
// broken precondition (a shape, dtype or index that would make a kernel read or write out of bounds) cannot
// come back as a Status; it is a bug in the caller, and the process stops with a message that names the
// op, the failed condition and every tensor's shape (DESIGN.md invariant 5, "fail loudly").
// Must not: be used for conditions that depend on user input reaching the engine unchecked — those are
// validated above the backend and come back as a Status.
#pragma once

#include <initializer_list>
#include <sstream>
#include <utility>

#include "backend/backend.h"

namespace helium::cpu {

// The op being checked and the tensors it was called with, printed when a check fails. Holds pointers
// only: build it on the stack at the op's entry, where the tensors live.
class OpDescription {
 public:
  struct Named {
    const char* name;
    const Tensor* tensor;
  };
  OpDescription(const char* op, std::initializer_list<Named> tensors);
  const char* op() const { return op_; }
  std::string tensors_string() const;

 private:
  static constexpr int kMaxTensors = 8;
  const char* op_;
  Named tensors_[kMaxTensors];
  int count_ = 0;
};

// Collects the message of a failed check; its destructor prints everything to stderr and aborts.
class CheckFailure {
 public:
  CheckFailure(const OpDescription& op, const char* condition, const char* file, int line);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return message_; }

 private:
  const OpDescription& op_;
  const char* condition_;
  const char* file_;
  int line_;
  std::ostringstream message_;
};

// Turns `CheckFailure(...).stream() << ...` into a void expression for the conditional below.
struct CheckVoidify {
  void operator&(std::ostream&) {}
};

// True when the byte ranges of two tensors overlap (an empty tensor overlaps nothing).
bool tensors_overlap(const Tensor& a, const Tensor& b);

}  // namespace helium::cpu

// HELIUM_CHECK(op, condition) << "why"; — when `condition` is false, prints
//   "helium cpu backend: <op>: check failed: <condition>: <why> [x (2, 3) F32, ...] at <file>:<line>"
// and aborts. The message is only built on failure. Usable as a statement anywhere (no dangling else).
#define HELIUM_CHECK(op, condition)                                                    \
  (condition) ? (void)0                                                                \
              : ::helium::cpu::CheckVoidify() &                                        \
                    ::helium::cpu::CheckFailure((op), #condition, __FILE__, __LINE__).stream()
