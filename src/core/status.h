// core/status.h — errors as values at module borders (STYLE principle 7).
// Owns: Status and Result<T>. Must not: log, throw across module borders, or exit.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace helium {

// A Status is either ok or carries a message that names what is wrong (file, tensor, field, request).
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Prefixes context, e.g. Status::error("bad dtype").with_context("model.safetensors") gives
  // "model.safetensors: bad dtype".
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    return Status(context + ": " + message_, true);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// Result<T> holds a value or a failed Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {      // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).is_ok() && "Result built from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }
  const std::string& error_message() const { return std::get<Status>(v_).message(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace helium

// Returns early from the enclosing function when a Status-returning expression fails.
#define HELIUM_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::helium::Status helium_status_ = (expr);    \
    if (!helium_status_.is_ok()) return helium_status_; \
  } while (0)

#define HELIUM_CONCAT_INNER_(a, b) a##b
#define HELIUM_CONCAT_(a, b) HELIUM_CONCAT_INNER_(a, b)
// Assigns the value of a Result-returning expression to `lhs`, or returns its Status.
#define HELIUM_ASSIGN_OR_RETURN(lhs, expr) \
  HELIUM_ASSIGN_OR_RETURN_IMPL_(HELIUM_CONCAT_(helium_result_, __LINE__), lhs, expr)
#define HELIUM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.is_ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
