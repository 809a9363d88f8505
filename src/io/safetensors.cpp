#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dllm {

namespace {

// The header is JSON text; real checkpoints keep it well under this. A larger value is a corrupt length.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::kF32;
  else if (s == "F16") *out = DType::kF16;
  else if (s == "BF16") *out = DType::kBF16;
  else return false;
  return true;
}

bool is_known_unsupported_dtype(const std::string& s) {
  static const char* kKnown[] = {"F64", "I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64", "BOOL",
                                 "F8_E4M3", "F8_E5M2"};
  return std::any_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return s == k; });
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const uint8_t* base = file_.data();
  const size_t size = file_.size();
  if (size < 8) fail(path, ": truncated safetensors file (", size, " bytes; the 8-byte header length is missing)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);  // little-endian on every supported host
  if (header_len > kMaxHeaderBytes) fail(path, ": header length ", header_len, " is implausibly large (corrupt file?)");
  if (header_len > size - 8)
    fail(path, ": header length ", header_len, " runs past the end of the file (", size, " bytes)");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(base + 8),
                                   reinterpret_cast<const char*>(base + 8 + header_len));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) fail(path, ": header must be a JSON object");

  const uint8_t* data_start = base + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const auto& entry = it.value();
    auto where = [&] { return path + ": tensor '" + name + "'"; };
    if (!entry.is_object()) fail(where(), ": entry must be an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail(where(), ": missing or non-string 'dtype'");
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail(where(), ": missing or non-array 'shape'");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      fail(where(), ": 'data_offsets' must be an array [begin, end]");

    TensorView t;
    t.name = name;
    t.file = path;
    const std::string dtype = entry["dtype"].get<std::string>();
    if (!parse_dtype(dtype, &t.dtype)) {
      if (is_known_unsupported_dtype(dtype)) fail(where(), ": dtype ", dtype, " is not supported (F32, F16, BF16 are)");
      fail(where(), ": unknown dtype '", dtype, "'");
    }
    uint64_t numel = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) fail(where(), ": shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (1ull << 40) || (dim && numel > (1ull << 40) / dim)) fail(where(), ": shape is implausibly large");
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(where(), ": data_offsets must be non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end) fail(where(), ": data_offsets [", begin, ", ", end, "] are reversed");
    if (end > data_size)
      fail(where(), ": data_offsets [", begin, ", ", end, "] run past the end of the data (", data_size,
           " bytes; file truncated?)");
    if (end - begin != numel * dtype_size(t.dtype))
      fail(where(), ": data_offsets span ", end - begin, " bytes but shape ", t.shape_string(), " of ", dtype,
           " needs ", numel * dtype_size(t.dtype));
    t.data = data_start + begin;
    t.nbytes = end - begin;
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) != 0) {
      aligned_copies_.push_back(std::make_unique<uint64_t[]>((t.nbytes + 7) / 8));
      std::memcpy(aligned_copies_.back().get(), t.data, t.nbytes);
      t.data = reinterpret_cast<const uint8_t*>(aligned_copies_.back().get());
    }
    auto [slot, inserted] = tensors_.emplace(name, std::move(t));
    spans.push_back({begin, end, &slot->first});
  }
  // Empty tensors occupy no bytes; among the others, each must start at or after the furthest end seen so far.
  std::erase_if(spans, [](const Span& s) { return s.begin == s.end; });
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1, furthest = 0; i < spans.size(); ++i) {
    if (spans[i].begin < spans[furthest].end)
      fail(path, ": tensors '", *spans[furthest].name, "' and '", *spans[i].name, "' overlap in the data section");
    if (spans[i].end > spans[furthest].end) furthest = i;
  }
}

}  // namespace dllm
