// A read-only memory-mapped file: weights are used in place, never read into heap copies. The mapping asks
// for 2 MiB pages (MADV_HUGEPAGE), so that a file read from disk once maps fast in every later load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dllm {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws dllm::Error naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the mapped pages wholly inside [p, p + n) from this process (madvise MADV_DONTNEED): for bytes that
  // were copied elsewhere (repacked weights), so that they do not count twice in the resident size. A later
  // read faults them in again from the file, so this is only ever a hint.
  void release(const void* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dllm
