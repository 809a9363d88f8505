// GGUF reader (ggml's model file format, versions 2 and 3; spec: ggml docs/gguf.md):
//   u32 magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x {string key, u32 value_type, value}, tensor_count x {string name, u32 n_dims, u64 ne[n_dims],
//   u32 ggml_type, u64 offset}, padding to general.alignment (default 32), tensor data.
// Strings are u64 length + bytes (no NUL); arrays are u32 element type + u64 count + elements; all
// little-endian. Every count, length and offset is validated against the file before it is used: a malformed
// file gives a dllm::Error naming the file and the key or tensor, never an out-of-bounds read or a huge
// allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/ggml_types.h"
#include "io/mapped_file.h"

namespace dllm {

// Metadata value types (gguf_type).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);

// One scalar: unsigned integers as uint64, signed as int64, floats as double.
using GgufScalar = std::variant<uint64_t, int64_t, double, bool, std::string>;

struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;       // kArray for arrays
  GgufValueType elem_type = GgufValueType::kUint8;  // element type of an array
  GgufScalar scalar;                                // when type != kArray
  std::vector<GgufScalar> array;                    // when type == kArray
};

// A tensor of the file. dims are ggml's ne order: dims[0] is the innermost (contiguous) dimension, so a
// PyTorch weight [out, in] is stored with dims {in, out}.
struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;            // relative to the data section
  const uint8_t* data = nullptr;  // inside the mapping
  size_t nbytes = 0;

  int64_t numel() const;
  std::string dims_string() const;  // "[128, 512]" (ne order)
};

class GgufFile {
 public:
  // Maps and validates the whole header; throws dllm::Error naming the file and the key or tensor.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Tensor bytes copied elsewhere need not stay resident (MappedFile::release).
  void release(const void* p, size_t n) const { file_.release(p, n); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // start of the tensor data in the file

  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<std::string>& metadata_order() const { return kv_order_; }  // keys in file order
  const std::vector<GgufTensor>& tensors() const { return tensors_; }           // file order
  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const GgufTensor* find_tensor(const std::string& name) const;

  // Typed access; the errors name the file, the key and the type found. Integers of any width convert when
  // the value fits; floats accept any float type.
  const GgufValue& get(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  std::optional<uint64_t> find_uint(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<bool> find_bool(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;

  [[noreturn]] void fail_key(const std::string& key, const std::string& why) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<std::string> kv_order_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// True when path is a regular file whose name ends in ".gguf" (what Model::load routes to the GGUF loader).
bool is_gguf_file(const std::string& path);

// The tokenizer stored in a GGUF (tokenizer.ggml.*), as llama.cpp's converter writes it. Everything a
// tokenizer needs to be built without tokenizer.json. Absent keys stay empty / -1.
struct GgufTokenizer {
  // Token types (llama_token_type): what tokenizer.ggml.token_type holds per token.
  enum TokenType : int32_t {
    kUndefined = 0,
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
  };

  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), "bert", ...
  std::string pre;    // tokenizer.ggml.pre: pre-tokenizer name ("gpt-2", "llama-bpe", "qwen2", ...)
  std::vector<std::string> tokens;   // id -> token text (byte-level BPE: GPT-2's byte-to-unicode alphabet)
  std::vector<std::string> merges;   // "left right", in priority order (BPE)
  std::vector<int32_t> token_types;  // id -> TokenType (empty when absent)
  std::vector<float> scores;         // id -> score (SentencePiece; empty when absent)
  int64_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1, sep_id = -1, pad_id = -1,
          cls_id = -1, mask_id = -1;
  std::optional<bool> add_bos, add_eos;  // tokenizer.ggml.add_bos_token / add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (SentencePiece)
  std::string chat_template;             // tokenizer.chat_template ("" when absent)
};

// Reads tokenizer.ggml.*; throws naming the key when a present value has the wrong type or an id is outside
// the token list. Returns nullopt when the file has no tokenizer.ggml.tokens.
std::optional<GgufTokenizer> read_gguf_tokenizer(const GgufFile& file);

}  // namespace dllm
