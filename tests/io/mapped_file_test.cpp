// MappedFile asks for 2 MiB pages: a file that comes from disk through it lands in the page cache in 2 MiB
// folios and is mapped whole (FilePmdMapped in /proc/self/smaps), which is what makes a later load's first
// touch of the weights ~20x cheaper (docs/reliability.md, "Cold start").
#include "io/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;

constexpr size_t kFileBytes = size_t{8} << 20;  // four 2 MiB folios

// Writes the file to disk and drops it from the page cache, so that the next read comes from disk.
// Returns false when the kernel kept some of it cached.
bool write_uncached(const fs::path& path) {
  {
    std::vector<char> bytes(kFileBytes);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + (i >> 12));
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  // mincore on a fresh mapping: which of the file's pages the page cache still holds.
  void* p = ::mmap(nullptr, kFileBytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  std::vector<unsigned char> resident(kFileBytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  bool none = ::mincore(p, kFileBytes, resident.data()) == 0;
  for (unsigned char r : resident) none = none && !(r & 1);
  ::munmap(p, kFileBytes);
  return none;
}

// Reads one byte of each 4 KiB page, then the mapping's FilePmdMapped (kB) from /proc/self/smaps.
long touch_and_read_pmd_kb(const uint8_t* data) {
  unsigned sum = 0;
  for (size_t i = 0; i < kFileBytes; i += 4096) sum += data[i];
  EXPECT_NE(sum, 0u);  // keeps the reads
  return test::smaps_kb(data, "FilePmdMapped");
}

TEST(MappedFileTest, FileReadFromDiskIsMappedIn2MiBPages) {
  if (test::thp_off())
    GTEST_SKIP() << "transparent huge pages are off here (" << test::thp_mode() << "): the hint cannot act";
  const fs::path path = fs::temp_directory_path() / ("dllm_mapped_file_test_" + std::to_string(::getpid()));
  if (!write_uncached(path)) {
    fs::remove(path);
    GTEST_SKIP() << "the page cache kept " << path << " after POSIX_FADV_DONTNEED: cannot read it from disk";
  }
  // One read from disk through MappedFile, or through a plain mapping that asks for 2 MiB pages itself.
  const auto through_mapped_file = [&] {
    if (!write_uncached(path)) return -2L;
    MappedFile file(path.string());
    EXPECT_EQ(file.size(), kFileBytes);
    return touch_and_read_pmd_kb(file.data());
  };
  const auto through_control = [&] {
    if (!write_uncached(path)) return -2L;
    const int fd = ::open(path.c_str(), O_RDONLY);
    void* p = ::mmap(nullptr, kFileBytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return -3L;
    ::madvise(p, kFileBytes, MADV_HUGEPAGE);
    const long kb = touch_and_read_pmd_kb(static_cast<const uint8_t*>(p));
    ::munmap(p, kFileBytes);
    return kb;
  };
  long pmd_kb = through_mapped_file();
  if (pmd_kb <= 0) {
    // When the control gets no 2 MiB page either, this kernel or filesystem cannot cache files in 2 MiB
    // folios. When it does, MappedFile gets one more try (the kernel may have had no free 2 MiB page at
    // that moment) before the test fails.
    const long control_kb = through_control();
    if (control_kb <= 0) {
      fs::remove(path);
      GTEST_SKIP() << "this kernel or the filesystem of " << fs::temp_directory_path()
                   << " does not map file pages in 2 MiB pages (control mapping: FilePmdMapped " << control_kb
                   << " kB)";
    }
    pmd_kb = through_mapped_file();
    if (pmd_kb <= 0) {
      fs::remove(path);
      FAIL() << "MappedFile mapped no 2 MiB page (FilePmdMapped " << pmd_kb << " kB, twice) where a mapping "
             << "with MADV_HUGEPAGE got " << control_kb << " kB";
    }
  }
  fs::remove(path);
  EXPECT_GE(pmd_kb, 2048);
}

}  // namespace
}  // namespace dllm
