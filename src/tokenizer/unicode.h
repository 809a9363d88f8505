// Unicode normalization forms (NFC, NFD, NFKC, NFKD) on UTF-8 strings, from generated tables.
#pragma once

#include <string>
#include <string_view>

namespace dllm::tok {

enum class NormForm { NFC, NFD, NFKC, NFKD };

// s must be valid UTF-8.
std::string unicode_normalize(std::string_view s, NormForm form);

// The Unicode version of the normalization tables.
const char* unicode_tables_version();

}  // namespace dllm::tok
