// The libFuzzer targets' entry points replayed on their seed corpora and on every input a fuzzing run once
// crashed them (tests/fuzz/corpus/<target>/, tests/fuzz/regressions/<target>/), in every build: the Release
// and ASan + UBSan test builds check them without clang (scripts/fuzz.sh runs the fuzzers themselves).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int dllm_fuzz_safetensors(const uint8_t* data, size_t size);
extern "C" int dllm_fuzz_gguf(const uint8_t* data, size_t size);
extern "C" int dllm_fuzz_config(const uint8_t* data, size_t size);
extern "C" int dllm_fuzz_tokenizer(const uint8_t* data, size_t size);
extern "C" int dllm_fuzz_chat_template(const uint8_t* data, size_t size);
extern "C" int dllm_fuzz_request(const uint8_t* data, size_t size);

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

TEST(FuzzCorpus, EveryTargetReplaysItsSeedsAndRegressions) {
  const Target targets[] = {{"safetensors", dllm_fuzz_safetensors},
                            {"gguf", dllm_fuzz_gguf},
                            {"config", dllm_fuzz_config},
                            {"tokenizer", dllm_fuzz_tokenizer},
                            {"chat_template", dllm_fuzz_chat_template},
                            {"request", dllm_fuzz_request}};
  namespace fs = std::filesystem;
  const fs::path root = fs::path(DLLM_SOURCE_DIR) / "tests" / "fuzz";
  for (const Target& t : targets) {
    int seeds = 0;
    for (const char* kind : {"corpus", "regressions"}) {
      const fs::path dir = root / kind / t.name;
      if (!fs::is_directory(dir)) continue;
      for (const auto& entry : fs::directory_iterator(dir)) {
        std::ifstream in(entry.path(), std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        SCOPED_TRACE(entry.path().string());
        EXPECT_EQ(t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
        ++seeds;
      }
    }
    EXPECT_GT(seeds, 0) << "no seed input for the " << t.name << " target";
  }
}

}  // namespace
