// Memory for large weight buffers, on transparent huge pages where the kernel allows them.
#pragma once

#include <cstddef>
#include <memory>

namespace dllm {

// `bytes` of uninitialised memory, 64-byte aligned, freed when the last owner goes. From 1 MiB up it is
// 2 MiB-aligned and advised MADV_HUGEPAGE (Debian's THP default is "madvise"): the first touch of every
// 4 KiB page of fresh memory is a page fault, and on the VMs we run on a fault costs ~15 us, so filling
// 2.3 GB of 4 KiB pages took 7-9 s against ~1.5 s on 2 MiB pages. Throws dllm::Error when out of memory.
std::shared_ptr<void> huge_page_buffer(size_t bytes);

}  // namespace dllm
