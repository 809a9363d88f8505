// The Hugging Face cache layout, as huggingface_hub writes it (so Python tools and dllm share one copy):
//   <cache>/models--org--name/refs/<revision>            the commit a branch or tag pointed to, as text
//   <cache>/models--org--name/snapshots/<commit>/<file>  a relative link to ../../blobs/<etag>
//   <cache>/models--org--name/blobs/<etag>               the content (<etag>.incomplete while downloading)
//   <cache>/.locks/models--org--name/<etag>.lock         held (flock) by whoever downloads that blob
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dllm::hub {

bool is_commit(const std::string& revision);  // 40 lower-case hex digits

class RepoCache {
 public:
  RepoCache(std::string cache_dir, std::string repo);
  const std::string& dir() const { return dir_; }
  // The commit a revision names: itself when it is one, else refs/<revision>; nullopt when unknown here.
  std::optional<std::string> commit_for(const std::string& revision) const;
  void write_ref(const std::string& revision, const std::string& commit) const;
  std::string snapshot_dir(const std::string& commit) const;
  std::string blob_path(const std::string& etag) const;
  std::string lock_path(const std::string& etag) const;
  // The files of a snapshot whose content is present (a link to a missing blob is not), relative, sorted.
  std::vector<std::string> snapshot_files(const std::string& commit) const;
  bool has_file(const std::string& commit, const std::string& file) const;
  // snapshots/<commit>/<file> -> the blob, as a relative link (replaced in one rename if it was there).
  void link(const std::string& commit, const std::string& file, const std::string& etag) const;
  // Creates the folders a download writes to; a cache that cannot be written is an error that says which.
  void make_writable_dirs() const;

 private:
  std::string cache_dir_, repo_, dir_;
};

// What the cache holds, for `dllm models`.
struct CachedRepo {
  std::string repo;
  std::map<std::string, std::string> refs;  // revision -> commit
  std::vector<std::string> snapshots;       // commits
  uint64_t bytes = 0;                       // the blobs' sizes (complete ones)
  uint64_t partial_bytes = 0;               // *.incomplete: downloads that a later run resumes
};
std::vector<CachedRepo> list_cache(const std::string& cache_dir);

// An exclusive flock on a lock file (the same lock huggingface_hub's filelock takes), released at
// destruction. on_wait is called once if another process holds it.
class FileLock {
 public:
  FileLock(const std::string& path, const std::function<void()>& on_wait);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace dllm::hub
