// The checksums the hub publishes for its files, computed while the bytes arrive: an LFS file's ETag is the
// sha256 of its content; a small (git) file's ETag is its git blob id, sha1("blob <size>\0" + content).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dllm::hub {

class Digest {
 public:
  // kSha256 for a 64-hex ETag, kGitBlob for a 40-hex one (the blob's size must be known up front: git hashes
  // it first), kNone for any other ETag (a mirror's own): then only the size is checked.
  enum class Kind { kNone, kSha256, kGitBlob };
  static Kind kind_for_etag(const std::string& etag);

  Digest(Kind kind, uint64_t size);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, size_t n);
  std::string hex();  // lower-case hex; ends the digest ("" for kNone)
  Kind kind() const { return kind_; }
  const char* name() const;  // "sha256" | "git blob sha1" | "size"

 private:
  Kind kind_;
  void* ctx_ = nullptr;  // EVP_MD_CTX (OpenSSL's libcrypto, already linked for HTTPS)
};

// The hex digest of a whole file (tests, and checking a partial file's prefix on resume).
std::string sha256_hex(const std::string& bytes);

}  // namespace dllm::hub
