#include "hub/digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace dllm::hub {

Digest::Kind Digest::kind_for_etag(const std::string& etag) {
  const bool hex = !etag.empty() && std::all_of(etag.begin(), etag.end(), [](unsigned char c) {
    return std::isxdigit(c) && !std::isupper(c);
  });
  if (hex && etag.size() == 64) return Kind::kSha256;
  if (hex && etag.size() == 40) return Kind::kGitBlob;
  return Kind::kNone;
}

Digest::Digest(Kind kind, uint64_t size) : kind_(kind) {
  if (kind_ == Kind::kNone) return;
  auto* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, kind_ == Kind::kSha256 ? EVP_sha256() : EVP_sha1(), nullptr) != 1)
    fail("libcrypto: cannot start a ", name(), " digest");
  ctx_ = ctx;
  if (kind_ == Kind::kGitBlob) {
    const std::string header = "blob " + std::to_string(size) + std::string(1, '\0');
    update(header.data(), header.size());
  }
}

Digest::~Digest() {
  if (ctx_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void Digest::update(const void* data, size_t n) {
  if (ctx_) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n);
}

std::string Digest::hex() {
  if (!ctx_) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += digits[md[i] >> 4];
    out += digits[md[i] & 15];
  }
  return out;
}

const char* Digest::name() const {
  switch (kind_) {
    case Kind::kSha256:
      return "sha256";
    case Kind::kGitBlob:
      return "git blob sha1";
    case Kind::kNone:
      break;
  }
  return "size";
}

std::string sha256_hex(const std::string& bytes) {
  Digest d(Digest::Kind::kSha256, bytes.size());
  d.update(bytes.data(), bytes.size());
  return d.hex();
}

}  // namespace dllm::hub
