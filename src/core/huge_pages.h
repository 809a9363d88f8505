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

// `bytes` (64-byte aligned) for one of the many weight buffers a model holds, carved one after another from
// shared 32 MiB huge-page chunks: the small matrices of a layer (an 896 x 896 Q4_0 matrix is 0.45 MB) sit on
// 2 MiB pages too, where alone each would get 4 KiB pages, and a layer's matrices lie in load order. Token
// generation streams every weight once per token, and on 4 KiB pages that is a TLB miss (a nested page walk
// in a VM) and a cold restart of the hardware prefetcher every 4 KiB. A chunk is freed with the last buffer
// carved from it; buffers of 8 MiB and more get a huge_page_buffer of their own. Thread-safe.
std::shared_ptr<void> pooled_huge_page_buffer(size_t bytes);

}  // namespace dllm
