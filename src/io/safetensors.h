// safetensors reader: u64 LE header length, JSON header {name: {dtype, shape, data_offsets}}, then raw data.
// Every offset and size is validated before any tensor byte is touched.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace dllm {

// A tensor that lives inside a mapped file (no copy).
struct TensorView {
  std::string name;
  std::string file;  // for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  std::string shape_string() const;  // "[128, 512]"
};

class SafetensorsFile {
 public:
  // Maps and validates the whole header; throws dllm::Error naming the file and the tensor or field.
  explicit SafetensorsFile(const std::string& path);

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorView> tensors_;
  // Tensors whose bytes are not aligned to their element size in the file (the format allows it) are copied here,
  // so that every TensorView::data is aligned for its dtype.
  std::vector<std::unique_ptr<uint64_t[]>> aligned_copies_;
};

}  // namespace dllm
