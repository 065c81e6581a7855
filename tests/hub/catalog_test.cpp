// The catalog: the real catalog/models.json loads and its facts agree with the published parameter counts;
// validation names the entry and the field of every mistake; the parameter arithmetic, by hand.
#include "hub/catalog.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/mapped_file.h"

namespace helium {
namespace {

const std::string kCatalogPath = std::string(HELIUM_SOURCE_DIR) + "/catalog/models.json";

Catalog real_catalog() {
  auto c = Catalog::load(kCatalogPath);
  EXPECT_TRUE(c.is_ok()) << c.error_message();
  return c.is_ok() ? c.value() : Catalog{};
}

TEST(Catalog, TheRealCatalogLoadsWithTheRequiredEntries) {
  Catalog c = real_catalog();
  for (const char* name : {"27b", "35b", "bolt", "clover", "flash-next", "flint", "0.6b", "1.7b", "4b", "8b",
                           "14b", "helium-code-12m"})
    EXPECT_NE(c.find(name), nullptr) << name;
  EXPECT_EQ(c.entries().front().name, "helium-code-12m");  // file order is kept
  const CatalogEntry* def = c.find("helium-code-12m");
  ASSERT_NE(def, nullptr);
  EXPECT_TRUE(def->is_local());
  EXPECT_EQ(def->local_path, "models/helium-code-12m");
  EXPECT_TRUE(supported_by_version(*def, "0.1.0"));
  // Families helium does not implement yet say so, with a reason.
  for (const char* name : {"27b", "35b", "bolt", "clover", "flash-next"}) {
    const CatalogEntry* e = c.find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->supported_since, "unsupported") << name;
    EXPECT_FALSE(supported_by_version(*e, "99.0.0")) << name;
    EXPECT_FALSE(e->unsupported_reason.empty()) << name;
  }
  for (const char* name : {"flint", "0.6b", "8b"})
    EXPECT_TRUE(supported_by_version(*c.find(name), "0.1.0")) << name;
  EXPECT_EQ(c.find("35b")->shape.family, "qwen3_5_moe");
  EXPECT_EQ(c.find("bolt")->shape.recurrent.kind, "mamba2");
  EXPECT_EQ(c.find("27b")->shape.recurrent.kind, "gated_deltanet");
  EXPECT_EQ(c.find("flint")->repo, "Qwen/Qwen3-32B");
}

// The shape facts reproduce the published totals (the text model is at most 2% above and, with vision
// towers and MTP heads outside it, not far below) and the published active counts within 25% (vendors
// count embeddings differently).
TEST(Catalog, ShapesAgreeWithPublishedParameterCounts) {
  const Catalog catalog = real_catalog();
  for (const auto& e : catalog.entries()) {
    const ParameterBreakdown p = parameter_breakdown(e.shape);
    const double total = static_cast<double>(p.total()), published = static_cast<double>(e.parameters.total);
    EXPECT_LE(total, published * 1.02) << e.name;
    EXPECT_GE(total, published * 0.94) << e.name;
    if (e.shape.moe.layers > 0) {
      const double active = static_cast<double>(p.per_token), pub = static_cast<double>(e.parameters.active);
      EXPECT_GT(active, pub * 0.75) << e.name;
      EXPECT_LT(active, pub * 1.25) << e.name;
    }
  }
}

// Qwen3-8B by hand: embeddings 151936·4096 twice (untied); per layer q 4096·4096, k and v 4096·1024,
// o 4096·4096, FFN 3·4096·12288, two norms of 4096; a final norm.
TEST(Catalog, ParameterArithmeticByHand) {
  Catalog c = real_catalog();
  const ParameterBreakdown p8 = parameter_breakdown(c.find("8b")->shape);
  EXPECT_EQ(p8.embedding, 622329856);
  EXPECT_EQ(p8.lm_head, 622329856);
  EXPECT_EQ(p8.attention, 36LL * (16777216 + 2 * 4194304 + 16777216));
  EXPECT_EQ(p8.dense_ffn, 36LL * 150994944);
  EXPECT_EQ(p8.norms, (36LL * 2 + 1) * 4096);
  EXPECT_EQ(p8.total(), 8190726144);  // 8.19B; the model card says 8.2B
  EXPECT_EQ(p8.per_token, p8.total() - p8.embedding);

  // Qwen3.6-35B-A3B: 40 MoE layers of 256 experts of 3·2048·512 = 3,145,728 parameters.
  const ParameterBreakdown p35 = parameter_breakdown(c.find("35b")->shape);
  EXPECT_EQ(p35.routed_experts, 40LL * 256 * 3145728);
  EXPECT_EQ(p35.moe_always, 40LL * (256 * 2048 + 3145728));  // routers + shared experts
  // Gated DeltaNet layer: in_proj_qkv 2048·8192, z 2048·4096, b and a 2048·32 each, conv 8192·4,
  // A_log/dt_bias 2·32, norm 128, out_proj 4096·2048.
  EXPECT_EQ(p35.recurrent, 30LL * (16777216 + 8388608 + 131072 + 32768 + 64 + 128 + 8388608));
  // Gated attention: q (with its gate) 2048·8192, k and v 2048·512, o 4096·2048.
  EXPECT_EQ(p35.attention, 10LL * (16777216 + 2097152 + 8388608));
  EXPECT_EQ(p35.per_token, p35.total() - p35.embedding - p35.routed_experts + 40LL * 8 * 3145728);

  const RecurrentFacts& gdn = c.find("35b")->shape.recurrent;
  EXPECT_EQ(gdn.state_bytes_per_layer(), 32LL * 128 * 128 * 4);  // 2 MiB
  const RecurrentFacts& mamba = c.find("bolt")->shape.recurrent;
  EXPECT_EQ(mamba.state_bytes_per_layer(), 64LL * 64 * 128 * 4);  // 2 MiB
  EXPECT_EQ(mamba.conv_channels(), 4096 + 2 * 8 * 128);
}

TEST(Catalog, VersionsAndQuantizations) {
  EXPECT_EQ(compare_versions("0.1.0", "0.1.0"), 0);
  EXPECT_LT(compare_versions("0.9.2", "0.10.0"), 0);
  EXPECT_GT(compare_versions("1.0", "0.99.99"), 0);
  EXPECT_EQ(compare_versions("1", "1.0.0"), 0);
  EXPECT_EQ(bytes_per_parameter("bf16").value(), 2.0);
  EXPECT_EQ(bytes_per_parameter("fp8").value(), 1.0);
  EXPECT_EQ(bytes_per_parameter("int4").value(), 0.5);
  EXPECT_FALSE(bytes_per_parameter("q4_k_m").has_value());
}

// A valid one-entry catalog, then one mistake at a time.
nlohmann::ordered_json minimal_catalog() {
  return nlohmann::ordered_json::parse(R"({
    "catalog_version": 1,
    "models": {
      "tiny": {
        "description": "a test entry",
        "repo": "org/tiny", "revision": "main", "files": ["*.json", "*.safetensors"],
        "family": "qwen3", "context": 4096, "quantization": "bf16", "supported_since": "0.1.0",
        "parameters": {"total": 1930000},
        "shape": {"layers": 2, "hidden": 128, "vocab": 1000, "tied_embeddings": false,
                  "attention": {"layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 32},
                  "ffn": {"layers": 2, "intermediate": 2048}}
      }
    }
  })");
}

std::string error_of(const nlohmann::ordered_json& doc) {
  auto c = Catalog::parse(doc.dump(), "test-catalog.json");
  return c.is_ok() ? std::string("(accepted)") : c.error_message();
}

TEST(Catalog, MinimalEntryIsValid) {
  auto doc = minimal_catalog();
  auto c = Catalog::parse(doc.dump(), "test-catalog.json");
  ASSERT_TRUE(c.is_ok()) << c.error_message();
  EXPECT_EQ(c->find("tiny")->revision, "main");
  EXPECT_EQ(c->find("tiny")->parameters.active, 1930000);  // defaults to total
}

TEST(Catalog, ValidationNamesTheEntryAndTheField) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::ordered_json&)> mutate;
    std::vector<std::string> expect;  // substrings of the error
  };
  const std::vector<Case> cases = {
      {"unknown field",
       [](auto& d) { d["models"]["tiny"]["contxt"] = 1; },
       {"'tiny'", "unknown field", "contxt"}},
      {"unknown shape field",
       [](auto& d) { d["models"]["tiny"]["shape"]["hiden"] = 1; },
       {"'tiny'.shape", "hiden"}},
      {"unknown attention field",
       [](auto& d) { d["models"]["tiny"]["shape"]["attention"]["rope"] = 1; },
       {"'tiny'.shape.attention", "rope"}},
      {"missing description",
       [](auto& d) { d["models"]["tiny"].erase("description"); },
       {"'tiny'", "description"}},
      {"missing shape", [](auto& d) { d["models"]["tiny"].erase("shape"); }, {"'tiny'", "'shape'"}},
      {"missing revision", [](auto& d) { d["models"]["tiny"].erase("revision"); }, {"'tiny'", "revision"}},
      {"wrong type", [](auto& d) { d["models"]["tiny"]["context"] = "4k"; }, {"'tiny'.context", "number"}},
      {"negative context",
       [](auto& d) { d["models"]["tiny"]["context"] = -1; },
       {"'tiny'.context", "outside"}},
      {"fractional layers",
       [](auto& d) { d["models"]["tiny"]["shape"]["layers"] = 2.5; },
       {"layers", "whole number"}},
      {"zero heads",
       [](auto& d) { d["models"]["tiny"]["shape"]["attention"]["heads"] = 0; },
       {"heads", "outside"}},
      {"heads not a multiple of kv heads",
       [](auto& d) { d["models"]["tiny"]["shape"]["attention"]["kv_heads"] = 3; },
       {"'tiny'.shape.attention", "multiple of kv_heads"}},
      {"mixer layers do not add up",
       [](auto& d) { d["models"]["tiny"]["shape"]["attention"]["layers"] = 1; },
       {"'tiny'.shape", "attention.layers 1", "layers 2"}},
      {"ffn layers do not add up",
       [](auto& d) { d["models"]["tiny"]["shape"]["ffn"]["layers"] = 3; },
       {"ffn.layers 3"}},
      {"bad repo", [](auto& d) { d["models"]["tiny"]["repo"] = "tiny"; }, {"'tiny'.repo", "org/name"}},
      {"repo and path",
       [](auto& d) { d["models"]["tiny"]["path"] = "models/x"; },
       {"exactly one of 'repo' and 'path'"}},
      {"unsafe pattern", [](auto& d) { d["models"]["tiny"]["files"] = {"../*"}; }, {"'tiny'.files", "../*"}},
      {"no patterns",
       [](auto& d) { d["models"]["tiny"]["files"] = nlohmann::ordered_json::array(); },
       {"files", "empty"}},
      {"unknown quantization",
       [](auto& d) { d["models"]["tiny"]["quantization"] = "q4"; },
       {"quantization", "q4"}},
      {"bad version",
       [](auto& d) { d["models"]["tiny"]["supported_since"] = "soon"; },
       {"supported_since", "soon"}},
      {"unsupported without reason",
       [](auto& d) { d["models"]["tiny"]["supported_since"] = "unsupported"; },
       {"unsupported_reason"}},
      {"unknown drafter",
       [](auto& d) { d["models"]["tiny"]["drafter"] = "ghost"; },
       {"'tiny'.drafter", "ghost"}},
      {"mtp drafter without mtp layers",
       [](auto& d) { d["models"]["tiny"]["drafter"] = "mtp"; },
       {"mtp_layers"}},
      {"parameters far from the shape",
       [](auto& d) { d["models"]["tiny"]["parameters"]["total"] = 1000; },
       {"'tiny'", "parameters.total", "a shape field is wrong"}},
      {"active above total",
       [](auto& d) { d["models"]["tiny"]["parameters"]["active"] = 2000000; },
       {"active exceeds total"}},
      {"bad short name", [](auto& d) { d["models"]["a/b"] = d["models"]["tiny"]; }, {"'a/b'", "short name"}},
      {"recurrent kind",
       [](auto& d) {
         d["models"]["tiny"]["shape"]["recurrent"] = {{"kind", "rwkv"}, {"layers", 0}, {"conv_kernel", 4}};
       },
       {"'tiny'.shape.recurrent.kind", "rwkv"}},
      {"moe active above experts",
       [](auto& d) {
         d["models"]["tiny"]["shape"]["moe"] = {
             {"layers", 0}, {"experts", 4}, {"active", 8}, {"intermediate", 64}};
       },
       {"'tiny'.shape.moe", "active (8) exceeds experts (4)"}},
      {"top-level typo", [](auto& d) { d["model"] = 1; }, {"unknown field", "model"}},
      {"version", [](auto& d) { d["catalog_version"] = 2; }, {"catalog_version"}},
  };
  for (const auto& c : cases) {
    auto doc = minimal_catalog();
    c.mutate(doc);
    const std::string err = error_of(doc);
    for (const auto& s : c.expect) EXPECT_NE(err.find(s), std::string::npos) << c.what << ": " << err;
    EXPECT_NE(err.find("test-catalog.json"), std::string::npos) << c.what << ": " << err;
  }
  EXPECT_NE(Catalog::parse("{not json", "x.json").error_message().find("not valid JSON"), std::string::npos);
}

TEST(Catalog, DrafterMustShareTheVocabulary) {
  auto doc = minimal_catalog();
  doc["models"]["draft"] = doc["models"]["tiny"];
  doc["models"]["draft"]["shape"]["vocab"] = 999;
  doc["models"]["draft"]["parameters"]["total"] = 1930000;
  doc["models"]["tiny"]["drafter"] = "draft";
  const std::string err = error_of(doc);
  EXPECT_NE(err.find("'tiny'.drafter"), std::string::npos) << err;
  EXPECT_NE(err.find("vocabulary"), std::string::npos) << err;
  doc["models"]["draft"]["shape"]["vocab"] = 1000;
  EXPECT_EQ(error_of(doc), "(accepted)");
}

}  // namespace
}  // namespace helium
