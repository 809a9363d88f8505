#include "hub/download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "core/error.h"
#include "hub/digest.h"

namespace dllm::hub {
namespace {

constexpr int kTries = 4;  // one request and three resumptions after dropped connections, per run

std::string normalize_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

bool parse_u64(const std::string& s, uint64_t* v) {
  if (s.empty()) return false;
  uint64_t x = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + static_cast<uint64_t>(c - '0');
  }
  *v = x;
  return true;
}

// An open partial file; one that a failed run leaves empty is removed (nothing to resume).
struct Partial {
  std::string path;
  int fd = -1;
  uint64_t size = 0;
  ~Partial() {
    if (fd >= 0) ::close(fd);
    if (size == 0) ::unlink(path.c_str());
  }
};

}  // namespace

void fail_http(const HttpResponse& r, const std::string& endpoint, const std::string& repo,
               const std::string& what) {
  const std::string code = r.header("X-Error-Code");
  if (r.status == 0)
    fail("cannot reach ", endpoint, " for ", what, ": ", r.error,
         r.error.find("certificate could not be verified") != std::string::npos
             ? ""
             : " (no network? --offline / HF_HUB_OFFLINE=1 uses only the cache)");
  if (code == "RepoNotFound" || (r.status == 404 && code.empty()))
    fail(what, ": no repository ", repo, " on ", endpoint, " (HTTP ", r.status,
         "; a private repository needs a token: HF_TOKEN or --hf-token)");
  if (code == "RevisionNotFound") fail(what, ": ", repo, " has no such revision (HTTP ", r.status, ")");
  if (code == "EntryNotFound") fail(what, ": no such file in ", repo, " (HTTP ", r.status, ")");
  if (r.status == 401)
    fail(what, ": HTTP 401 Unauthorized: ", repo,
         " is gated or private; give a token with access to it (HF_TOKEN or --hf-token; `huggingface-cli "
         "login` stores one that dllm reads too)");
  if (r.status == 403)
    fail(what, ": HTTP 403 Forbidden: ", repo,
         " is gated and this token has no access yet: accept its terms on its page (", endpoint, "/", repo,
         ") with the account of the token");
  fail(what, ": HTTP ", r.status, " from ", r.url);
}

FileMeta file_meta(const Http& http, const std::string& endpoint, const std::string& repo,
                   const std::string& commit, const std::string& file) {
  const std::string url = endpoint + "/" + repo + "/resolve/" + commit + "/" + url_escape(file, true);
  const HttpResponse r = http.head(url);
  const bool redirect = r.status >= 300 && r.status < 400;
  if (r.status == 0 || (r.status != 200 && !redirect)) fail_http(r, endpoint, repo, repo + "/" + file);
  FileMeta m;
  m.etag = normalize_etag(r.header("X-Linked-Etag"));
  if (m.etag.empty()) m.etag = normalize_etag(r.header("ETag"));
  if (m.etag.empty() || m.etag.find('/') != std::string::npos || m.etag.find("..") != std::string::npos)
    fail(repo, "/", file, ": the hub gave no usable ETag (", url, ")");
  std::string size = r.header("X-Linked-Size");
  if (size.empty() && !redirect) size = r.header("Content-Length");
  if (!parse_u64(size, &m.size)) fail(repo, "/", file, ": the hub gave no size (", url, ")");
  m.url = redirect ? r.header("Location") : r.url;
  if (redirect && m.url.find("://") == std::string::npos) {
    // A redirect relative to the hub that head() did not follow: resolve it against the endpoint's origin.
    const size_t scheme = endpoint.find("://");
    const size_t path = endpoint.find('/', scheme + 3);
    m.url = endpoint.substr(0, path) + (m.url.empty() || m.url.front() != '/' ? "/" : "") + m.url;
  }
  return m;
}

void fetch_file(const Http& http, const RepoCache& cache, const std::string& endpoint,
                const std::string& repo, const std::string& commit, const std::string& file,
                const Report& report) {
  if (cache.has_file(commit, file)) return;
  const FileMeta meta = file_meta(http, endpoint, repo, commit, file);
  cache.make_writable_dirs();
  const std::string blob = cache.blob_path(meta.etag);
  const std::string label = repo + "/" + file;
  auto present = [&] { return ::access(blob.c_str(), F_OK) == 0; };
  if (!present()) {
    FileLock lock(cache.lock_path(meta.etag), [&] {
      report.line("waiting for another download of " + label + " (" + blob + ".incomplete)");
    });
    if (!present()) {  // the other process may have finished it
      Partial part;
      part.path = blob + ".incomplete";
      part.fd = ::open(part.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (part.fd < 0) fail("cannot write ", part.path, ": ", std::strerror(errno));
      const off_t existing = ::lseek(part.fd, 0, SEEK_END);
      part.size = existing > 0 ? static_cast<uint64_t>(existing) : 0;
      const Digest::Kind kind = Digest::kind_for_etag(meta.etag);
      auto digest = std::make_unique<Digest>(kind, meta.size);
      auto restart = [&] {
        if (::ftruncate(part.fd, 0) != 0 || ::lseek(part.fd, 0, SEEK_SET) != 0)
          fail("cannot truncate ", part.path, ": ", std::strerror(errno));
        part.size = 0;
        digest = std::make_unique<Digest>(kind, meta.size);
      };
      if (part.size > meta.size) restart();
      if (part.size > 0) {  // the digest of what an earlier run left
        std::vector<char> buf(1 << 20);
        ::lseek(part.fd, 0, SEEK_SET);
        for (uint64_t left = part.size; left > 0;) {
          const ssize_t n = ::read(part.fd, buf.data(), std::min<uint64_t>(buf.size(), left));
          if (n <= 0) fail("cannot read ", part.path, ": ", std::strerror(errno));
          digest->update(buf.data(), static_cast<size_t>(n));
          left -= static_cast<uint64_t>(n);
        }
      }
      Progress progress(report, label, meta.size, part.size);
      int write_error = 0;
      std::string last_error;
      for (int attempt = 0; attempt < kTries && part.size < meta.size; ++attempt) {
        if (attempt > 0) {
          report.line(label + ": " + last_error + " at " + Progress::bytes(static_cast<double>(part.size)) +
                      " of " + Progress::bytes(static_cast<double>(meta.size)) + "; resuming (" +
                      std::to_string(attempt) + "/" + std::to_string(kTries - 1) + ")");
          std::this_thread::sleep_for(std::chrono::milliseconds(250 * attempt));
        }
        int bad_status = 0;
        std::string bad_range;
        const HttpResponse r = http.get_range(
            meta.url, part.size,
            [&](const HttpResponse& resp) {
              if (resp.status == 206) {
                const std::string want = "bytes " + std::to_string(part.size) + "-";
                if (resp.header("Content-Range").rfind(want, 0) != 0) {
                  bad_range = resp.header("Content-Range");
                  return false;
                }
                return true;
              }
              if (resp.status == 200) {  // the server ignored the Range: start over
                if (part.size > 0) restart();
                return true;
              }
              bad_status = resp.status;
              return false;
            },
            [&](const char* data, size_t n) {
              if (part.size + n > meta.size)
                return false;  // more than the hub said: stop, the check below fails
              for (size_t done = 0; done < n;) {
                const ssize_t w = ::write(part.fd, data + done, n - done);
                if (w < 0) {
                  if (errno == EINTR) continue;
                  write_error = errno;
                  return false;
                }
                done += static_cast<size_t>(w);
              }
              digest->update(data, n);
              part.size += n;
              progress.add(n);
              return true;
            });
        if (write_error)
          fail("cannot write ", part.path, ": ", std::strerror(write_error), " after ",
               Progress::bytes(static_cast<double>(part.size)), " of ", label,
               "; the partial file stays and the next run resumes it (free space or set HF_HUB_CACHE)");
        if (!bad_range.empty())
          fail(label, ": asked for bytes ", part.size, "- and got Content-Range '", bad_range, "' from ",
               r.url);
        if (bad_status == 416 && part.size > 0) {  // the partial file does not fit the file any more
          restart();
          last_error = "the server refused the range";
          continue;
        }
        if (bad_status != 0) fail_http(r, endpoint, repo, label);
        last_error = r.error.empty() ? "the connection ended early" : "connection lost (" + r.error + ")";
      }
      if (part.size != meta.size)
        fail(label, ": the download stopped at ", part.size, " of ", meta.size, " bytes (", last_error,
             "); run the same command again to resume from there");
      progress.finish();
      const std::string got = digest->hex();
      if (kind != Digest::Kind::kNone && got != meta.etag) {
        ::unlink(part.path.c_str());
        fail(label, ": the download's ", digest->name(), " is ", got, " but the hub's ETag says ", meta.etag,
             ": refused, nothing was kept (a corrupted transfer or a bad mirror; run again to retry)");
      }
      if (::fsync(part.fd) != 0) fail("cannot write ", part.path, ": ", std::strerror(errno));
      if (::rename(part.path.c_str(), blob.c_str()) != 0)
        fail("cannot move ", part.path, " into place: ", std::strerror(errno));
    }
  }
  cache.link(commit, file, meta.etag);
}

}  // namespace dllm::hub
