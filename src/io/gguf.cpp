#include "io/gguf.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace dllm {

namespace {

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Upper bound on one key / name / string value; real files stay far below (the longest are chat templates).
constexpr uint64_t kMaxString = 64ull << 20;

// Reads the header fields in order; every read is bounds-checked and failures name the current item.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, std::string path) : data_(data), size_(size), path_(std::move(path)) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  void set_context(std::string what) { context_ = std::move(what); }

  template <class T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string() {
    const uint64_t len = read<uint64_t>();
    if (len > kMaxString) fail(path_, ": ", context_, ": string length ", len, " is implausibly large (corrupt file?)");
    need(len);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

  void need(uint64_t n) const {
    if (n > remaining())
      fail(path_, ": truncated file: ", context_, " needs ", n, " bytes at offset ", pos_, " but the file has ",
           size_, " bytes");
  }

  [[noreturn]] void error(const std::string& why) const { fail(path_, ": ", context_, ": ", why); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string path_;
  std::string context_ = "header";
};

size_t value_type_min_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kFloat64: case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray: return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

GgufScalar read_scalar(Cursor& c, GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return uint64_t{c.read<uint8_t>()};
    case GgufValueType::kInt8: return int64_t{c.read<int8_t>()};
    case GgufValueType::kUint16: return uint64_t{c.read<uint16_t>()};
    case GgufValueType::kInt16: return int64_t{c.read<int16_t>()};
    case GgufValueType::kUint32: return uint64_t{c.read<uint32_t>()};
    case GgufValueType::kInt32: return int64_t{c.read<int32_t>()};
    case GgufValueType::kUint64: return c.read<uint64_t>();
    case GgufValueType::kInt64: return c.read<int64_t>();
    case GgufValueType::kFloat32: return double{c.read<float>()};
    case GgufValueType::kFloat64: return c.read<double>();
    case GgufValueType::kBool: {
      const uint8_t b = c.read<uint8_t>();
      if (b > 1) c.error("bool value " + std::to_string(b) + " is neither 0 nor 1");
      return b == 1;
    }
    case GgufValueType::kString: return c.read_string();
    case GgufValueType::kArray: break;
  }
  c.error("nested arrays are not supported");
}

GgufValue read_value(Cursor& c, uint32_t raw_type) {
  if (!valid_value_type(raw_type)) c.error("unknown value type " + std::to_string(raw_type));
  GgufValue v;
  v.type = static_cast<GgufValueType>(raw_type);
  if (v.type != GgufValueType::kArray) {
    v.scalar = read_scalar(c, v.type);
    return v;
  }
  const uint32_t elem = c.read<uint32_t>();
  if (!valid_value_type(elem)) c.error("unknown array element type " + std::to_string(elem));
  v.elem_type = static_cast<GgufValueType>(elem);
  if (v.elem_type == GgufValueType::kArray) c.error("nested arrays are not supported");
  const uint64_t n = c.read<uint64_t>();
  // Each element takes at least this many bytes: a count the file cannot hold is rejected before allocating.
  if (n > c.remaining() / value_type_min_size(v.elem_type))
    c.error("array of " + std::to_string(n) + " elements runs past the end of the file");
  v.array.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) v.array.push_back(read_scalar(c, v.elem_type));
  return v;
}

std::string scalar_type_label(const GgufValue& v) {
  if (v.type != GgufValueType::kArray) return std::string(gguf_value_type_name(v.type));
  return "array of " + std::string(gguf_value_type_name(v.elem_type));
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  static constexpr std::string_view kNames[] = {"uint8", "int8",  "uint16", "int16", "uint32", "int32", "float32",
                                                "bool",  "string", "array", "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string GgufTensor::dims_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  Cursor c(file_.data(), file_.size(), path);
  if (file_.size() < 4 || std::memcmp(file_.data(), "GGUF", 4) != 0) {
    std::string got;
    for (size_t i = 0; i < std::min<size_t>(4, file_.size()); ++i) {
      const char ch = static_cast<char>(file_.data()[i]);
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", file_.data()[i]);
      got += (ch >= 32 && ch < 127) ? std::string(1, ch) : std::string(hex);
    }
    fail(path, ": not a GGUF file (magic '", got, "', expected 'GGUF')");
  }
  c.read<uint32_t>();
  c.set_context("version");
  version_ = c.read<uint32_t>();
  if (version_ != 2 && version_ != 3) {
    std::string hint;
    if (version_ == 1) hint = " (GGUF v1 is obsolete; reconvert the model)";
    else if ((version_ & 0xffff) == 0) hint = " (a big-endian GGUF? only little-endian files are supported)";
    fail(path, ": unsupported GGUF version ", version_, hint, "; supported: 2, 3");
  }
  c.set_context("tensor count");
  const uint64_t n_tensors = c.read<uint64_t>();
  c.set_context("metadata count");
  const uint64_t n_kv = c.read<uint64_t>();
  // Minimal encodings: a KV is >= 8 (key length) + 4 (type) + 1 bytes, a tensor info >= 8 + 4 + 4 + 8.
  if (n_kv > c.remaining() / 13)
    fail(path, ": truncated or corrupt file: metadata count ", n_kv, " is larger than the file can hold");
  if (n_tensors > (c.remaining() - n_kv * 13) / 24)
    fail(path, ": truncated or corrupt file: tensor count ", n_tensors, " is larger than the file can hold");

  for (uint64_t i = 0; i < n_kv; ++i) {
    c.set_context("metadata entry " + std::to_string(i));
    std::string key = c.read_string();
    c.set_context("metadata key '" + key + "'");
    if (kv_.count(key)) c.error("duplicate key");
    const uint32_t type = c.read<uint32_t>();
    kv_order_.push_back(key);
    kv_.emplace(std::move(key), read_value(c, type));
  }

  if (auto it = kv_.find("general.alignment"); it != kv_.end()) {
    const GgufValue& v = it->second;
    if (v.type != GgufValueType::kUint32)
      fail_key("general.alignment", "must be a uint32, got " + scalar_type_label(v));
    alignment_ = std::get<uint64_t>(v.scalar);
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      fail_key("general.alignment", "= " + std::to_string(alignment_) + " is not a power of two");
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    c.set_context("tensor info " + std::to_string(i));
    GgufTensor t;
    t.name = c.read_string();
    c.set_context("tensor '" + t.name + "'");
    if (tensor_index_.count(t.name)) c.error("duplicate tensor name");
    const uint32_t n_dims = c.read<uint32_t>();
    if (n_dims == 0 || n_dims > kMaxDims)
      c.error("has " + std::to_string(n_dims) + " dimensions (1 to " + std::to_string(kMaxDims) + " allowed)");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>();
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          static_cast<int64_t>(ne) > std::numeric_limits<int64_t>::max() / numel)
        c.error("dimension " + std::to_string(d) + " = " + std::to_string(ne) +
                " is zero or makes the element count overflow");
      t.dims.push_back(static_cast<int64_t>(ne));
      numel *= static_cast<int64_t>(ne);
    }
    const uint32_t type = c.read<uint32_t>();
    const GgmlTypeInfo* info = ggml_type_info(type);
    if (!info) {
      const std::string_view name = ggml_type_name(type);
      std::string supported;
      for (const auto& k : ggml_supported_types()) supported += (supported.empty() ? "" : ", ") + std::string(k.name);
      c.error(name.empty() ? "has unknown ggml type " + std::to_string(type) + " (supported: " + supported + ")"
                           : "has type " + std::string(name) + " (" + std::to_string(type) +
                                 "), which dllm does not read (supported: " + supported + ")");
    }
    t.type = info->type;
    if (t.dims[0] % info->block_elems != 0)
      c.error("row length " + std::to_string(t.dims[0]) + " is not a multiple of the " + std::string(info->name) +
              " block size " + std::to_string(info->block_elems));
    const uint64_t blocks = static_cast<uint64_t>(numel / info->block_elems);
    if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes) c.error("byte size overflows");
    t.nbytes = static_cast<size_t>(blocks * info->block_bytes);
    t.offset = c.read<uint64_t>();
    if (t.offset % alignment_ != 0)
      c.error("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
              std::to_string(alignment_));
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the header.
  const uint64_t header_end = c.pos();
  const uint64_t data_start = (header_end + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = file_.size();
  if (data_start > size && !tensors_.empty())
    fail(path, ": truncated file: the tensor data would start at offset ", data_start, " but the file has ", size,
         " bytes");
  data_offset_ = static_cast<size_t>(std::min(data_start, size));
  const uint64_t data_size = size - data_offset_;
  std::vector<const GgufTensor*> by_offset;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail(path, ": tensor '", t.name, "' (", ggml_type_name(static_cast<uint32_t>(t.type)), " ", t.dims_string(),
           ", ", t.nbytes, " bytes at data offset ", t.offset, ") runs past the end of the file (data section holds ",
           data_size, " bytes)");
    t.data = file_.data() + data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
      fail(path, ": tensors '", by_offset[i - 1]->name, "' and '", by_offset[i]->name, "' overlap in the data section");
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::fail_key(const std::string& key, const std::string& why) const {
  fail(path(), ": metadata '", key, "' ", why);
}

const GgufValue& GgufFile::get(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) fail_key(key, "is missing");
  return it->second;
}

uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray) {
    if (auto* u = std::get_if<uint64_t>(&v.scalar)) return *u;
    if (auto* i = std::get_if<int64_t>(&v.scalar)) {
      if (*i < 0) fail_key(key, "= " + std::to_string(*i) + " must be >= 0");
      return static_cast<uint64_t>(*i);
    }
  }
  fail_key(key, "must be an integer, got " + scalar_type_label(v));
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray) {
    if (auto* i = std::get_if<int64_t>(&v.scalar)) return *i;
    if (auto* u = std::get_if<uint64_t>(&v.scalar)) {
      if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail_key(key, "is out of range");
      return static_cast<int64_t>(*u);
    }
  }
  fail_key(key, "must be an integer, got " + scalar_type_label(v));
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray)
    if (auto* d = std::get_if<double>(&v.scalar)) return *d;
  fail_key(key, "must be a float, got " + scalar_type_label(v));
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray)
    if (auto* b = std::get_if<bool>(&v.scalar)) return *b;
  fail_key(key, "must be a bool, got " + scalar_type_label(v));
}

const std::string& GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray)
    if (auto* s = std::get_if<std::string>(&v.scalar)) return *s;
  fail_key(key, "must be a string, got " + scalar_type_label(v));
}

std::optional<uint64_t> GgufFile::find_uint(const std::string& key) const {
  return has(key) ? std::optional(get_uint(key)) : std::nullopt;
}
std::optional<double> GgufFile::find_float(const std::string& key) const {
  return has(key) ? std::optional(get_float(key)) : std::nullopt;
}
std::optional<bool> GgufFile::find_bool(const std::string& key) const {
  return has(key) ? std::optional(get_bool(key)) : std::nullopt;
}
std::optional<std::string> GgufFile::find_string(const std::string& key) const {
  return has(key) ? std::optional(get_string(key)) : std::nullopt;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || v.elem_type != GgufValueType::kString)
    fail_key(key, "must be an array of strings, got " + scalar_type_label(v));
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const auto& s : v.array) out.push_back(std::get<std::string>(s));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray) fail_key(key, "must be an array of integers, got " + scalar_type_label(v));
  std::vector<int64_t> out;
  out.reserve(v.array.size());
  for (const auto& s : v.array) {
    if (auto* i = std::get_if<int64_t>(&s)) out.push_back(*i);
    else if (auto* u = std::get_if<uint64_t>(&s); u && *u <= uint64_t(std::numeric_limits<int64_t>::max()))
      out.push_back(static_cast<int64_t>(*u));
    else fail_key(key, "must be an array of integers, got " + scalar_type_label(v));
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray ||
      (v.elem_type != GgufValueType::kFloat32 && v.elem_type != GgufValueType::kFloat64))
    fail_key(key, "must be an array of floats, got " + scalar_type_label(v));
  std::vector<double> out;
  out.reserve(v.array.size());
  for (const auto& s : v.array) out.push_back(std::get<double>(s));
  return out;
}

bool is_gguf_file(const std::string& path) {
  struct stat st {};
  return path.size() > 5 && path.ends_with(".gguf") && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<GgufTokenizer> read_gguf_tokenizer(const GgufFile& f) {
  if (!f.has("tokenizer.ggml.tokens")) return std::nullopt;
  GgufTokenizer t;
  t.tokens = f.get_string_array("tokenizer.ggml.tokens");
  const int64_t n = static_cast<int64_t>(t.tokens.size());
  t.model = f.find_string("tokenizer.ggml.model").value_or("");
  t.pre = f.find_string("tokenizer.ggml.pre").value_or("");
  if (f.has("tokenizer.ggml.merges")) t.merges = f.get_string_array("tokenizer.ggml.merges");
  if (f.has("tokenizer.ggml.token_type")) {
    for (int64_t v : f.get_int_array("tokenizer.ggml.token_type")) {
      if (v < 0 || v > GgufTokenizer::kByte)
        f.fail_key("tokenizer.ggml.token_type", "holds an unknown token type " + std::to_string(v));
      t.token_types.push_back(static_cast<int32_t>(v));
    }
    if (static_cast<int64_t>(t.token_types.size()) != n)
      f.fail_key("tokenizer.ggml.token_type", "has " + std::to_string(t.token_types.size()) +
                                                   " entries for " + std::to_string(n) + " tokens");
  }
  if (f.has("tokenizer.ggml.scores")) {
    for (double s : f.get_float_array("tokenizer.ggml.scores")) t.scores.push_back(static_cast<float>(s));
    if (static_cast<int64_t>(t.scores.size()) != n)
      f.fail_key("tokenizer.ggml.scores",
                 "has " + std::to_string(t.scores.size()) + " entries for " + std::to_string(n) + " tokens");
  }
  auto id = [&](const char* name, int64_t* out) {
    const std::string key = std::string("tokenizer.ggml.") + name;
    if (!f.has(key)) return;
    const uint64_t v = f.get_uint(key);
    if (v >= static_cast<uint64_t>(n))
      f.fail_key(key, "= " + std::to_string(v) + " is outside the " + std::to_string(n) + " tokens");
    *out = static_cast<int64_t>(v);
  };
  id("bos_token_id", &t.bos_id);
  id("eos_token_id", &t.eos_id);
  id("eot_token_id", &t.eot_id);
  id("eom_token_id", &t.eom_id);
  id("unknown_token_id", &t.unk_id);
  id("seperator_token_id", &t.sep_id);  // sic: llama.cpp's key
  id("padding_token_id", &t.pad_id);
  id("cls_token_id", &t.cls_id);
  id("mask_token_id", &t.mask_id);
  t.add_bos = f.find_bool("tokenizer.ggml.add_bos_token");
  t.add_eos = f.find_bool("tokenizer.ggml.add_eos_token");
  t.add_space_prefix = f.find_bool("tokenizer.ggml.add_space_prefix");
  t.chat_template = f.find_string("tokenizer.chat_template").value_or("");
  return t;
}

}  // namespace dllm
