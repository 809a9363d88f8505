#include "io/gguf_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace dllm {

namespace {

class Bytes {
 public:
  template <class T>
  void put(T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void put_scalar(GgufValueType t, const GgufScalar& v) {
    switch (t) {
      case GgufValueType::kUint8: put<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(v))); return;
      case GgufValueType::kUint16: put<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(v))); return;
      case GgufValueType::kUint32: put<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(v))); return;
      case GgufValueType::kUint64: put<uint64_t>(std::get<uint64_t>(v)); return;
      case GgufValueType::kInt8: put<int8_t>(static_cast<int8_t>(std::get<int64_t>(v))); return;
      case GgufValueType::kInt16: put<int16_t>(static_cast<int16_t>(std::get<int64_t>(v))); return;
      case GgufValueType::kInt32: put<int32_t>(static_cast<int32_t>(std::get<int64_t>(v))); return;
      case GgufValueType::kInt64: put<int64_t>(std::get<int64_t>(v)); return;
      case GgufValueType::kFloat32: put<float>(static_cast<float>(std::get<double>(v))); return;
      case GgufValueType::kFloat64: put<double>(std::get<double>(v)); return;
      case GgufValueType::kBool: put<uint8_t>(std::get<bool>(v) ? 1 : 0); return;
      case GgufValueType::kString: put_string(std::get<std::string>(v)); return;
      case GgufValueType::kArray: break;
    }
    fail("GGUF writer: nested arrays are not supported");
  }
  std::vector<uint8_t> out;
};

GgufValue scalar(GgufValueType t, GgufScalar v) {
  GgufValue g;
  g.type = t;
  g.scalar = std::move(v);
  return g;
}

template <class T, class Conv>
GgufValue array(GgufValueType elem, const std::vector<T>& v, Conv conv) {
  GgufValue g;
  g.type = GgufValueType::kArray;
  g.elem_type = elem;
  g.array.reserve(v.size());
  for (const auto& x : v) g.array.push_back(conv(x));
  return g;
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::set_uint32(const std::string& k, uint32_t v) { set(k, scalar(GgufValueType::kUint32, uint64_t{v})); }
void GgufWriter::set_int32(const std::string& k, int32_t v) { set(k, scalar(GgufValueType::kInt32, int64_t{v})); }
void GgufWriter::set_float32(const std::string& k, float v) { set(k, scalar(GgufValueType::kFloat32, double{v})); }
void GgufWriter::set_bool(const std::string& k, bool v) { set(k, scalar(GgufValueType::kBool, v)); }
void GgufWriter::set_string(const std::string& k, const std::string& v) {
  set(k, scalar(GgufValueType::kString, v));
}
void GgufWriter::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  set(k, array(GgufValueType::kString, v, [](const std::string& s) { return GgufScalar{s}; }));
}
void GgufWriter::set_int32_array(const std::string& k, const std::vector<int32_t>& v) {
  set(k, array(GgufValueType::kInt32, v, [](int32_t x) { return GgufScalar{int64_t{x}}; }));
}
void GgufWriter::set_float32_array(const std::string& k, const std::vector<float>& v) {
  set(k, array(GgufValueType::kFloat32, v, [](float x) { return GgufScalar{double{x}}; }));
}

size_t GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (dims.empty() || dims.size() > 4 || n <= 0) fail("GGUF writer: tensor '", name, "' has a bad shape");
  const uint64_t bytes = ggml_row_bytes(type, dims[0]) * static_cast<uint64_t>(n / dims[0]);
  tensors_.push_back({name, std::move(dims), type, data_size_, bytes});
  data_size_ += (bytes + alignment_ - 1) / alignment_ * alignment_;
  return tensors_.size() - 1;
}

size_t GgufWriter::tensor_bytes(size_t index) const { return tensors_.at(index).nbytes; }

std::vector<uint8_t> GgufWriter::header() const {
  Bytes b;
  b.out.insert(b.out.end(), {'G', 'G', 'U', 'F'});
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors_.size());
  b.put<uint64_t>(kv_.size());
  for (const auto& [key, v] : kv_) {
    b.put_string(key);
    b.put<uint32_t>(static_cast<uint32_t>(v.type));
    if (v.type != GgufValueType::kArray) {
      b.put_scalar(v.type, v.scalar);
      continue;
    }
    b.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
    b.put<uint64_t>(v.array.size());
    for (const auto& e : v.array) b.put_scalar(v.elem_type, e);
  }
  for (const auto& t : tensors_) {
    b.put_string(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) b.put<uint64_t>(static_cast<uint64_t>(d));
    b.put<uint32_t>(static_cast<uint32_t>(t.type));
    b.put<uint64_t>(t.offset);
  }
  b.out.resize((b.out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  return std::move(b.out);
}

uint64_t GgufWriter::total_bytes() const { return header().size() + data_size_; }

void GgufWriter::write(const std::string& path, const Producer& produce) const {
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "wb"));
  if (!f) fail(path, ": cannot open for writing");
  auto put = [&](const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n) {
      f.reset();
      std::remove(path.c_str());
      fail(path, ": write failed (disk full?)");
    }
  };
  try {
    const auto head = header();
    put(head.data(), head.size());
    std::vector<uint8_t> buf;
    const std::vector<uint8_t> zeros(alignment_, 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      buf.clear();
      produce(i, buf);
      if (buf.size() != tensors_[i].nbytes)
        fail(path, ": tensor '", tensors_[i].name, "': produced ", buf.size(), " bytes, expected ",
             tensors_[i].nbytes);
      put(buf.data(), buf.size());
      put(zeros.data(), (alignment_ - buf.size() % alignment_) % alignment_);
    }
    if (std::fflush(f.get()) != 0) fail(path, ": write failed (disk full?)");
    // fsync: with delayed allocation a full disk may only show now, and it must show here, not at a load.
    if (::fsync(::fileno(f.get())) != 0) fail(path, ": write failed: ", std::strerror(errno));
  } catch (...) {
    f.reset();
    std::remove(path.c_str());
    throw;
  }
}

}  // namespace dllm
