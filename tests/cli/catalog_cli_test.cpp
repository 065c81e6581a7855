// `helium models` and `helium info --model NAME` through the real binary: the catalog table, and memory
// plans made from the catalog's shapes alone (an empty cache, offline, an endpoint nothing listens on:
// nothing is downloaded or even asked).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/mapped_file.h"

namespace helium {
namespace {

struct CatalogOutput {
  int code = 0;
  std::string out, err;
};

// Runs the binary with an empty Hugging Face cache, offline, and HF_ENDPOINT on a closed port.
CatalogOutput run_helium(const std::string& args) {
  static int calls = 0;
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(calls++);
  const std::string cache = ::testing::TempDir() + "catalog_cli_cache_" + tag;
  const std::string err_path = ::testing::TempDir() + "catalog_cli_stderr_" + tag + ".txt";
  std::filesystem::create_directories(cache);
  const std::string cmd = "env HF_HUB_CACHE=" + cache + " HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 " +
                          std::string(HELIUM_BINARY) + " " + args + " 2>" + err_path;
  CatalogOutput o;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto err = read_file(err_path);
  if (err.is_ok()) o.err = err.value();
  std::remove(err_path.c_str());
  std::filesystem::remove_all(cache);
  return o;
}

// The table row of `name` ("" when absent).
std::string row(const std::string& table, const std::string& name) {
  const auto at = table.find("\n" + name + " ");
  return at == std::string::npos ? "" : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(CatalogCli, ModelsListsEveryEntryWithSizeFamilyAndStatus) {
  CatalogOutput o = run_helium("models");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(has(o.out, "NAME")) << o.out;
  for (const char* name : {"helium-code-12m", "0.6b", "1.7b", "4b", "8b", "14b", "flint", "27b", "35b",
                           "bolt", "clover", "flash-next"})
    EXPECT_FALSE(row(o.out, name).empty()) << name << "\n" << o.out;
  const std::string r35 = row(o.out, "35b");
  EXPECT_TRUE(has(r35, "Qwen/Qwen3.6-35B-A3B")) << r35;
  EXPECT_TRUE(has(r35, "qwen3_5_moe")) << r35;
  EXPECT_TRUE(has(r35, "36.0B (3.0B)")) << r35;
  EXPECT_TRUE(has(r35, "~71.90 GB")) << r35;  // 35,951,822,704 parameters in bf16
  EXPECT_TRUE(has(r35, "256K")) << r35;
  EXPECT_TRUE(has(r35, " no ")) << r35;  // not in the (empty) cache
  EXPECT_TRUE(has(r35, "no*")) << r35;   // not supported yet...
  EXPECT_TRUE(has(o.out, "* 35b: the hybrid Gated DeltaNet MoE family (qwen3_5_moe) is not implemented yet"))
      << o.out;
  const std::string flint = row(o.out, "flint");
  EXPECT_TRUE(has(flint, "Qwen/Qwen3-32B")) << flint;
  EXPECT_EQ(flint.substr(flint.size() - 3), "yes") << flint;  // qwen3 runs today
  const std::string def = row(o.out, "helium-code-12m");
  EXPECT_TRUE(has(def, "(local)")) << def;
  EXPECT_TRUE(has(def, " yes ")) << def;  // in the source tree: downloaded
}

TEST(CatalogCli, Info35bPlansAnH200FromTheCatalogAlone) {
  CatalogOutput o = run_helium("info --model 35b --host-memory 512GB");
  ASSERT_EQ(o.code, 0) << o.err;
  for (const char* want :
       {"repository   Qwen/Qwen3.6-35B-A3B @ 995ad96eacd98c81ed38be0c5b274b04031597b0 (not downloaded",
        "architecture qwen3_5_moe: 40 layers (10 full attention, 30 Gated DeltaNet)",
        "MoE: 40 layers of 256 experts of 512, 8 active per token, 1 shared of 512",
        "parameters   35.95 B total, 3.00 B active (published)",
        "supported    no: the hybrid Gated DeltaNet MoE family (qwen3_5_moe) is not implemented yet",
        "device       an H200 with 141 GB is assumed", "memory plan: 35b on H200 (141.0 GB), context 32,768",
        "10 full-attention layers x 20.48 kB/token x 32,768 tokens",  // KV only where attention is full
        "recurrent state", "30 Gated DeltaNet layers x 2.10 MB (fp32) x 5 snapshot(s)",
        "the checkpoint's MTP head", "routed experts                64.42 GB",
        "total                         74.53 GB", "fits: 66.47 GB of GPU memory left"})
    EXPECT_TRUE(has(o.out, want)) << want << "\n" << o.out;
  EXPECT_TRUE(o.err.empty()) << o.err;
}

TEST(CatalogCli, InfoRefusesWhatCannotFitAndNamesTheFlags) {
  CatalogOutput big = run_helium("info --model flash-next");
  ASSERT_EQ(big.code, 0) << big.err;
  EXPECT_TRUE(has(big.out, "refused: flash-next does not fit on H200 (141.0 GB)")) << big.out;
  EXPECT_TRUE(has(big.out, "--offload-experts")) << big.out;
  EXPECT_TRUE(has(big.out, "--quantization fp8")) << big.out;

  CatalogOutput offloaded = run_helium("info --model flash-next --offload-experts --host-memory 512GB");
  ASSERT_EQ(offloaded.code, 0) << offloaded.err;
  EXPECT_TRUE(has(offloaded.out, "routed experts (offloaded)")) << offloaded.out;
  EXPECT_TRUE(has(offloaded.out, "routed experts (cache)")) << offloaded.out;
  EXPECT_TRUE(has(offloaded.out, "fits:")) << offloaded.out;

  CatalogOutput small_gpu = run_helium("info --model flint --gpu-memory 79GB -c 40960 --no-drafter");
  ASSERT_EQ(small_gpu.code, 0) << small_gpu.err;
  EXPECT_TRUE(has(small_gpu.out, "memory plan: flint on GPU (79.00 GB), context 40,960")) << small_gpu.out;
  EXPECT_TRUE(has(small_gpu.out, "refused")) << small_gpu.out;
  EXPECT_TRUE(has(small_gpu.out, "--ctx-size ")) << small_gpu.out;
}

TEST(CatalogCli, InfoErrorsAreClear) {
  CatalogOutput size = run_helium("info --model 8b --gpu-memory lots");
  EXPECT_EQ(size.code, 1);
  EXPECT_TRUE(has(size.err, "--gpu-memory")) << size.err;
  CatalogOutput unknown = run_helium("info --model no-such-model");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_TRUE(has(unknown.err, "no-such-model")) << unknown.err;
  EXPECT_TRUE(has(unknown.err, "flint")) << unknown.err;  // the catalog's names are listed
  CatalogOutput not_cached = run_helium("info --model Qwen/Qwen3-8B");
  EXPECT_EQ(not_cached.code, 1);
  EXPECT_TRUE(has(not_cached.err, "not in the cache")) << not_cached.err;
}

}  // namespace
}  // namespace helium
