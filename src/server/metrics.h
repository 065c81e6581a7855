// server/metrics.h — GET /metrics: the scheduler's counters and the HTTP status counts in the Prometheus
// text format (version 0.0.4).
// Owns: metric names, help texts and derived rates (tok/s, cache hit ratio). Must not: collect engine
// statistics itself (the Scheduler does) or know routes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/scheduler.h"
#include "server/prompt_renderer.h"

namespace helium::server {

// HTTP responses by status code, counted as their log lines are written.
class HttpCounters {
 public:
  void count(int status) {
    std::lock_guard lock(mutex_);
    ++by_status_[status];
  }
  std::map<int, uint64_t> snapshot() const {
    std::lock_guard lock(mutex_);
    return by_status_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> by_status_;
};

std::string prometheus_metrics(const SchedulerStats& stats, const HttpCounters& http, const ServedModel& model);

}  // namespace helium::server
