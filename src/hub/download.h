// One file of a repository into the cache: its metadata from the hub (HEAD on resolve/<commit>/<file>: ETag,
// size), then under the blob's lock a partial file (<etag>.incomplete), continued with a Range request after
// a dropped connection or an earlier run, checked against the ETag (sha256 for LFS files, the git blob id for
// the others) and the size, and only then renamed to blobs/<etag> and linked from the snapshot.
#pragma once

#include <string>

#include "hub/cache.h"
#include "hub/http.h"
#include "hub/progress.h"

namespace dllm::hub {

struct FileMeta {
  std::string etag;  // without quotes or W/
  uint64_t size = 0;
  std::string url;  // where the content is (the storage's URL when the hub redirects)
};

// HEAD on the file; an HTTP error is a message that says what to do (token, gated terms, unknown name).
FileMeta file_meta(const Http& http, const std::string& endpoint, const std::string& repo,
                   const std::string& commit, const std::string& file);

// The blob in place (downloaded unless it is already there) and the snapshot's link to it.
void fetch_file(const Http& http, const RepoCache& cache, const std::string& endpoint,
                const std::string& repo, const std::string& commit, const std::string& file,
                const Report& report);

// The message for a hub answer that is not a success: `what` names what was asked for.
[[noreturn]] void fail_http(const HttpResponse& r, const std::string& endpoint, const std::string& repo,
                            const std::string& what);

}  // namespace dllm::hub
