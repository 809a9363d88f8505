#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dllm {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail(path, ": mmap failed: ", std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
    // Weights come from the page cache, and mapping them page by page is most of a cold start: touching
    // a 2 GB file in 4 KiB pages takes ~1 s on our VMs, in 2 MiB pages 0.03-0.06 s. The hint makes the
    // kernel read what is not cached yet in 2 MiB folios, which this and every later load (another replica
    // or a restart) then map whole. Pages already cached in small folios stay as they are: the hint helps
    // from the next time the file comes from disk. Only a hint: THP off or a filesystem without large
    // folios keeps 4 KiB pages, with the same bytes.
    ::madvise(p, size_, MADV_HUGEPAGE);
  }
  ::close(fd);
}

void MappedFile::release(const void* p, size_t n) const {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (!data_ || begin < reinterpret_cast<uintptr_t>(data_) ||
      end > reinterpret_cast<uintptr_t>(data_) + size_ || last <= first)
    return;
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace dllm
