// Randomised robustness: mutated safetensors files and configs must load or fail with an error, never
// crash, throw, or read out of bounds (run under the debug preset, ASan/UBSan check the last part).
// The seed is fixed, so a failure reproduces; the iteration counts bound the run time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader_fixtures.h"

namespace helium {
namespace {

using testing_loader::read_bytes;
using testing_loader::TempDir;
using testing_loader::write_bytes;

// Characters that turn a random mutation into a structural JSON change more often than random bytes do.
constexpr char kJsonish[] = "{}[]\":,0123456789-+.eE ntfalsruFIBU_";

// HELIUM_FUZZ_ITERATIONS raises the count for a longer local run (e.g. under the debug preset).
int iterations(int default_count) {
  const char* env = std::getenv("HELIUM_FUZZ_ITERATIONS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : default_count;
}

std::string mutate(const std::string& original, size_t header_end, std::mt19937& rng) {
  std::string s = original;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 6);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    // Mostly inside the length field and header, where the parser's decisions are.
    size_t at = rng() % 10 < 8 ? pick(std::min(header_end, s.size())) : pick(s.size());
    switch (rng() % 6) {
      case 0:
        s[at] = static_cast<char>(rng());
        break;
      case 1:
        s[at] = kJsonish[pick(sizeof kJsonish - 1)];
        break;
      case 2:
        s.erase(at, 1);
        break;
      case 3:
        s.insert(at, 1, kJsonish[pick(sizeof kJsonish - 1)]);
        break;
      case 4:  // truncation
        s.resize(pick(s.size() + 1));
        break;
      case 5:
        s[pick(std::min<size_t>(8, s.size()))] ^= static_cast<char>(1u << (rng() % 8));
        break;
    }
  }
  return s;
}

// Checks what a successful parse promises: every tensor lies inside the buffer, sizes agree, no overlap.
void check_invariants(const SafetensorsHeader& h, size_t size) {
  ASSERT_EQ(h.data_offset + h.data_bytes, size);
  uint64_t previous_end = 0;
  for (const auto& t : h.tensors) {
    ASSERT_LE(t.begin, t.end);
    ASSERT_LE(t.end, h.data_bytes);
    uint64_t n = static_cast<uint64_t>(dtype_bytes(t.dtype));
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    ASSERT_EQ(t.end - t.begin, n);
    if (t.end > t.begin) {
      ASSERT_GE(t.begin, previous_end);
      previous_end = t.end;
    }
  }
}

TEST(LoaderRobustness, MutatedSafetensorsNeverCrash) {
  TempDir dir;
  std::vector<float> a(12);
  std::vector<uint16_t> b(7);
  std::vector<int64_t> c(3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(static_cast<float>(i));
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<int64_t>(i) - 1;
  const std::string good_path = dir.file("good.safetensors");
  ASSERT_TRUE(write_safetensors(good_path,
                                {{"model.embed.weight", DType::F32, {3, 4}, a.data()},
                                 {"model.norm.weight", DType::BF16, {7}, b.data()},
                                 {"ids", DType::I64, {3}, c.data()}},
                                {{"format", "pt"}}));
  const std::string good = read_bytes(good_path);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | static_cast<uint8_t>(good[i]);
  const size_t header_end = 8 + header_bytes;

  std::mt19937 rng(20240607);
  int loaded = 0, refused = 0;
  const int count = iterations(4000);
  for (int iter = 0; iter < count; ++iter) {
    const std::string bytes = mutate(good, header_end, rng);
    // An exact-size heap copy: one byte read past the end is an ASan report, not a silent pass.
    std::vector<uint8_t> buffer(bytes.begin(), bytes.end());
    auto parsed = parse_safetensors(buffer.data(), buffer.size(), "mutated.safetensors");
    if (parsed.is_ok()) {
      ++loaded;
      check_invariants(*parsed, buffer.size());
    } else {
      ++refused;
      ASSERT_NE(parsed.error_message().find("mutated.safetensors"), std::string::npos)
          << parsed.error_message();
    }
    if (iter % 10 != 0) continue;
    // Through a real file and mapping too, touching every byte of every tensor that loads.
    const std::string path = dir.file("mutated.safetensors");
    write_bytes(path, bytes);
    WeightMap map;
    Status st = load_safetensors(path, map);
    ASSERT_EQ(st.is_ok(), parsed.is_ok()) << st.message();
    uint64_t checksum = 0;
    for (const std::string& name : map.names()) {
      const WeightInfo* info = map.find(name);
      const auto* p = static_cast<const uint8_t*>(info->data);
      for (size_t i = 0; i < info->bytes; ++i) checksum += p[i];
      auto t = map.get(name, info->shape);
      if (t.is_ok()) {
        EXPECT_EQ(t->bytes(), info->bytes);
      }
    }
    (void)checksum;
  }
  // Both outcomes must have been exercised, or the mutations are not testing anything.
  RecordProperty("loaded", loaded);
  RecordProperty("refused", refused);
  EXPECT_GT(loaded, count / 80);
  EXPECT_GT(refused, count / 4);
}

TEST(LoaderRobustness, MutatedConfigsNeverCrash) {
  const std::string config =
      R"({"model_type": "gemma3", "eos_token_id": [1, 106], "tie_word_embeddings": true,
      "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "rope_scaling": {"factor": 8.0}},
      "vision_config": {"hidden_size": 32}})";
  const std::string generation = R"({"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0,
      "temperature": 1.0, "top_k": 64, "top_p": 0.95, "min_p": 0.0, "do_sample": true})";
  std::mt19937 rng(7);
  int ok_config = 0, ok_generation = 0;
  const int count = iterations(3000);
  for (int iter = 0; iter < count; ++iter) {
    auto c = parse_text_config(mutate(config, config.size(), rng), "config.json");
    if (c.is_ok()) {
      ++ok_config;
      EXPECT_TRUE((*c)["model_type"].is_string());
    } else {
      EXPECT_EQ(c.error_message().rfind("config.json: ", 0), 0u) << c.error_message();
    }
    auto g = parse_generation_config(mutate(generation, generation.size(), rng), "generation_config.json");
    if (g.is_ok()) {
      ++ok_generation;
    } else {
      EXPECT_EQ(g.error_message().rfind("generation_config.json: ", 0), 0u) << g.error_message();
    }
  }
  RecordProperty("ok_config", ok_config);
  RecordProperty("ok_generation", ok_generation);
  EXPECT_GT(ok_config, count / 300);
  EXPECT_GT(ok_generation, count / 300);
}

}  // namespace
}  // namespace helium
