// models/config_reader.h — typed reads of config.json keys with errors that name the key and file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace helium {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& config, std::string origin) : config_(config), origin_(std::move(origin)) {}

  Result<int64_t> integer(const std::string& key) const;
  int64_t integer_or(const std::string& key, int64_t fallback) const;
  Result<double> number(const std::string& key) const;
  double number_or(const std::string& key, double fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  const nlohmann::json* find(const std::string& key) const;
  Status error(const std::string& message) const { return Status::error(origin_ + ": " + message); }
  const std::string& origin() const { return origin_; }

 private:
  const nlohmann::json& config_;
  std::string origin_;
};

}  // namespace helium
