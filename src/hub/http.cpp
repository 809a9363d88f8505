#include "hub/http.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

namespace dllm::hub {
namespace {

constexpr int kMaxRedirects = 10;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "scheme://host[:port]" of a URL; an error for anything but http(s).
std::string host_of(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) fail("'", url, "' is not an http(s) URL");
  const std::string scheme = lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https")
    fail("'", url, "': only http and https are supported (HF_ENDPOINT)");
  const size_t end = url.find_first_of("/?#", scheme_end + 3);
  const std::string host =
      url.substr(scheme_end + 3, end == std::string::npos ? std::string::npos : end - scheme_end - 3);
  if (host.empty()) fail("'", url, "' names no host");
  return scheme + "://" + lower(host);
}

// Location, absolute or relative to `from`.
std::string next_url(const std::string& from, const std::string& location) {
  if (location.find("://") != std::string::npos) return location;
  if (!location.empty() && location.front() == '/') return host_of(from) + location;
  const size_t query = from.find('?');
  const size_t slash = from.rfind('/', query);
  return from.substr(0, slash + 1) + location;
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// One request, no redirect followed: headers into `out`, then on_response (for a non-redirect) and the body.
struct Exchange {
  HttpResponse* out;
  const std::function<bool(const HttpResponse&)>* on_response;
  const std::function<bool(const char*, size_t)>* on_data;
  CURL* curl;
  bool headers_done = false, stopped = false;

  static size_t header(char* data, size_t size, size_t n, void* self_ptr) {
    auto& self = *static_cast<Exchange*>(self_ptr);
    std::string line(data, size * n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) {  // a status line starts a response (after a 1xx, another one)
      self.out->headers.clear();
      self.headers_done = false;
    } else if (line.empty()) {
      long status = 0;
      curl_easy_getinfo(self.curl, CURLINFO_RESPONSE_CODE, &status);
      self.out->status = static_cast<int>(status);
      if (status >= 200) {
        self.headers_done = true;
        if (!is_redirect(self.out->status) && self.on_response && !(*self.on_response)(*self.out)) {
          self.stopped = true;
          return 0;
        }
      }
    } else if (const size_t colon = line.find(':'); colon != std::string::npos) {
      size_t v = colon + 1;
      while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
      self.out->headers[lower(line.substr(0, colon))] = line.substr(v);
    }
    return size * n;
  }

  static size_t body(char* data, size_t size, size_t n, void* self_ptr) {
    auto& self = *static_cast<Exchange*>(self_ptr);
    if (is_redirect(self.out->status) || !self.on_data) return size * n;  // a redirect's body is not the file
    if (!(*self.on_data)(data, size * n)) {
      self.stopped = true;
      return 0;
    }
    return size * n;
  }
};

void perform(const std::string& url, bool head, const std::string& token, uint64_t offset, HttpResponse& out,
             const std::function<bool(const HttpResponse&)>* on_response,
             const std::function<bool(const char*, size_t)>* on_data) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (!curl) fail("libcurl: cannot start a request");
  Exchange ex{&out, on_response, on_data, curl};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "User-Agent: dllm/0.1");
  if (!token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  if (offset > 0)
    headers = curl_slist_append(headers, ("Range: bytes=" + std::to_string(offset) + "-").c_str());
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOBODY, head ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a transfer stalled for a minute is a dropped one
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Exchange::header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &ex);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Exchange::body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &ex);
  // As the curl tool and OpenSSL do: another certificate bundle from the environment.
  for (const char* var : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"})
    if (const char* v = std::getenv(var); v && *v) {
      curl_easy_setopt(curl, CURLOPT_CAINFO, v);
      break;
    }
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK && !ex.stopped) out.error = error[0] ? error : curl_easy_strerror(rc);
  if (rc == CURLE_PEER_FAILED_VERIFICATION)
    out.error = "the server's TLS certificate could not be verified (" + out.error +
                "); for a private CA, set SSL_CERT_FILE or CURL_CA_BUNDLE to its certificate file";
  if (!ex.headers_done && out.error.empty() && !ex.stopped) out.error = "no answer";
  if (!ex.headers_done) out.status = 0;
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
}

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
  const auto it = headers.find(lower(name));
  return it == headers.end() ? "" : it->second;
}

std::string url_escape(const std::string& s, bool keep_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

Http::Http(std::string token, const std::string& endpoint)
    : token_(std::move(token)), token_host_(host_of(endpoint)) {}

HttpResponse Http::head(const std::string& url) const {
  HttpResponse out;
  out.url = url;
  const std::string first_host = host_of(url);
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    const std::string host = host_of(out.url);
    perform(out.url, /*head=*/true, host == token_host_ ? token_ : "", 0, out, nullptr, nullptr);
    if (out.status == 0 || !is_redirect(out.status)) return out;
    const std::string next = next_url(out.url, out.header("Location"));
    if (host_of(next) != first_host) return out;  // the storage's URL: the caller GETs it
    out.url = next;
  }
  out.error = "too many redirects";
  out.status = 0;
  return out;
}

HttpResponse Http::get(const std::string& url) const {
  std::string body;
  HttpResponse out = get_range(
      url, 0, [](const HttpResponse&) { return true; },
      [&](const char* data, size_t n) {
        body.append(data, n);
        return body.size() < (64u << 20);  // a listing, not a model
      });
  out.body = std::move(body);
  return out;
}

HttpResponse Http::get_range(const std::string& url, uint64_t offset,
                             const std::function<bool(const HttpResponse&)>& on_response,
                             const std::function<bool(const char*, size_t)>& on_data) const {
  HttpResponse out;
  out.url = url;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    const std::string host = host_of(out.url);
    perform(out.url, /*head=*/false, host == token_host_ ? token_ : "", offset, out, &on_response, &on_data);
    if (out.status == 0 || !is_redirect(out.status)) return out;
    out.url = next_url(out.url, out.header("Location"));
  }
  out.error = "too many redirects";
  out.status = 0;
  return out;
}

}  // namespace dllm::hub
