#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

namespace dllm {

std::shared_ptr<void> huge_page_buffer(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kSmall = 64;
  // Below 1 MiB a huge page would waste more than it saves.
  const size_t align = bytes >= (size_t{1} << 20) ? kHuge : kSmall;
  const size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size > 0 ? size : align);
  if (!p) fail("out of memory: a weight buffer of ", bytes, " bytes");
  if (align == kHuge) ::madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the pages stay 4 KiB
  return std::shared_ptr<void>(p, std::free);
}

std::shared_ptr<void> pooled_huge_page_buffer(size_t bytes) {
  constexpr size_t kChunk = size_t{32} << 20, kAlign = 64;
  if (bytes >= kChunk / 4) return huge_page_buffer(bytes);
  static std::mutex mutex;
  static std::weak_ptr<void> chunk;  // the chunk being carved: alive while a buffer from it is
  static size_t used = 0;
  const size_t size = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<void> c = chunk.lock();
  if (!c || used + size > kChunk) {
    c = huge_page_buffer(kChunk);  // untouched pages of its tail cost no memory
    chunk = c;
    used = 0;
  }
  void* p = static_cast<char*>(c.get()) + used;
  used += size;
  return std::shared_ptr<void>(c, p);  // shares the chunk's ownership
}

}  // namespace dllm
