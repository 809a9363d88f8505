// HTTP(S) for the hub: requests with the token, redirects followed by hand (the token goes to the hub's own
// host only, never to the storage host a file redirects to, which may refuse a second credential), ranged
// downloads. The client is libcurl (Debian's libcurl4-openssl-dev): the download client everyone's tools rest
// on, with HTTPS on the system's certificates, HTTP/2, proxies from the environment (https_proxy, no_proxy,
// ...), stall timeouts, and redirect URLs kept byte for byte. cpp-httplib, which the server uses, was the
// first choice (no new dependency) and was dropped: Debian's 0.11 percent-decodes the Location header, which
// breaks the signed storage URLs the hub redirects large files to (their query holds %3B, %22, %2F ...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace dllm::hub {

struct HttpResponse {
  int status = 0;                              // 0: no answer (error says why)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // for head() and get(): empty / the whole body
  std::string url;                             // the URL that answered (after redirects)
  std::string error;                           // a transport failure ("" when the answer came whole)
  std::string header(const std::string& name) const;
};

// "%"-escapes all but letters, digits and "-._~" (and '/' when keep_slash).
std::string url_escape(const std::string& s, bool keep_slash);

class Http {
 public:
  // The token goes only to requests for the endpoint's own host (scheme://host[:port]/...).
  Http(std::string token, const std::string& endpoint);
  // HEAD; follows only redirects to the same host (a renamed repository), so the hub's own headers (ETag,
  // X-Linked-Size, X-Repo-Commit) are read before a file redirects to its storage.
  HttpResponse head(const std::string& url) const;
  // GET of a small body (JSON), following redirects.
  HttpResponse get(const std::string& url) const;
  // GET from byte `offset` (a Range request when > 0), following redirects. on_response sees the final status
  // and headers and returns false to stop; on_data gets the body's bytes and returns false to stop.
  HttpResponse get_range(const std::string& url, uint64_t offset,
                         const std::function<bool(const HttpResponse&)>& on_response,
                         const std::function<bool(const char*, size_t)>& on_data) const;

 private:
  std::string token_, token_host_;
};

}  // namespace dllm::hub
