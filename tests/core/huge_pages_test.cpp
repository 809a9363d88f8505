// pooled_huge_page_buffer: small weight buffers carved one after another from shared 2 MiB-page chunks.
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

namespace dllm {
namespace {

uintptr_t address(const std::shared_ptr<void>& p) {
  return reinterpret_cast<uintptr_t>(p.get());
}

TEST(HugePagesTest, SmallBuffersAreCarvedOneAfterAnother) {
  constexpr size_t kMiB = size_t{1} << 20;
  std::vector<std::shared_ptr<void>> buffers;
  for (size_t bytes : {kMiB, size_t{100}, kMiB, size_t{1}}) buffers.push_back(pooled_huge_page_buffer(bytes));
  for (const auto& b : buffers) EXPECT_EQ(address(b) % 64, 0u);
  // Unless a chunk ended between them (then the next starts a new one), each follows the last, rounded to 64.
  const bool one_chunk = address(buffers[3]) - address(buffers[0]) < (size_t{32} << 20);
  if (one_chunk) {
    EXPECT_EQ(address(buffers[1]), address(buffers[0]) + kMiB);
    EXPECT_EQ(address(buffers[2]), address(buffers[1]) + 128);
    EXPECT_EQ(address(buffers[3]), address(buffers[2]) + kMiB);
  }
  // Writing one leaves its neighbours as they were.
  std::memset(buffers[0].get(), 1, kMiB);
  std::memset(buffers[1].get(), 2, 100);
  std::memset(buffers[2].get(), 3, kMiB);
  EXPECT_EQ(static_cast<unsigned char*>(buffers[0].get())[kMiB - 1], 1);
  EXPECT_EQ(static_cast<unsigned char*>(buffers[1].get())[99], 2);
  // 8 MiB and more: a buffer of its own, on 2 MiB boundaries.
  const auto big = pooled_huge_page_buffer(8 * kMiB);
  EXPECT_EQ(address(big) % (2 * kMiB), 0u);
}

TEST(HugePagesTest, ThreadsGetDisjointBuffers) {
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::vector<std::pair<uintptr_t, std::shared_ptr<void>>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&got, t] {
      for (int i = 0; i < kEach; ++i) {
        const size_t bytes = 64 + static_cast<size_t>((i * 7 + t) % 13) * 1000;
        auto b = pooled_huge_page_buffer(bytes);
        got[t].emplace_back(address(b) + bytes, std::move(b));
      }
    });
  for (auto& th : threads) th.join();
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end)
  for (const auto& per_thread : got)
    for (const auto& [end, b] : per_thread) ranges.emplace_back(address(b), end);
  ASSERT_EQ(ranges.size(), size_t{kThreads * kEach});
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "overlap";
}

TEST(HugePagesTest, SmallBuffersSitOnHugePages) {
  if (test::thp_off()) GTEST_SKIP() << "transparent huge pages are off here (" << test::thp_mode() << ")";
  constexpr size_t kBytes = size_t{4} << 20;  // two small buffers whose chunk's first 4 MiB get touched
  auto a = pooled_huge_page_buffer(kBytes / 2), b = pooled_huge_page_buffer(kBytes / 2);
  std::memset(a.get(), 1, kBytes / 2);
  std::memset(b.get(), 1, kBytes / 2);
  const long pooled_kb = test::smaps_kb(a.get(), "AnonHugePages");
  if (pooled_kb <= 0) {
    // The control: one 4 MiB huge_page_buffer. Without huge pages there either, the kernel had none to give.
    auto control = huge_page_buffer(kBytes);
    std::memset(control.get(), 1, kBytes);
    const long control_kb = test::smaps_kb(control.get(), "AnonHugePages");
    if (control_kb <= 0) GTEST_SKIP() << "the kernel gave no huge page to a 4 MiB buffer either";
    FAIL() << "pooled buffers on 4 KiB pages (AnonHugePages " << pooled_kb
           << " kB) where a huge_page_buffer got " << control_kb << " kB";
  }
  EXPECT_GE(pooled_kb, 2048);
}

}  // namespace
}  // namespace dllm
