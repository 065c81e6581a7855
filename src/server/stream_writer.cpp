// server/stream_writer.cpp — the StreamWriter base (parser events -> content blocks), server-sent event
// text and response ids. See api_adapter.h.
#include <atomic>
#include <chrono>
#include <random>

#include "server/api_adapter.h"

namespace helium::server {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::string make_response_id(std::string_view prefix, uint64_t seed, uint64_t salt) {
  static constexpr char kDigits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string id(prefix);
  uint64_t state = splitmix64(seed ^ splitmix64(salt + 0x51ed27));
  for (int i = 0; i < 24; ++i) {
    if (i % 8 == 0) state = splitmix64(state + static_cast<uint64_t>(i));
    id.push_back(kDigits[state % 62]);
    state /= 62;
  }
  return id;
}

uint64_t random_seed() {
  // random_device once per process, then a counter through splitmix: cheap, and distinct per call.
  static const uint64_t base = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  static std::atomic<uint64_t> counter{0};
  return splitmix64(base + counter.fetch_add(1, std::memory_order_relaxed));
}

std::string sse_event(std::string_view event, const Json& data) {
  std::string out;
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  out += "data: ";
  out += dump_json(data);
  out += "\n\n";
  return out;
}

std::string StreamWriter::start() {
  write_start();
  return take();
}

std::string StreamWriter::write(const std::vector<ParserEvent>& events) {
  for (const ParserEvent& e : events) {
    switch (e.kind) {
      case ParserEvent::kText:
      case ParserEvent::kReasoning: {
        if (e.text.empty()) break;
        const Block block = e.kind == ParserEvent::kText ? Block::kText : Block::kReasoning;
        if (open_ != block) {
          close_open_block();
          open_ = block;
          open_block(block, e);
        }
        block_delta(block, e.text);
        break;
      }
      case ParserEvent::kToolCallBegin:
        close_open_block();
        open_ = Block::kToolCall;
        open_block(Block::kToolCall, e);
        break;
      case ParserEvent::kToolCallArguments:
        if (open_ == Block::kToolCall && !e.text.empty()) block_delta(Block::kToolCall, e.text);
        break;
      case ParserEvent::kToolCallEnd:
        if (open_ == Block::kToolCall) close_open_block();
        break;
    }
  }
  return take();
}

std::string StreamWriter::finish(const Completion& completion) {
  close_open_block();
  write_finish(completion);
  return take();
}

std::string StreamWriter::fail(const ApiError& error) {
  close_open_block();
  write_failure(error);
  return take();
}

void StreamWriter::close_open_block() {
  if (open_ == Block::kNone) return;
  const Block block = open_;
  open_ = Block::kNone;
  close_block(block);
}

void StreamWriter::end_openai_stream(const Json& finish_chunk, Json usage_chunk, Json usage) {
  emit("", finish_chunk);
  if (context().request->include_usage) {
    usage_chunk["choices"] = Json::array();
    usage_chunk["usage"] = std::move(usage);
    emit("", usage_chunk);
  }
  emit_raw("data: [DONE]\n\n");
}

void StreamWriter::fail_openai_stream(const ApiError& error) {
  emit("", error.body(ApiFlavor::kOpenAI));
  emit_raw("data: [DONE]\n\n");
}

}  // namespace helium::server
