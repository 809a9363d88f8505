// Unicode normalization data (generated into unicode_tables.cpp by gen_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dllm::tok::unicode_data {

struct CccEntry {
  uint32_t cp;
  uint8_t ccc;
};
// A full (recursive) decomposition: pool[offset, offset + length).
struct DecompEntry {
  uint32_t cp;
  uint32_t offset;
  uint32_t length;
};
// A primary composite: first + second -> composite (sorted by first, second).
struct CompEntry {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

extern const char* const kUnicodeVersion;
extern const CccEntry kCcc[];
extern const size_t kCccSize;
extern const uint32_t kCanonPool[];
extern const DecompEntry kCanon[];  // NFD of each code point that changes under NFD (Hangul excluded)
extern const size_t kCanonSize;
extern const uint32_t kCompatPool[];
extern const DecompEntry kCompat[];  // NFKD where it differs from NFD
extern const size_t kCompatSize;
extern const CompEntry kComp[];
extern const size_t kCompSize;

}  // namespace dllm::tok::unicode_data
