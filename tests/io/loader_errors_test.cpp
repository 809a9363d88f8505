// Malformed model directories: every one must give a failed Expected whose message names the file and the
// tensor or field at fault, with no crash and no out-of-bounds read (this binary also runs under ASan+UBSan).
// Each case copies the tiny LLaDA checkpoint into a temp directory and corrupts one thing, written by the
// small safetensors writer below. The valid variants (sharded, BF16, F16, unaligned data) must load and give
// the expected logits.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "convert/gguf_convert.h"
#include "core/dtype.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kTiny = "oracle/models/llada_tiny_f32";
const char* const kQ0 = "model.transformer.blocks.0.q_proj.weight";
const char* const kK0 = "model.transformer.blocks.0.k_proj.weight";
const char* const kWte = "model.transformer.wte.weight";
const char* const kLnF = "model.transformer.ln_f.weight";

// ---- a small safetensors reader / writer
// -------------------------------------------------------------------------

struct Tensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;
};

// The tensors of a (valid) safetensors file, in data order.
std::vector<Tensor> read_tensors(const std::string& path) {
  const std::string file = test::read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const json header = json::parse(file.substr(8, n));
  std::vector<std::pair<uint64_t, Tensor>> found;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& e = it.value();
    const uint64_t b = e["data_offsets"][0], end = e["data_offsets"][1];
    found.push_back({b, Tensor{it.key(), e["dtype"], e["shape"].get<std::vector<int64_t>>(),
                               file.substr(8 + n + b, end - b)}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Tensor> out;
  for (auto& [off, t] : found) out.push_back(std::move(t));
  return out;
}

Tensor* find(std::vector<Tensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

void erase_tensor(std::vector<Tensor>& ts, const std::string& name) {
  std::erase_if(ts, [&](const Tensor& t) { return t.name == name; });
}

// The header json of tensors laid out back to back, in the given order.
json make_header(const std::vector<Tensor>& ts) {
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  return h;
}

std::string concat_data(const std::vector<Tensor>& ts) {
  std::string d;
  for (const auto& t : ts) d += t.bytes;
  return d;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// u64 header length + header text + data, exactly as given (pad_to: pad the header with spaces to a
// multiple).
std::string serialize(const std::string& header_text, const std::string& data, size_t pad_to = 8) {
  std::string h = header_text;
  while (pad_to > 1 && h.size() % pad_to != 0) h += ' ';
  const uint64_t n = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

void write_safetensors(const std::string& path, const std::vector<Tensor>& ts,
                       const std::function<void(json&)>& edit_header = {}) {
  json h = make_header(ts);
  if (edit_header) edit_header(h);
  write_bytes(path, serialize(h.dump(), concat_data(ts)));
}

// Converts an F32 tensor to BF16 or F16 (round to nearest even).
Tensor converted(const Tensor& t, DType to) {
  Tensor out = t;
  const size_t n = t.bytes.size() / 4;
  out.dtype = std::string(dtype_name(to));
  out.bytes.assign(n * 2, '\0');
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, t.bytes.data() + 4 * i, 4);
    const uint16_t h = to == DType::kBF16 ? f32_to_bf16(f) : f32_to_f16(f);
    std::memcpy(out.bytes.data() + 2 * i, &h, 2);
  }
  return out;
}

// An F32 tensor holding the values of a BF16 / F16 one (exact).
Tensor widened(const Tensor& t) {
  Tensor out = t;
  const DType from = t.dtype == "BF16" ? DType::kBF16 : DType::kF16;
  const size_t n = t.bytes.size() / 2;
  out.dtype = "F32";
  out.bytes.assign(n * 4, '\0');
  convert_to_f32(from, t.bytes.data(), reinterpret_cast<float*>(out.bytes.data()), n);
  return out;
}

// ---- fixture: a copy of the tiny model in a fresh temp directory
// -------------------------------------------------

class LoaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "dllm_loader_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
      fs::copy_file(test::data_path(std::string(kTiny) + "/" + f), dir_ + "/" + f);
    tensors_ = read_tensors(st());
    ASSERT_EQ(tensors_.size(), 30u);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string st() const { return dir_ + "/model.safetensors"; }
  std::string config_path() const { return dir_ + "/config.json"; }

  json config() const { return test::read_json(config_path()); }
  void write_config(const json& c) const { write_bytes(config_path(), c.dump(2)); }
  void edit_config(const std::function<void(json&)>& fn) const {
    json c = config();
    fn(c);
    write_config(c);
  }

  // Loads dir (default: the temp model) and expects a failure whose message contains every part.
  void expect_error(std::initializer_list<std::string> parts, const std::string& dir = "") const {
    auto m = Model::load(dir.empty() ? dir_ : dir, options());
    ASSERT_FALSE(m.ok()) << "loaded, but expected an error containing " << *parts.begin();
    for (const auto& p : parts)
      EXPECT_NE(m.error().find(p), std::string::npos) << "'" << p << "' not in: " << m.error();
    // `dllm convert` reads the directory through the same family description: it refuses the same input with
    // the same message, and writes nothing.
    const std::string out = dir_ + "/converted.gguf";
    std::string convert_error = "(converted without an error)";
    try {
      convert_hf_to_gguf(dir.empty() ? dir_ : dir, out, GgmlType::kF32);
    } catch (const Error& e) {
      convert_error = e.what();
    }
    EXPECT_EQ(convert_error, m.error()) << "convert and load disagree";
    EXPECT_FALSE(fs::exists(out)) << "convert left a file behind after an error";
    ++checked_with_convert_;
  }

  static LoadOptions options() {
    LoadOptions o;
    o.precision = Precision::kF32;
    return o;
  }

  static std::vector<float> logits_of(const std::string& dir) {
    auto m = Model::load(dir, options());
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
    if (!m.ok()) return {};
    const std::vector<int32_t> ids = {480, 158, 483, 500, 500, 500, 12, 481};
    ForwardInput in;
    in.tokens = ids;
    auto logits = m.value()->forward(in);
    EXPECT_TRUE(logits.ok()) << (logits.ok() ? "" : logits.error());
    return logits.ok() ? logits.value() : std::vector<float>{};
  }

  static std::vector<float> reference_logits() { return logits_of(test::data_path(kTiny)); }

  std::string dir_;
  std::vector<Tensor> tensors_;
  mutable int checked_with_convert_ = 0;
};

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// ---- sanity
// ----------------------------------------------------------------------------------------------------

TEST_F(LoaderErrors, RewrittenCopyLoadsAndMatches) {
  write_safetensors(st(), tensors_);  // our writer's layout, not the original bytes
  const auto ref = reference_logits();
  EXPECT_TRUE(bit_identical(logits_of(dir_), ref));
}

// ---- the safetensors container
// ---------------------------------------------------------------------------------

TEST_F(LoaderErrors, FileShorterThanHeaderLength) {
  for (size_t n : {0, 1, 7}) {
    write_bytes(st(), std::string(n, '\x01'));
    expect_error({st(), "truncated"});
  }
}

TEST_F(LoaderErrors, DataCutShort) {
  const std::string full = test::read_file(st());
  write_bytes(st(), full.substr(0, full.size() - 1000));
  expect_error({st(), kWte, "past the end"});  // wte is the last tensor in the data section
}

TEST_F(LoaderErrors, HeaderCutShort) {
  const std::string full = test::read_file(st());
  write_bytes(st(), full.substr(0, 100));
  expect_error({st(), "header length", "past the end"});
}

TEST_F(LoaderErrors, HeaderLengthPastEof) {
  std::string bytes = test::read_file(st());
  const uint64_t n = bytes.size() - 7;
  std::memcpy(bytes.data(), &n, 8);
  write_bytes(st(), bytes);
  expect_error({st(), "header length", "past the end"});
}

TEST_F(LoaderErrors, HugeHeaderLength) {
  for (uint64_t n : {uint64_t{1} << 60, ~uint64_t{0}, ~uint64_t{0} - 7}) {
    std::string bytes = test::read_file(st());
    std::memcpy(bytes.data(), &n, 8);
    write_bytes(st(), bytes);
    expect_error({st(), "header length"});
  }
}

TEST_F(LoaderErrors, BadJsonHeader) {
  write_bytes(st(), serialize("{\"a\": {\"dtype\": \"F32\", ", concat_data(tensors_)));
  expect_error({st(), "not valid JSON"});
  write_bytes(st(), serialize(std::string("{\"a\"\0\0\0\0", 8), ""));
  expect_error({st(), "not valid JSON"});
}

TEST_F(LoaderErrors, HeaderNotAnObject) {
  for (const char* h : {"[1, 2, 3]", "42", "\"text\"", "null"}) {
    write_bytes(st(), serialize(h, concat_data(tensors_)));
    expect_error({st(), "header must be a JSON object"});
  }
}

TEST_F(LoaderErrors, DeeplyNestedHeader) {
  // Valid JSON that is not an object, nested deeper than any recursive parser's stack.
  const size_t depth = 1 << 20;
  write_bytes(st(), serialize(std::string(depth, '[') + std::string(depth, ']'), ""));
  expect_error({st(), "header must be a JSON object"});
  write_bytes(st(), serialize("{\"a\": " + std::string(depth, '['), ""));
  expect_error({st(), "not valid JSON"});
}

TEST_F(LoaderErrors, EntryNotAnObject) {
  write_safetensors(st(), tensors_, [](json& h) { h[kQ0] = json::array({1, 2}); });
  expect_error({st(), kQ0, "must be an object"});
}

TEST_F(LoaderErrors, EntryMissingField) {
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    write_safetensors(st(), tensors_, [&](json& h) { h[kQ0].erase(field); });
    expect_error({st(), kQ0, field});
  }
}

TEST_F(LoaderErrors, EntryFieldWrongType) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"dtype", 7},
      {"shape", "128x128"},
      {"shape", {128, -128}},
      {"shape", {128.5, 128}},
      {"data_offsets", {0}},
      {"data_offsets", {0, 1, 2}},
      {"data_offsets", {-4, 65536}},
      {"data_offsets", {0.0, 65536.0}},
      {"data_offsets", "0-65536"},
  };
  for (const auto& [field, value] : cases) {
    write_safetensors(st(), tensors_, [&](json& h) { h[kQ0][field] = value; });
    expect_error({st(), kQ0, field});
  }
}

TEST_F(LoaderErrors, ImplausibleShape) {
  write_safetensors(st(), tensors_, [](json& h) {
    h[kQ0]["shape"] = {uint64_t{1} << 32, uint64_t{1} << 32, uint64_t{1} << 32};
  });
  expect_error({st(), kQ0, "shape"});
  // A product that wraps to the right byte count must not pass: 2^62 * 2^2 = 2^64 == 0 (mod 2^64).
  write_safetensors(st(), tensors_, [](json& h) { h[kQ0]["shape"] = {uint64_t{1} << 62, 0}; });
  expect_error({st(), kQ0});
}

TEST_F(LoaderErrors, DataOffsetsReversed) {
  write_safetensors(st(), tensors_, [](json& h) {
    auto& o = h[kQ0]["data_offsets"];
    o = {o[1], o[0]};
  });
  expect_error({st(), kQ0, "reversed"});
}

TEST_F(LoaderErrors, DataOffsetsOutOfRange) {
  const uint64_t data_size = concat_data(tensors_).size();
  write_safetensors(st(), tensors_, [&](json& h) {
    h[kQ0]["data_offsets"] = {data_size, data_size + 65536};
  });
  expect_error({st(), kQ0, "past the end"});
  // begin + size overflowing 2^64 must not wrap around into range.
  write_safetensors(st(), tensors_, [&](json& h) {
    h[kQ0]["data_offsets"] = {~uint64_t{0} - 100, ~uint64_t{0}};
  });
  expect_error({st(), kQ0});
}

TEST_F(LoaderErrors, DataOffsetsOverlap) {
  write_safetensors(st(), tensors_, [](json& h) { h[kK0]["data_offsets"] = h[kQ0]["data_offsets"]; });
  expect_error({st(), kQ0, kK0, "overlap"});
  // Partial overlap.
  write_safetensors(st(), tensors_, [](json& h) {
    const uint64_t b = h[kQ0]["data_offsets"][0];
    h[kK0]["data_offsets"] = {b + 4, b + 4 + 65536};
  });
  expect_error({st(), kQ0, kK0, "overlap"});
}

TEST_F(LoaderErrors, DataOffsetsOverlapAcrossAnEmptyTensor) {
  // An empty tensor sorted between two overlapping ones must not hide the overlap.
  std::vector<Tensor> ts = tensors_;
  ts.push_back({"model.transformer.empty", "F32", {0}, ""});
  write_safetensors(st(), ts, [](json& h) {
    const uint64_t b = h[kQ0]["data_offsets"][0];
    h["model.transformer.empty"]["data_offsets"] = {b + 8, b + 8};
    h[kK0]["data_offsets"] = {b + 16, b + 16 + 65536};
  });
  expect_error({st(), kQ0, kK0, "overlap"});
}

TEST_F(LoaderErrors, DataOffsetsSpanNotMatchingShape) {
  write_safetensors(st(), tensors_, [](json& h) {
    const uint64_t b = h[kQ0]["data_offsets"][0];
    h[kQ0]["data_offsets"] = {b, b + 65536 - 4};
  });
  expect_error({st(), kQ0, "65532", "65536"});
  write_safetensors(st(), tensors_, [](json& h) { h[kQ0]["shape"] = {128, 129}; });
  expect_error({st(), kQ0, "[128, 129]"});
  write_safetensors(st(), tensors_, [](json& h) { h[kQ0]["dtype"] = "BF16"; });  // 2 bytes, not 4
  expect_error({st(), kQ0, "BF16"});
}

TEST_F(LoaderErrors, UnknownDtype) {
  for (const char* dt : {"Q4_K", "f32", ""}) {
    write_safetensors(st(), tensors_, [&](json& h) { h[kQ0]["dtype"] = dt; });
    expect_error({st(), kQ0, "unknown dtype"});
  }
}

TEST_F(LoaderErrors, UnsupportedDtype) {
  for (const char* dt : {"I8", "F64", "I64", "BOOL", "F8_E4M3"}) {
    write_safetensors(st(), tensors_, [&](json& h) { h[kQ0]["dtype"] = dt; });
    expect_error({st(), kQ0, dt, "not supported"});
  }
}

TEST_F(LoaderErrors, MissingTensor) {
  for (const char* name :
       {kLnF, kWte, "model.transformer.blocks.2.v_proj.weight", "model.transformer.ff_out.weight"}) {
    auto ts = tensors_;
    erase_tensor(ts, name);
    write_safetensors(st(), ts);
    expect_error({"missing tensor", name});
  }
}

TEST_F(LoaderErrors, ExtraTensor) {
  auto ts = tensors_;
  ts.push_back({"model.transformer.blocks.0.extra.weight", "F32", {4}, std::string(16, '\0')});
  write_safetensors(st(), ts);
  expect_error({st(), "unexpected tensor", "model.transformer.blocks.0.extra.weight"});
}

TEST_F(LoaderErrors, WrongShape) {
  auto ts = tensors_;
  Tensor* q = find(ts, kQ0);
  q->shape = {128, 64};
  q->bytes.resize(128 * 64 * 4);
  write_safetensors(st(), ts);
  expect_error({st(), kQ0, "[128, 64]", "[128, 128]"});

  ts = tensors_;
  Tensor* ln = find(ts, kLnF);
  ln->shape = {1, 128};
  write_safetensors(st(), ts);
  expect_error({st(), kLnF, "[1, 128]", "[128]"});
}

TEST_F(LoaderErrors, NoSafetensorsFile) {
  fs::remove(st());
  expect_error({dir_, "model.safetensors"});
}

TEST_F(LoaderErrors, SafetensorsIsADirectory) {
  fs::remove(st());
  fs::create_directory(st());
  expect_error({dir_, "model.safetensors"});
}

// ---- valid variants: unaligned data, BF16 / F16
// ------------------------------------------------------------------

TEST_F(LoaderErrors, UnpaddedHeaderAndOddOffsetsLoad) {
  // The spec does not require alignment: an unpadded header and a 1-byte gap put every tensor at an odd
  // address.
  auto ts = tensors_;
  json h = make_header(ts);
  for (auto& [name, e] : h.items())
    if (name != "__metadata__")
      e["data_offsets"] = {e["data_offsets"][0].get<uint64_t>() + 1,
                           e["data_offsets"][1].get<uint64_t>() + 1};
  std::string text = h.dump();
  if (text.size() % 2 == 0) text += ' ';  // odd header length
  write_bytes(st(), serialize(text, "x" + concat_data(ts), 1));
  EXPECT_TRUE(bit_identical(logits_of(dir_), reference_logits()));

  // Same with BF16 tensors.
  std::vector<Tensor> bf;
  for (const auto& t : tensors_) bf.push_back(converted(t, DType::kBF16));
  h = make_header(bf);
  for (auto& [name, e] : h.items())
    if (name != "__metadata__")
      e["data_offsets"] = {e["data_offsets"][0].get<uint64_t>() + 1,
                           e["data_offsets"][1].get<uint64_t>() + 1};
  text = h.dump();
  if (text.size() % 2 == 0) text += ' ';
  write_bytes(st(), serialize(text, "x" + concat_data(bf), 1));
  const auto unaligned = logits_of(dir_);
  write_safetensors(st(), bf);
  EXPECT_TRUE(bit_identical(unaligned, logits_of(dir_)));
}

class HalfPrecision : public LoaderErrors, public ::testing::WithParamInterface<DType> {};

TEST_P(HalfPrecision, LoadsAndMatchesRoundedF32) {
  const DType dt = GetParam();
  std::vector<Tensor> half, rounded;
  for (const auto& t : tensors_) {
    half.push_back(converted(t, dt));
    rounded.push_back(widened(half.back()));
  }
  // The half-precision checkpoint computes in f32 exactly like an f32 checkpoint holding the rounded weights.
  write_safetensors(st(), rounded);
  const auto want = logits_of(dir_);
  write_safetensors(st(), half);
  {
    auto m = Model::load(dir_, options());
    ASSERT_TRUE(m.ok()) << m.error();
  }
  const auto got = logits_of(dir_);
  EXPECT_TRUE(bit_identical(got, want)) << "max diff " << max_abs_diff(got, want);
  // And close to the original f32 logits (weight rounding only: 2^-8 relative for bf16, 2^-11 for f16).
  const auto ref = reference_logits();
  ASSERT_EQ(got.size(), ref.size());
  float scale = 0;
  for (float v : ref) scale = std::max(scale, std::abs(v));
  EXPECT_LT(max_abs_diff(got, ref), (dt == DType::kBF16 ? 0.05f : 0.01f) * scale);
  EXPECT_GT(max_abs_diff(got, ref), 0.0f);  // the rounding did happen
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfPrecision, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_F(LoaderErrors, MixedDtypesLoad) {
  auto ts = tensors_;
  *find(ts, kQ0) = converted(*find(ts, kQ0), DType::kBF16);
  *find(ts, kLnF) = converted(*find(ts, kLnF), DType::kF16);
  write_safetensors(st(), ts);
  EXPECT_EQ(logits_of(dir_).size(), 8u * 512u);
}

// ---- sharded checkpoints
// ---------------------------------------------------------------------------------------

class Sharded : public LoaderErrors {
 protected:
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
  std::string index_path() const { return dir_ + "/model.safetensors.index.json"; }

  // Splits the tiny model in two shards and writes the index; returns the weight_map.
  json shard(const std::function<void(json&)>& edit_weight_map = {}) {
    fs::remove(st());
    std::vector<Tensor> a(tensors_.begin(), tensors_.begin() + 13), b(tensors_.begin() + 13, tensors_.end());
    write_safetensors(dir_ + "/" + shard1, a);
    write_safetensors(dir_ + "/" + shard2, b);
    json wm = json::object();
    for (const auto& t : a) wm[t.name] = shard1;
    for (const auto& t : b) wm[t.name] = shard2;
    if (edit_weight_map) edit_weight_map(wm);
    write_bytes(
        index_path(),
        json{{"metadata", {{"total_size", concat_data(tensors_).size()}}}, {"weight_map", wm}}.dump(2));
    return wm;
  }
};

TEST_F(Sharded, LoadsBitIdenticalToSingleFile) {
  shard();
  EXPECT_TRUE(bit_identical(logits_of(dir_), reference_logits()));
}

TEST_F(Sharded, IndexNamesMissingShard) {
  shard();
  fs::remove(dir_ + "/" + shard2);
  expect_error({shard2, "cannot open"});
}

TEST_F(Sharded, TensorAbsentFromItsShard) {
  shard([&](json& wm) { wm[kWte] = shard1; });  // wte lives in shard 2
  expect_error({index_path(), kWte, shard1});
}

TEST_F(Sharded, ShardTensorNotInIndex) {
  shard([&](json& wm) { wm.erase(kLnF); });
  expect_error({shard2, kLnF, "not listed"});
}

TEST_F(Sharded, TensorInTwoShards) {
  shard();
  auto a = read_tensors(dir_ + "/" + shard1);
  a.push_back(*find(tensors_, kWte));  // also in shard 2, where the index maps it
  write_safetensors(dir_ + "/" + shard1, a);
  expect_error({shard1, kWte, shard2});
}

TEST_F(Sharded, EmptyWeightMap) {
  shard([](json& wm) { wm = json::object(); });
  expect_error({"missing tensor", kWte});
}

TEST_F(Sharded, PathOutsideDirectory) {
  for (const char* bad : {"../model-00002-of-00002.safetensors", "sub/x.safetensors", "/etc/passwd", ".."}) {
    shard([&](json& wm) { wm[kWte] = bad; });
    expect_error({index_path(), kWte, "outside the model directory"});
  }
}

TEST_F(Sharded, BadIndex) {
  shard();
  write_bytes(index_path(), "{\"weight_map\": ");
  expect_error({index_path(), "invalid JSON"});
  write_bytes(index_path(), "{\"metadata\": {}}");
  expect_error({index_path(), "weight_map"});
  write_bytes(index_path(), "[]");
  expect_error({index_path(), "weight_map"});
  write_bytes(index_path(), json{{"weight_map", {{kWte, 3}}}}.dump());
  expect_error({index_path(), kWte, "file name"});
}

TEST_F(Sharded, CorruptShard) {
  shard();
  const std::string p = dir_ + "/" + shard2;
  const std::string full = test::read_file(p);
  write_bytes(p, full.substr(0, full.size() - 4));
  expect_error({p, "past the end"});
}

// ---- config.json
// -------------------------------------------------------------------------------------------------

TEST_F(LoaderErrors, ConfigMissing) {
  fs::remove(config_path());
  expect_error({config_path(), "cannot open"});
}

TEST_F(LoaderErrors, ConfigIsADirectory) {
  fs::remove(config_path());
  fs::create_directory(config_path());
  expect_error({config_path(), "cannot open"});
}

TEST_F(LoaderErrors, ConfigBadJson) {
  write_bytes(config_path(), "{\"d_model\": 128,");
  expect_error({config_path(), "invalid JSON"});
  write_bytes(config_path(), "");
  expect_error({config_path(), "invalid JSON"});
  write_bytes(config_path(), "[1]");
  expect_error({config_path(), "JSON object"});
}

TEST_F(LoaderErrors, GenerationConfigBadJson) {
  write_bytes(dir_ + "/generation_config.json", "{");
  expect_error({dir_ + "/generation_config.json", "invalid JSON"});
  write_bytes(dir_ + "/generation_config.json", "3");
  expect_error({dir_ + "/generation_config.json", "JSON object"});
}

TEST_F(LoaderErrors, ConfigMissingField) {
  for (const char* field : {"d_model", "n_layers", "n_heads", "vocab_size"}) {
    edit_config([&](json& c) { c.erase(field); });
    expect_error({config_path(), field, "missing"});
    edit_config([&](json& c) { c[field] = nullptr; });
    expect_error({config_path(), field, "missing"});
    fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                  fs::copy_options::overwrite_existing);
  }
  edit_config([](json& c) {
    c.erase("mlp_hidden_size");
    c.erase("mlp_ratio");
  });
  expect_error({config_path(), "mlp_ratio", "missing"});
}

TEST_F(LoaderErrors, ConfigWrongType) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"d_model", "128"},         {"d_model", 128.5},
      {"n_layers", true},         {"n_heads", json::array()},
      {"vocab_size", {{"a", 1}}}, {"rope_theta", "big"},
      {"rms_norm_eps", false},    {"mask_token_id", 1.5},
      {"eos_token_id", "481"},    {"n_kv_heads", "4"},
      {"mlp_hidden_size", 384.0}, {"weight_tying", "no"},
      {"eos_token_id", {"a"}},    {"max_sequence_length", "4096"},
  };
  for (const auto& [field, value] : cases) {
    edit_config([&](json& c) { c[field] = value; });
    expect_error({config_path(), field});
    fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                  fs::copy_options::overwrite_existing);
  }
}

TEST_F(LoaderErrors, ConfigZeroOrNegativeSizes) {
  for (const char* field : {"d_model", "n_layers", "n_heads", "vocab_size", "n_kv_heads", "mlp_hidden_size",
                            "embedding_size", "max_sequence_length"}) {
    for (int v : {0, -4}) {
      edit_config([&](json& c) { c[field] = v; });
      expect_error({config_path(), field});
    }
    fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                  fs::copy_options::overwrite_existing);
  }
  for (double v : {0.0, -1.0}) {
    edit_config([&](json& c) { c["rope_theta"] = v; });
    expect_error({config_path(), "rope_theta"});
    edit_config([&](json& c) {
      c["rope_theta"] = 500000.0;
      c["rms_norm_eps"] = v;
    });
    expect_error({config_path(), "rms_norm_eps"});
    edit_config([&](json& c) { c["rms_norm_eps"] = 1e-5; });
  }
}

TEST_F(LoaderErrors, ConfigHugeSizes) {
  // Sizes whose products overflow int64 must fail cleanly (UBSan checks the arithmetic): the first tensor
  // whose shape they imply is named, with that shape.
  for (const char* field : {"d_model", "n_layers", "vocab_size", "mlp_hidden_size", "embedding_size"}) {
    edit_config([&](json& c) { c[field] = int64_t{1} << 62; });
    expect_error({"config.json"});
    fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                  fs::copy_options::overwrite_existing);
  }
  edit_config([](json& c) {
    c.erase("mlp_hidden_size");
    c["mlp_ratio"] = int64_t{1} << 62;
  });
  expect_error({config_path(), "mlp_ratio"});
  edit_config([](json& c) {
    c["mlp_ratio"] = 3;
    c["rope_theta"] = 1e300;
  });
  expect_error({config_path(), "rope_theta"});
}

TEST_F(LoaderErrors, ConfigHeadsNotDividing) {
  edit_config([](json& c) {
    c["n_heads"] = 3;
    c["n_kv_heads"] = 3;
  });
  expect_error({config_path(), "n_heads", "d_model"});
  edit_config([](json& c) {
    c["n_heads"] = 4;
    c["n_kv_heads"] = 3;
  });
  expect_error({config_path(), "n_kv_heads", "n_heads"});
  edit_config([](json& c) {
    c["n_heads"] = 128;  // head_dim 1: RoPE needs an even head_dim
    c["n_kv_heads"] = 128;
  });
  expect_error({config_path(), "n_heads", "head_dim"});
}

TEST_F(LoaderErrors, ConfigContradictsTensors) {
  fs::remove(dir_ + "/generation_config.json");  // its bos id 480 would be outside a 256 vocabulary
  edit_config([](json& c) {
    c["vocab_size"] = 256;
    c["embedding_size"] = 256;
    c["mask_token_id"] = 200;
    c["eos_token_id"] = 201;
    c["pad_token_id"] = 201;
  });
  expect_error({st(), kWte, "[512, 128]", "[256, 128]"});
  edit_config([](json& c) {
    c["vocab_size"] = 512;
    c["embedding_size"] = 1024;
  });
  expect_error({st(), kWte, "[512, 128]", "[1024, 128]"});
  edit_config([](json& c) { c["embedding_size"] = 256; });
  expect_error({config_path(), "embedding_size"});

  fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                fs::copy_options::overwrite_existing);
  edit_config([](json& c) { c["d_model"] = 64; });
  expect_error({st(), kWte, "[512, 128]", "[512, 64]"});
  edit_config([](json& c) {
    c["d_model"] = 128;
    c["mlp_hidden_size"] = 256;
  });
  expect_error({st(), "model.transformer.blocks.0.ff_proj.weight", "[384, 128]", "[256, 128]"});
  edit_config([](json& c) {
    c["mlp_hidden_size"] = 384;
    c["n_kv_heads"] = 2;
  });
  expect_error({st(), kK0, "[128, 128]", "[64, 128]"});
  edit_config([](json& c) {
    c["n_kv_heads"] = 4;
    c["n_layers"] = 2;
  });
  expect_error({st(), "unexpected tensor", "model.transformer.blocks.2."});
  edit_config([](json& c) { c["n_layers"] = 4; });
  expect_error({"missing tensor", "model.transformer.blocks.3."});
  edit_config([](json& c) {
    c["n_layers"] = 3;
    c["weight_tying"] = true;
  });
  expect_error({st(), "unexpected tensor", "model.transformer.ff_out.weight"});
}

TEST_F(LoaderErrors, UnsupportedArchitecture) {
  edit_config([](json& c) {
    c["architectures"] = {"GPT2LMHeadModel"};
    c["model_type"] = "gpt2";
  });
  // The message says what config.json asked for and what is supported.
  expect_error({config_path(), "unsupported architecture", "GPT2LMHeadModel", "gpt2", "llada", "dream"});
  edit_config([](json& c) {
    c.erase("architectures");
    c.erase("model_type");
  });
  expect_error({config_path(), "unsupported architecture"});
  edit_config([](json& c) {
    c["architectures"] = "LLaDAModelLM";
    c["model_type"] = 5;
  });
  expect_error({config_path(), "unsupported architecture"});
}

TEST_F(LoaderErrors, UnsupportedLladaOption) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"block_type", "sequential"},
      {"layer_norm_type", "default"},
      {"activation_type", "gelu"},
      {"alibi", true},
      {"rope", false},
      {"include_bias", true},
      {"attention_layer_norm", true},
      {"scale_logits", true},
      {"block_group_size", 2},
  };
  for (const auto& [field, value] : cases) {
    edit_config([&](json& c) { c[field] = value; });
    expect_error({config_path(), field, "not supported"});
    fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                  fs::copy_options::overwrite_existing);
  }
}

TEST_F(LoaderErrors, SpecialTokenIdsOutOfVocab) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"mask_token_id", 512},
      {"mask_token_id", -1},
      {"mask_token_id", int64_t{1} << 32},
      {"eos_token_id", 512},
      {"eos_token_id", {9999, 1}},
      {"eos_token_id", -7},
      {"pad_token_id", 100000},
      {"eos_token_id", int64_t{1} << 32},
      {"eot_token_id", 512},
  };
  for (const auto& [field, value] : cases) {
    edit_config([&](json& c) { c[field] = value; });
    expect_error({config_path(), field});
    fs::copy_file(test::data_path(std::string(kTiny) + "/config.json"), config_path(),
                  fs::copy_options::overwrite_existing);
  }
  // Ids from generation_config.json name that file.
  const std::string gen = dir_ + "/generation_config.json";
  edit_config([](json& c) { c.erase("eos_token_id"); });
  write_bytes(gen, json{{"eos_token_id", 4096}}.dump());
  expect_error({gen, "eos_token_id"});
  write_bytes(gen, json{{"bos_token_id", 600}}.dump());
  expect_error({gen, "bos_token_id"});
}

TEST_F(LoaderErrors, EotFromTokenizerJson) {
  const std::string tok = dir_ + "/tokenizer.json";
  write_bytes(tok, json{{"added_tokens", {{{"id", 9999}, {"content", "<|eot_id|>"}}}}}.dump());
  expect_error({tok, "<|eot_id|>", "9999"});
  write_bytes(tok, "{\"added_tokens\": [");
  expect_error({tok, "invalid JSON"});
  write_bytes(tok, json{{"added_tokens", {{{"id", 482}, {"content", "<|eot_id|>"}}}}}.dump());
  auto m = Model::load(dir_, options());
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m.value()->info().eot_id, 482);
}

TEST_F(LoaderErrors, SpecialTokenIdsAtTheEdgesLoad) {
  edit_config([](json& c) {
    c["mask_token_id"] = 511;
    c["eos_token_id"] = {0, 1};
    c.erase("pad_token_id");
  });
  auto m = Model::load(dir_, options());
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m.value()->info().mask_id, 511);
  EXPECT_EQ(m.value()->info().eos_id, 0);
  EXPECT_EQ(m.value()->info().pad_id, 0);
}

// The mixture-of-experts and block-diffusion families' config fields and expert tensors (LLaDA2: MoE, SDAR:
// block_size, SDAR-MoE: the Qwen3-MoE router and its layer rule, LLaDA-MoE: the softmax router without
// renormalisation, moe_layer_freq), through load and convert alike. Models by their path under oracle/.
TEST_F(LoaderErrors, BlockFamilyConfigFields) {
  using Cases = std::vector<std::pair<const char*, json>>;
  const std::vector<std::tuple<const char*, Cases, std::string>> models = {
      {"models/llada2_tiny_f32",
       Cases{{"n_group", 3},
             {"n_group", 8},
             {"topk_group", 0},
             {"topk_group", 3},
             {"num_experts_per_tok", 9},
             {"num_experts_per_tok", 5},
             {"num_shared_experts", -1},
             {"first_k_dense_replace", -1},
             {"routed_scaling_factor", 0},
             {"partial_rotary_factor", 0},
             {"score_function", "softmax"}},
       "model.layers.2.mlp.experts.5.up_proj.weight"},
      {"models/sdar_tiny_f32", Cases{{"block_size", 0}, {"mask_token_id", nullptr}}, ""},
      {"models/sdar_moe_tiny_f32",
       Cases{{"num_experts", nullptr},
             {"num_experts", 0},
             {"num_experts_per_tok", 9},
             {"moe_intermediate_size", 0},
             {"decoder_sparse_step", 2},
             {"mlp_only_layers", json::array({1})},
             {"mlp_only_layers", json::array({0, 2})},
             {"mlp_only_layers", "0"},
             {"shared_expert_intermediate_size", 64},
             {"block_size", 0}},
       "model.layers.1.mlp.experts.3.down_proj.weight"},
      {"ar/models/llada_moe_tiny",
       Cases{{"moe_layer_freq", nullptr},
             {"moe_layer_freq", json::array({1, 0})},  // a dense layer after a MoE one
             {"moe_layer_freq", json::array({1})},
             {"moe_layer_freq", json::array({1, 2})},
             {"moe_layer_freq", 2},
             {"moe_router_score_function", "sigmoid"},
             {"moe_router_enable_expert_bias", true},
             {"norm_topk_prob", true},
             {"routed_scaling_factor", 2.5},
             {"router_num_group", 2},
             {"router_topk_group", 2},
             {"shared_expert_intermediate_size", 32},
             {"num_experts_per_tok", 9},
             {"expert_intermediate_size", 0},
             {"dense_intermediate_size", 0},
             {"attention_bias", true},
             {"clip_qkv", 8.0},
             {"partial_rotary_factor", 0},
             {"head_dim", 32},
             {"hidden_act", "gelu"},
             {"mask_token_id", 512}},
       "model.layers.1.mlp.experts.5.up_proj.weight"},
  };
  int ran = 0;
  for (const auto& [model, cases, expert_tensor] : models) {
    const std::string source = test::data_path(std::string("oracle/") + model);
    const std::string sub = dir_ + "/" + fs::path(model).filename().string(), config = sub + "/config.json";
    fs::create_directories(sub);
    for (const auto& f : fs::directory_iterator(source))
      fs::copy_file(f.path(), sub + "/" + f.path().filename().string(), fs::copy_options::overwrite_existing);
    const json original = test::read_json(config);
    for (const auto& [field, value] : cases) {
      json c = original;
      c[field] = value;
      write_bytes(config, c.dump(2));
      expect_error({config, field}, sub);
      ++ran;
    }
    write_bytes(config, original.dump(2));
    if (!expert_tensor.empty()) {  // one expert's tensor missing
      auto ts = read_tensors(sub + "/model.safetensors");
      erase_tensor(ts, expert_tensor);
      write_safetensors(sub + "/model.safetensors", ts);
      expect_error({"missing tensor", expert_tensor}, sub);
    }
  }
  EXPECT_EQ(ran, 44);
}

// ---- the directory
// ---------------------------------------------------------------------------------------------

TEST_F(LoaderErrors, DirectoryMissing) {
  const std::string missing = dir_ + "/no_such_model";
  expect_error({missing, "not a directory"}, missing);
}

TEST_F(LoaderErrors, NotADirectory) {
  expect_error({config_path(), "not a directory"}, config_path());
  expect_error({st(), "not a directory"}, st());
}

}  // namespace
}  // namespace dllm
