#include "slimtorch/io/download.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "slimtorch/core/error.h"
#include "slimtorch/core/fault_injection.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {
namespace fs = std::filesystem;

void GlobalInitCurl() {
  static std::once_flag once;
  std::call_once(once, [] {
    CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    SLIM_CHECK(rc == CURLE_OK,
               "curl_global_init failed: ", curl_easy_strerror(rc));
  });
}

std::string Basename(const std::string& url) {
  std::string s = url.substr(0, url.find_first_of("?#"));
  size_t slash = s.find_last_of('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

bool StartsWithNoCase(const std::string& s, const char* prefix) {
  size_t n = std::strlen(prefix);
  if (s.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) {
      return false;
    }
  }
  return true;
}

int64_t FileSizeOrZero(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

// State shared with the libcurl callbacks during one attempt.
struct Transfer {
  CURL* curl = nullptr;
  std::FILE* file = nullptr;
  std::string part_path;
  // The destination: the file the storage-fault seam (CheckFileFault) knows
  // the .part by, as it knows AtomicFileWriter's temporaries by their final
  // path.
  std::string dest_path;
  std::string name;
  bool is_http = false;
  // Bytes already in the .part file when the attempt started and a Range
  // request was sent for them; reset to 0 when the server ignores the range.
  int64_t resume_from = 0;
  bool first_write = true;
  // Content-Range start of the current response, -1 when absent.
  int64_t content_range_start = -1;
  std::string write_error;
  // A 206 answer whose Content-Range does not start at resume_from.
  bool bad_range = false;
  bool show_progress = false;
  int last_permille = -1;
};

size_t HeaderCallback(char* data, size_t size, size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * nitems);
  if (StartsWithNoCase(line, "http/")) {
    t->content_range_start = -1;  // a new response (redirect, 100-continue)
  } else if (StartsWithNoCase(line, "content-range:")) {
    int64_t start = -1;
    if (std::sscanf(line.c_str() + 14, " bytes %" SCNd64, &start) == 1) {
      t->content_range_start = start;
    }
  }
  return size * nitems;
}

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * nmemb;
  if (t->first_write) {
    t->first_write = false;
    if (t->is_http && t->resume_from > 0) {
      long code = 0;
      curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
      if (code != 206 || t->content_range_start != t->resume_from) {
        // The server sent the whole file (or another range): start over.
        if (std::fflush(t->file) != 0 ||
            ::ftruncate(::fileno(t->file), 0) != 0 ||
            std::fseek(t->file, 0, SEEK_SET) != 0) {
          t->write_error = StrCat("cannot truncate '", t->part_path,
                                  "': ", std::strerror(errno));
          return 0;
        }
        if (code == 206) {
          t->bad_range = true;
          return 0;
        }
        t->resume_from = 0;
      }
    }
  }
  size_t allowed = n;
  const int fault = CheckFileFault(FileOp::kWrite, t->dest_path, &allowed);
  if (allowed > 0 && std::fwrite(data, 1, allowed, t->file) != allowed) {
    t->write_error =
        StrCat("cannot write '", t->part_path, "': ", std::strerror(errno));
    return 0;
  }
  if (fault != 0) {
    t->write_error =
        StrCat("cannot write '", t->part_path, "': ", std::strerror(fault));
    return 0;
  }
  return n;
}

int ProgressCallback(void* user, curl_off_t dltotal, curl_off_t dlnow,
                     curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->show_progress || dltotal <= 0) return 0;
  double total = static_cast<double>(t->resume_from + dltotal);
  int permille = static_cast<int>(
      1000.0 * static_cast<double>(t->resume_from + dlnow) / total);
  if (permille != t->last_permille) {
    t->last_permille = permille;
    std::fprintf(stderr, "\r>> Downloading %s %.1f%%", t->name.c_str(),
                 permille / 10.0);
    std::fflush(stderr);
  }
  return 0;
}

bool IsTransientCurlError(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
      return true;
    default:
      return false;
  }
}

bool IsTransientHttpStatus(long code) {
  return code >= 500 || code == 408 || code == 429;
}

enum class Outcome { kDone, kRetry, kFail };

struct AttemptResult {
  Outcome outcome;
  std::string error;  // what happened, without the URL
};

// Sets up `c` to fetch `url` into `t` (its callbacks get `t`), with libcurl's
// message to `errbuf` (CURL_ERROR_SIZE bytes).
void SetUpTransfer(CURL* c, const std::string& url, char* errbuf,
                   Transfer* t, const DownloadOptions& options) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "slimtorch/0.1");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_s());
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, options.low_speed_limit_bytes());
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options.low_speed_time_s());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCallback);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, ProgressCallback);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
}

// What a failed write of the .part leaves: an HTTP download keeps its bytes
// for the next run (it continues them with a Range request); a file:// copy
// starts over each time, so its .part is removed.
std::string WriteFailure(const Transfer& t, const std::string& error) {
  if (!t.is_http || FileSizeOrZero(t.part_path) == 0) {
    std::remove(t.part_path.c_str());
    return error;
  }
  return StrCat(error, " (partial data kept in '", t.part_path,
                "' for the next run, which continues it)");
}

// A transfer that libcurl completed: done, unless the .part file could not
// be flushed to disk and closed (`write_errno`, 0 when it was).
AttemptResult Completed(const Transfer& t, int write_errno, long code) {
  if (write_errno != 0) {
    return {Outcome::kFail,
            WriteFailure(t, StrCat("cannot write '", t.part_path,
                                   "': ", std::strerror(write_errno)))};
  }
  if (t.first_write && t.is_http && t.resume_from > 0 && code != 206) {
    // An empty 200 body after a Range request: the file is empty.
    std::FILE* f = std::fopen(t.part_path.c_str(), "wb");
    if (f != nullptr) std::fclose(f);
  }
  return {Outcome::kDone, ""};
}

// A transfer that failed with `rc` (HTTP status `code`): retried when the
// cause may pass or the .part cannot be continued (then removed), else
// failed.
AttemptResult Failed(const Transfer& t, CURLcode rc, long code,
                     const char* errbuf, const std::string& range) {
  const std::string& part_path = t.part_path;
  if (!t.write_error.empty()) {
    return {Outcome::kFail, WriteFailure(t, t.write_error)};
  }
  if (t.bad_range) {
    std::remove(part_path.c_str());
    return {Outcome::kRetry,
            StrCat("server answered Range bytes=", range,
                   " with a range starting at ", t.content_range_start)};
  }
  if (rc == CURLE_HTTP_RETURNED_ERROR) {
    if (code == 416 && t.resume_from > 0) {
      // The .part is not a prefix the server can continue: start over.
      std::remove(part_path.c_str());
      return {Outcome::kRetry, StrCat("HTTP 416 for Range bytes=", range)};
    }
    std::string what = StrCat("HTTP status ", code);
    if (IsTransientHttpStatus(code)) return {Outcome::kRetry, what};
    std::remove(part_path.c_str());
    return {Outcome::kFail, what};
  }
  std::string what = errbuf[0] != '\0' ? std::string(errbuf)
                                       : std::string(curl_easy_strerror(rc));
  if (IsTransientCurlError(rc)) return {Outcome::kRetry, what};
  std::remove(part_path.c_str());
  return {Outcome::kFail, what};
}

AttemptResult Attempt(const std::string& url, const std::string& dest_path,
                      const std::string& name, bool is_http,
                      const DownloadOptions& options) {
  Transfer t;
  t.dest_path = dest_path;
  t.part_path = dest_path + ".part";
  const std::string& part_path = t.part_path;
  t.name = name;
  t.is_http = is_http;
  t.show_progress = options.show_progress() && ::isatty(::fileno(stderr));
  t.resume_from = is_http ? FileSizeOrZero(part_path) : 0;
  const int open_fault = CheckFileFault(FileOp::kOpen, dest_path);
  t.file = open_fault != 0
               ? nullptr
               : std::fopen(part_path.c_str(), t.resume_from > 0 ? "ab" : "wb");
  if (t.file == nullptr) {
    const int e = open_fault != 0 ? open_fault : errno;
    return {Outcome::kFail,
            StrCat("cannot create '", part_path, "': ", std::strerror(e))};
  }
  t.curl = curl_easy_init();
  if (t.curl == nullptr) {
    std::fclose(t.file);
    return {Outcome::kFail, "curl_easy_init failed"};
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = t.curl;
  SetUpTransfer(c, url, errbuf, &t, options);
  // CURLOPT_RANGE rather than CURLOPT_RESUME_FROM: libcurl then leaves a
  // 200 answer to WriteCallback instead of failing the transfer.
  std::string range;
  if (t.resume_from > 0) {
    range = StrCat(t.resume_from, "-");
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  }
  CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  if (t.show_progress && t.last_permille >= 0) std::fprintf(stderr, "\n");
  // A complete download reaches the disk before it is renamed into place,
  // so that a crash cannot leave a short file under the final name.
  int write_errno = 0;
  if (rc == CURLE_OK) {
    write_errno = CheckFileFault(FileOp::kFsync, dest_path);
    if (write_errno == 0 &&
        (std::fflush(t.file) != 0 || ::fsync(::fileno(t.file)) != 0)) {
      write_errno = errno;
    }
  }
  if (std::fclose(t.file) != 0 && write_errno == 0) write_errno = errno;
  if (rc == CURLE_OK) return Completed(t, write_errno, code);
  return Failed(t, rc, code, errbuf, range);
}

}  // namespace

bool IsFileUrl(const std::string& url) {
  return StartsWithNoCase(url, "file://");
}

std::string FileUrlToPath(const std::string& url) {
  SLIM_CHECK(IsFileUrl(url), "'", url, "' is not a file:// URL");
  std::string path = url.substr(7);
  if (StartsWithNoCase(path, "localhost/")) path = path.substr(9);
  SLIM_CHECK(!path.empty() && path[0] == '/', "file URL '", url,
             "' must name an absolute path (file:///dir/file)");
  return path;
}

void DownloadFile(const std::string& url, const std::string& dest_path,
                  const DownloadOptions& options) {
  bool is_http =
      StartsWithNoCase(url, "http://") || StartsWithNoCase(url, "https://");
  SLIM_CHECK(is_http || IsFileUrl(url), "cannot download '", url,
             "': unsupported URL scheme (expected http://, https:// or "
             "file://)");
  SLIM_CHECK(!dest_path.empty(), "cannot download '", url,
             "': empty destination path");
  SLIM_CHECK(options.max_attempts() >= 1, "cannot download '", url,
             "': max_attempts must be at least 1, got ",
             options.max_attempts());
  if (IsFileUrl(url)) {
    std::string path = FileUrlToPath(url);
    SLIM_CHECK(PathExists(path), "cannot download '", url, "': '", path,
               "' does not exist");
  }
  GlobalInitCurl();
  const std::string part_path = dest_path + ".part";
  const std::string name = Basename(url);
  long backoff_ms = options.initial_backoff_ms();
  AttemptResult result{Outcome::kRetry, ""};
  int attempt = 0;
  while (attempt < options.max_attempts()) {
    ++attempt;
    result = Attempt(url, dest_path, name, is_http, options);
    if (result.outcome != Outcome::kRetry) break;
    if (attempt < options.max_attempts()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms = std::min(backoff_ms * 2, options.max_backoff_ms());
    }
  }
  switch (result.outcome) {
    case Outcome::kDone:
      break;
    case Outcome::kFail:
      SLIM_FAIL("cannot download '", url, "': ", result.error);
    case Outcome::kRetry:
      SLIM_FAIL("cannot download '", url, "': ", result.error,
                " (gave up after ", attempt,
                attempt == 1 ? " attempt" : " attempts",
                FileSizeOrZero(part_path) > 0
                    ? StrCat("; partial data kept in '", part_path,
                             "' for the next run)")
                    : std::string(")"));
  }
  std::error_code ec;
  const int rename_fault = CheckFileFault(FileOp::kRename, dest_path);
  if (rename_fault != 0) {
    ec = std::error_code(rename_fault, std::generic_category());
  } else {
    fs::rename(part_path, dest_path, ec);
  }
  SLIM_CHECK(!ec, "cannot download '", url, "': cannot rename '", part_path,
             "' to '", dest_path, "': ", ec.message());
  SyncParentDir(dest_path);
}

}  // namespace slimtorch
