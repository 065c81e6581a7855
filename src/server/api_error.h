// server/api_error.h — an HTTP API error: its status, its kind and a message, written in the error shape
// of the API the client speaks (OpenAI `{"error":{...}}`, Anthropic `{"type":"error","error":{...}}`).
// Owns: the status code and type name of each kind of failure. Must not: decide when a request fails
// (the adapters and the server do).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace helium::server {

// The error shape a route answers in.
enum class ApiFlavor { kOpenAI, kAnthropic };

enum class ErrorKind {
  kInvalidRequest,  // 400: bad JSON, wrong types, missing fields, a prompt too long for the context
  kAuthentication,  // 401: missing or wrong API key
  kNotFound,        // 404: no such route
  kTooLarge,        // 413: body over --max-body-mb
  kQueueFull,       // 429: the request queue is full
  kUnavailable,     // 503: shutting down
  kInternal,        // 500: the engine failed
};

struct ApiError {
  ErrorKind kind = ErrorKind::kInvalidRequest;
  std::string message;
  std::string code;  // OpenAI's machine-readable `code` (e.g. "context_length_exceeded"); may be empty

  int http_status() const;
  // The `type` field: OpenAI's or Anthropic's name for the kind.
  std::string type_name(ApiFlavor flavor) const;
  nlohmann::ordered_json body(ApiFlavor flavor) const;

  static ApiError invalid_request(std::string message, std::string code = {}) {
    return {ErrorKind::kInvalidRequest, std::move(message), std::move(code)};
  }
  static ApiError internal(std::string message) { return {ErrorKind::kInternal, std::move(message), {}}; }
};

}  // namespace helium::server
