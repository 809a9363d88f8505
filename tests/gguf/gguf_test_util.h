// Helpers for the GGUF tests: rewrite a GGUF with edits (through GgufWriter), raw little-endian byte building.
#pragma once

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace dllm::test {

struct TensorCopy {
  std::string name;
  std::vector<int64_t> dims;
  GgmlType type;
  std::vector<uint8_t> bytes;
};

// Copies src to dst in file order; edit may change the metadata and tensor list before writing.
inline void rewrite_gguf(const std::string& src, const std::string& dst,
                         const std::function<void(GgufWriter&, std::vector<TensorCopy>&)>& edit = {}) {
  GgufFile f(src);
  GgufWriter w;
  for (const auto& key : f.metadata_order()) w.set(key, f.metadata().at(key));
  std::vector<TensorCopy> tensors;
  for (const auto& t : f.tensors()) tensors.push_back({t.name, t.dims, t.type, {t.data, t.data + t.nbytes}});
  if (edit) edit(w, tensors);
  for (const auto& t : tensors) w.add_tensor(t.name, t.dims, t.type);
  w.write(dst, [&](size_t i, std::vector<uint8_t>& out) { out = tensors[i].bytes; });
}

// rewrite_gguf without one metadata key.
inline void rewrite_gguf_without_key(const std::string& src, const std::string& dst, const std::string& key) {
  GgufFile f(src);
  GgufWriter w;
  for (const auto& k : f.metadata_order())
    if (k != key) w.set(k, f.metadata().at(k));
  for (const auto& t : f.tensors()) w.add_tensor(t.name, t.dims, t.type);
  w.write(dst, [&](size_t i, std::vector<uint8_t>& out) {
    const auto& t = f.tensors()[i];
    out.assign(t.data, t.data + t.nbytes);
  });
}

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dllm_gguf_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Little-endian byte builder for hand-made (and deliberately broken) files.
struct RawBytes {
  std::string s;
  template <class T>
  RawBytes& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
    return *this;
  }
  RawBytes& str(const std::string& v) {
    put<uint64_t>(v.size());
    s += v;
    return *this;
  }
  RawBytes& pad(size_t align) {
    while (s.size() % align) s.push_back('\0');
    return *this;
  }
};

}  // namespace dllm::test
