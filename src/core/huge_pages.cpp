#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>

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

}  // namespace dllm
