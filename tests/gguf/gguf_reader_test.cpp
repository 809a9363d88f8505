// GGUF reader: malformed files give an error naming the file and the key or tensor, never a crash or an
// out-of-bounds read (this binary also runs under ASan+UBSan); the writer reproduces gguf-py's files byte for
// byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "dllm/dllm.h"
#include "gguf_test_util.h"
#include "test_util.h"

namespace dllm {
namespace {

using test::RawBytes;

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = test::temp_path(name);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The error GgufFile gives for these bytes ("" when it opens).
std::string open_error(const std::string& bytes, const std::string& name = "t.gguf") {
  const std::string path = write_temp(name, bytes);
  std::string err;
  try {
    GgufFile f(path);
  } catch (const Error& e) {
    err = e.what();
  }
  std::remove(path.c_str());
  if (!err.empty()) {
    EXPECT_NE(err.find(path), std::string::npos) << "error does not name the file: " << err;
  }
  return err;
}

// A small valid file: one uint32 key, one string array, one F32 tensor "w" of dims {4, 2}.
struct Spec {
  uint32_t version = 3;
  uint32_t w_type = 0;  // F32
  uint64_t w_offset = 0;
  uint64_t w_ne0 = 4;
  uint32_t n_dims = 2;
  uint64_t array_count = 2;
  uint32_t value_type = 4;  // uint32
  size_t data_bytes = 32;
};

std::string build(const Spec& s) {
  RawBytes b;
  b.s = "GGUF";
  b.put<uint32_t>(s.version).put<uint64_t>(1).put<uint64_t>(2);
  b.str("test.value").put<uint32_t>(s.value_type).put<uint32_t>(7);
  b.str("test.names").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(s.array_count).str("a").str("bc");
  b.str("w").put<uint32_t>(s.n_dims).put<uint64_t>(s.w_ne0);
  if (s.n_dims > 1) b.put<uint64_t>(2);
  b.put<uint32_t>(s.w_type).put<uint64_t>(s.w_offset);
  b.pad(32);
  b.s.append(s.data_bytes, '\0');
  return b.s;
}

void expect_error(const std::string& bytes, const std::string& needle) {
  const std::string err = open_error(bytes);
  EXPECT_NE(err.find(needle), std::string::npos)
      << "got: '" << err << "', expected it to mention '" << needle << "'";
}

TEST(GgufReader, ReadsAHandMadeFile) {
  const std::string path = write_temp("ok.gguf", build({}));
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_uint("test.value"), 7u);
  EXPECT_EQ(f.get_string_array("test.names"), (std::vector<std::string>{"a", "bc"}));
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(f.tensors()[0].nbytes, 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  // Wrong-type access names the key and the type.
  try {
    f.get_string("test.value");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'test.value' must be a string, got uint32"), std::string::npos)
        << e.what();
  }
  try {
    f.get_uint("test.missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'test.missing' is missing"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(GgufReader, BadMagic) {
  std::string b = build({});
  b[0] = 'G';
  b[3] = 'X';
  expect_error(b, "not a GGUF file");
  expect_error("GG", "not a GGUF file");
  expect_error("", "not a GGUF file");
}

TEST(GgufReader, BadVersion) {
  Spec s;
  s.version = 1;
  expect_error(build(s), "unsupported GGUF version 1");
  s.version = 4;
  expect_error(build(s), "unsupported GGUF version 4");
  s.version = 0x03000000;
  expect_error(build(s), "big-endian");
  s.version = 2;
  EXPECT_EQ(open_error(build(s)), "");
}

TEST(GgufReader, EveryTruncationIsAnErrorNotACrash) {
  const std::string full = build({});
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string err = open_error(full.substr(0, n));
    EXPECT_FALSE(err.empty()) << "prefix of " << n << " bytes opened";
  }
  expect_error(full.substr(0, 30), "truncated");
  expect_error(full.substr(0, 80), "truncated file");
  expect_error(full.substr(0, full.size() - 1), "runs past the end of the file");
}

TEST(GgufReader, RealFileTruncatedInHeaderAndData) {
  const std::string full = test::read_file(test::data_path("gguf/llada_tiny_q8_0.gguf"));
  for (size_t n : {size_t{100}, size_t{5000}, size_t{11000}, full.size() / 2, full.size() - 1})
    EXPECT_FALSE(open_error(full.substr(0, n)).empty()) << n;
}

TEST(GgufReader, TensorDataOutOfRange) {
  Spec s;
  s.w_offset = 64;
  expect_error(build(s), "tensor 'w'");
  expect_error(build(s), "runs past the end of the file");
  s.w_offset = ~uint64_t{0} - 31;  // aligned, and offset + size would wrap around
  expect_error(build(s), "runs past the end of the file");
  s.w_offset = 8;
  expect_error(build(s), "not a multiple of the alignment 32");
}

TEST(GgufReader, UnknownAndUnsupportedTensorTypes) {
  Spec s;
  s.w_type = 99;
  expect_error(build(s), "tensor 'w': has unknown ggml type 99");
  s.w_type = 13;  // Q5_K: known to ggml, not read here
  expect_error(build(s), "has type Q5_K (13), which dllm does not read");
  s.w_type = 8;  // Q8_0 needs rows of 32
  expect_error(build(s), "row length 4 is not a multiple of the Q8_0 block size 32");
}

TEST(GgufReader, BadCountsAndShapes) {
  Spec s;
  s.n_dims = 5;
  expect_error(build(s), "has 5 dimensions");
  s = {};
  s.w_ne0 = 0;
  expect_error(build(s), "dimension 0 = 0");
  s.w_ne0 = uint64_t{1} << 62;
  expect_error(build(s), "overflow");
  s = {};
  s.array_count = uint64_t{1} << 60;
  expect_error(build(s),
               "metadata key 'test.names': array of 1152921504606846976 elements runs past the end");
  s = {};
  s.value_type = 77;
  expect_error(build(s), "metadata key 'test.value': unknown value type 77");
  // Absurd tensor / KV counts are rejected before any allocation.
  RawBytes b;
  b.s = "GGUF";
  b.put<uint32_t>(3).put<uint64_t>(~uint64_t{0}).put<uint64_t>(0);
  expect_error(b.s, "tensor count");
  RawBytes h;
  h.s = "GGUF";
  h.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).put<uint64_t>(~uint64_t{0} >> 1);
  h.s.append(64, 'x');
  expect_error(h.s, "string length");
}

TEST(GgufReader, DuplicatesOverlapsAndAlignment) {
  RawBytes b;
  b.s = "GGUF";
  b.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
  b.str("general.alignment").put<uint32_t>(4).put<uint32_t>(24);
  expect_error(b.s, "'general.alignment' = 24 is not a power of two");

  RawBytes o;
  o.s = "GGUF";
  o.put<uint32_t>(3).put<uint64_t>(2).put<uint64_t>(0);
  o.str("a").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(0);
  o.str("b").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(32);
  o.pad(32);
  o.s.append(128, '\0');
  expect_error(o.s, "tensors 'a' and 'b' overlap");

  RawBytes d;
  d.s = "GGUF";
  d.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(2);
  d.str("k").put<uint32_t>(7).put<uint8_t>(1);
  d.str("k").put<uint32_t>(7).put<uint8_t>(1);
  expect_error(d.s, "metadata key 'k': duplicate key");

  RawBytes v;
  v.s = "GGUF";
  v.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
  v.str("k").put<uint32_t>(7).put<uint8_t>(5);
  expect_error(v.s, "bool value 5");
}

// ---- model-level errors: a valid LLaDA file with one thing changed
// --------------------------------------------------

std::string load_error(const std::function<void(GgufWriter&, std::vector<test::TensorCopy>&)>& edit) {
  const std::string path = test::temp_path("model.gguf");
  test::rewrite_gguf(test::data_path("gguf/llada_tiny_q8_0.gguf"), path, edit);
  auto m = Model::load(path);
  std::remove(path.c_str());
  EXPECT_FALSE(m.ok());
  if (m.ok()) return "";
  EXPECT_NE(m.error().find(path), std::string::npos) << m.error();
  return m.error();
}

TEST(GgufModelErrors, NameTheKeyOrTensor) {
  auto has = [](const std::string& err, const std::string& needle) {
    EXPECT_NE(err.find(needle), std::string::npos) << "got: " << err << "\nexpected: " << needle;
  };
  has(load_error([](GgufWriter& w, auto&) { w.set_string("general.architecture", "mamba"); }),
      "metadata 'general.architecture' = 'mamba' is not supported (supported: llada, dream, llada2, sdar, "
      "llada-moe, qwen2, qwen3, llama, diffusion-gemma)");
  has(load_error([](GgufWriter& w, auto&) { w.set_uint32("llada.block_count", 4); }),
      "missing tensor 'blk.3.attn_norm.weight'");
  has(load_error([](GgufWriter& w, auto&) { w.set_uint32("llada.block_count", 2); }),
      "unexpected tensor 'blk.2.");
  has(load_error([](GgufWriter& w, auto&) { w.set_uint32("llada.feed_forward_length", 256); }),
      "tensor 'blk.0.ffn_gate.weight' has ggml shape [128, 384] but the metadata implies [128, 256]");
  has(load_error([](GgufWriter& w, auto&) { w.set_uint32("tokenizer.ggml.mask_token_id", 600); }),
      "metadata 'tokenizer.ggml.mask_token_id' = 600 is outside");
  has(load_error([](GgufWriter& w, auto&) { w.set_string("llada.embedding_length", "128"); }),
      "metadata 'llada.embedding_length' must be an integer, got string");
  has(load_error([](GgufWriter& w, auto&) { w.set_uint32("llada.attention.head_count_kv", 3); }),
      "'llada.attention.head_count_kv' = 3 must divide head_count = 4");
  has(load_error([](GgufWriter&, auto& t) {
        for (auto& x : t)
          if (x.name == "output_norm.weight") x.name = "output_norm.bias";
      }),
      "missing tensor 'output_norm.weight'");
}

TEST(GgufWriter, RewritesGgufPyFilesByteForByte) {
  for (const char* name :
       {"gguf/llada_tiny_q8_0.gguf", "gguf/dream_tiny_gqa_q8_0.gguf", "gguf/llada_tiny_f16.gguf"}) {
    const std::string path = test::temp_path("copy.gguf");
    test::rewrite_gguf(test::data_path(name), path);
    EXPECT_TRUE(test::read_file(path) == test::read_file(test::data_path(name))) << name;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace dllm
