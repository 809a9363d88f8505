// GGUF v3 writer: metadata in insertion order, tensor infos, then the tensor data, each tensor aligned to
// general.alignment (32). Tensor bytes are produced one tensor at a time by a callback, so a converter never holds
// more than one tensor in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"

namespace dllm {

class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);  // replaces an existing key in place
  void set_uint32(const std::string& key, uint32_t v);
  void set_int32(const std::string& key, int32_t v);
  void set_float32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_int32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_float32_array(const std::string& key, const std::vector<float>& v);

  // dims in ggml order (dims[0] innermost). Returns the tensor's index.
  size_t add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type);
  size_t tensor_count() const { return tensors_.size(); }
  size_t tensor_bytes(size_t index) const;  // bytes the callback must produce for this tensor
  uint64_t total_bytes() const;             // size of the whole file

  // Writes the file. produce(i, out) fills out with exactly tensor_bytes(i) bytes; tensors are asked for in the
  // order they were added. Throws dllm::Error naming the path (the partial file is removed).
  using Producer = std::function<void(size_t index, std::vector<uint8_t>& out)>;
  void write(const std::string& path, const Producer& produce) const;

 private:
  struct Info {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    uint64_t offset, nbytes;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Info> tensors_;
  uint64_t alignment_ = 32;
  uint64_t data_size_ = 0;

  std::vector<uint8_t> header() const;
};

}  // namespace dllm
