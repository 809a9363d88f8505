#include "hub/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dllm::hub {
namespace fs = std::filesystem;

namespace {

std::string folder_name(const std::string& repo) {
  std::string name = "models--" + repo;
  for (size_t at = name.find('/'); at != std::string::npos; at = name.find('/', at))
    name.replace(at, 1, "--");
  return name;
}

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    fail("cannot write the model cache: ", dir.string(), ": ", ec.message(),
         " (set HF_HUB_CACHE to a writable folder)");
}

}  // namespace

bool is_commit(const std::string& revision) {
  return revision.size() == 40 && std::all_of(revision.begin(), revision.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

RepoCache::RepoCache(std::string cache_dir, std::string repo)
    : cache_dir_(std::move(cache_dir)), repo_(std::move(repo)), dir_(cache_dir_ + "/" + folder_name(repo_)) {}

std::optional<std::string> RepoCache::commit_for(const std::string& revision) const {
  if (is_commit(revision)) return revision;
  std::ifstream in(dir_ + "/refs/" + revision);
  std::string commit;
  if (!in || !(in >> commit) || !is_commit(commit)) return std::nullopt;
  return commit;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (is_commit(revision)) return;  // huggingface_hub keeps refs for names only
  const fs::path ref = fs::path(dir_) / "refs" / revision;
  make_dirs(ref.parent_path());
  const std::string tmp = ref.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << commit;
    if (!out.flush()) fail("cannot write ", tmp, ": ", std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, ref, ec);
  if (ec) fail("cannot write ", ref.string(), ": ", ec.message());
}

std::string RepoCache::snapshot_dir(const std::string& commit) const {
  return dir_ + "/snapshots/" + commit;
}

std::string RepoCache::blob_path(const std::string& etag) const {
  return dir_ + "/blobs/" + etag;
}

std::string RepoCache::lock_path(const std::string& etag) const {
  return cache_dir_ + "/.locks/" + folder_name(repo_) + "/" + etag + ".lock";
}

std::vector<std::string> RepoCache::snapshot_files(const std::string& commit) const {
  std::vector<std::string> files;
  const fs::path root = snapshot_dir(commit);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (fs::is_regular_file(it->path(), ec))  // follows the link: a missing blob is no file
      files.push_back(it->path().lexically_relative(root).generic_string());
  std::sort(files.begin(), files.end());
  return files;
}

bool RepoCache::has_file(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  return fs::is_regular_file(fs::path(snapshot_dir(commit)) / file, ec);
}

void RepoCache::make_writable_dirs() const {
  make_dirs(fs::path(dir_) / "blobs");
  make_dirs(fs::path(dir_) / "refs");
  make_dirs(fs::path(lock_path("x")).parent_path());
  // A folder that exists but cannot be written to (a read-only cache) fails here, before anything is fetched.
  if (::access((dir_ + "/blobs").c_str(), W_OK) != 0)
    fail("cannot write the model cache: ", dir_, "/blobs: ", std::strerror(errno),
         " (set HF_HUB_CACHE to a writable folder)");
}

void RepoCache::link(const std::string& commit, const std::string& file, const std::string& etag) const {
  const fs::path at = fs::path(snapshot_dir(commit)) / file;
  make_dirs(at.parent_path());
  // ../../blobs/<etag> from snapshots/<commit>/, one more ../ per folder of the file's own path.
  std::string target = "../../blobs/" + etag;
  for (const char c : file)
    if (c == '/') target = "../" + target;
  const std::string tmp = at.string() + ".link" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0)
    fail("cannot link ", at.string(), " to its blob: ", std::strerror(errno));
  if (::rename(tmp.c_str(), at.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot link ", at.string(), " to its blob: ", std::strerror(err));
  }
}

std::vector<CachedRepo> list_cache(const std::string& cache_dir) {
  std::vector<CachedRepo> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("models--", 0) != 0 || !entry.is_directory(ec)) continue;
    CachedRepo r;
    r.repo = name.substr(8);
    if (const size_t sep = r.repo.find("--"); sep != std::string::npos) r.repo.replace(sep, 2, "/");
    std::error_code e2;
    const fs::path refs = entry.path() / "refs";
    for (auto it = fs::recursive_directory_iterator(refs, e2);
         !e2 && it != fs::recursive_directory_iterator(); it.increment(e2)) {
      if (!it->is_regular_file(e2)) continue;
      std::ifstream in(it->path());
      std::string commit;
      in >> commit;
      r.refs[it->path().lexically_relative(refs).generic_string()] = commit;
    }
    for (const auto& snap : fs::directory_iterator(entry.path() / "snapshots", e2))
      r.snapshots.push_back(snap.path().filename().string());
    std::sort(r.snapshots.begin(), r.snapshots.end());
    for (const auto& blob : fs::directory_iterator(entry.path() / "blobs", e2)) {
      if (!blob.is_regular_file(e2)) continue;
      const uint64_t size = blob.file_size(e2);
      (blob.path().extension() == ".incomplete" ? r.partial_bytes : r.bytes) += size;
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.repo < b.repo; });
  return out;
}

FileLock::FileLock(const std::string& path, const std::function<void()>& on_wait) {
  make_dirs(fs::path(path).parent_path());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot open the lock file ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  if (on_wait) on_wait();
  while (::flock(fd_, LOCK_EX) != 0)
    if (errno != EINTR) {
      const int err = errno;
      ::close(fd_);
      fail("cannot lock ", path, ": ", std::strerror(err));
    }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace dllm::hub
