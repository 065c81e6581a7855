// server/api_error.cpp — see api_error.h.
#include "server/api_error.h"

namespace helium::server {

int ApiError::http_status() const {
  switch (kind) {
    case ErrorKind::kInvalidRequest: return 400;
    case ErrorKind::kAuthentication: return 401;
    case ErrorKind::kNotFound: return 404;
    case ErrorKind::kTooLarge: return 413;
    case ErrorKind::kQueueFull: return 429;
    case ErrorKind::kUnavailable: return 503;
    case ErrorKind::kInternal: return 500;
  }
  return 500;
}

std::string ApiError::type_name(ApiFlavor flavor) const {
  const bool anthropic = flavor == ApiFlavor::kAnthropic;
  switch (kind) {
    case ErrorKind::kInvalidRequest: return "invalid_request_error";
    case ErrorKind::kAuthentication: return "authentication_error";
    case ErrorKind::kNotFound: return "not_found_error";
    case ErrorKind::kTooLarge: return anthropic ? "request_too_large" : "invalid_request_error";
    case ErrorKind::kQueueFull: return anthropic ? "rate_limit_error" : "rate_limit_exceeded";
    case ErrorKind::kUnavailable: return anthropic ? "overloaded_error" : "server_error";
    case ErrorKind::kInternal: return anthropic ? "api_error" : "server_error";
  }
  return "api_error";
}

nlohmann::ordered_json ApiError::body(ApiFlavor flavor) const {
  if (flavor == ApiFlavor::kAnthropic)
    return {{"type", "error"}, {"error", {{"type", type_name(flavor)}, {"message", message}}}};
  nlohmann::ordered_json error = {{"message", message}, {"type", type_name(flavor)}, {"param", nullptr}, {"code", nullptr}};
  if (!code.empty()) error["code"] = code;
  return {{"error", std::move(error)}};
}

}  // namespace helium::server
