// server/metrics.cpp — see metrics.h.
#include "server/metrics.h"

#include <cstdio>

namespace helium::server {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value,
            const std::string& labels = {}) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += labels;
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.17g\n", value);
  out += buf;
}

// A label value with Prometheus' escapes (backslash, double quote, newline).
std::string label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string prometheus_metrics(const SchedulerStats& s, const HttpCounters& http, const ServedModel& model) {
  std::string out;
  out += "# HELP helium_requests_total Generation requests by outcome: completed (stop, length or cancelled), "
         "failed (engine error), refused (queue full, too long, shutting down).\n";
  out += "# TYPE helium_requests_total counter\n";
  out += "helium_requests_total{outcome=\"completed\"} " + std::to_string(s.requests_completed) + "\n";
  out += "helium_requests_total{outcome=\"failed\"} " + std::to_string(s.requests_failed) + "\n";
  out += "helium_requests_total{outcome=\"refused\"} " + std::to_string(s.requests_refused) + "\n";
  metric(out, "helium_requests_submitted_total", "counter", "Generation requests accepted into the queue.",
         static_cast<double>(s.requests_submitted));
  metric(out, "helium_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         static_cast<double>(s.prompt_tokens));
  metric(out, "helium_prompt_cached_tokens_total", "counter",
         "Prompt tokens whose KV came from the prompt cache instead of being recomputed.",
         static_cast<double>(s.cached_prompt_tokens));
  metric(out, "helium_generated_tokens_total", "counter", "Generated tokens.", static_cast<double>(s.generated_tokens));
  metric(out, "helium_prefill_seconds_total", "counter", "Time spent in prefill (to the first token).", s.prefill_seconds);
  metric(out, "helium_decode_seconds_total", "counter", "Time spent decoding after the first token.", s.decode_seconds);
  metric(out, "helium_generation_tokens_per_second", "gauge", "Generated tokens per decode second, since start.",
         s.decode_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.decode_seconds : 0.0);
  const double computed = static_cast<double>(s.prompt_tokens - s.cached_prompt_tokens);
  metric(out, "helium_prefill_tokens_per_second", "gauge",
         "Prompt tokens computed (not cached) per prefill second, since start.",
         s.prefill_seconds > 0 ? computed / s.prefill_seconds : 0.0);
  metric(out, "helium_prompt_cache_hit_ratio", "gauge", "Share of prompt tokens served from the prompt cache.",
         s.prompt_tokens > 0 ? static_cast<double>(s.cached_prompt_tokens) / static_cast<double>(s.prompt_tokens) : 0.0);
  metric(out, "helium_decode_steps_total", "counter", "Batched decode forwards.", static_cast<double>(s.decode_steps));
  metric(out, "helium_decode_batch_rows_mean", "gauge", "Generations per decode forward, on average since start.",
         s.decode_steps > 0 ? static_cast<double>(s.decode_step_rows) / static_cast<double>(s.decode_steps) : 0.0);
  metric(out, "helium_queue_depth", "gauge", "Requests waiting for the engine.", static_cast<double>(s.queue_depth));
  metric(out, "helium_requests_running", "gauge", "Requests the engine is running.", static_cast<double>(s.running));
  metric(out, "helium_context_tokens", "gauge", "KV positions per sequence (the served context).",
         static_cast<double>(model.context), "{model=\"" + label_value(model.id) + "\"}");
  out += "# HELP helium_http_responses_total HTTP responses by status code.\n";
  out += "# TYPE helium_http_responses_total counter\n";
  for (const auto& [status, count] : http.snapshot())
    out += "helium_http_responses_total{code=\"" + std::to_string(status) + "\"} " + std::to_string(count) + "\n";
  return out;
}

}  // namespace helium::server
