#pragma once
// Downloads over http://, https:// and file:// with libcurl: retries with
// exponential backoff on transient failures, resumes interrupted downloads
// and never leaves a partial file under the destination name.

#include <string>

namespace slimtorch {

// Options for DownloadFile, with chainable setters:
//   DownloadOptions().max_attempts(3).connect_timeout_s(10)
struct DownloadOptions {
  // Seconds allowed to establish the connection (TCP + TLS). Default 30.
  DownloadOptions& connect_timeout_s(long v) {
    connect_timeout_s_ = v;
    return *this;
  }
  long connect_timeout_s() const { return connect_timeout_s_; }

  // An attempt is aborted when fewer than low_speed_limit_bytes per second
  // arrive for low_speed_time_s seconds in a row. Defaults 1 B/s for 60 s.
  DownloadOptions& low_speed_limit_bytes(long v) {
    low_speed_limit_bytes_ = v;
    return *this;
  }
  long low_speed_limit_bytes() const { return low_speed_limit_bytes_; }
  DownloadOptions& low_speed_time_s(long v) {
    low_speed_time_s_ = v;
    return *this;
  }
  long low_speed_time_s() const { return low_speed_time_s_; }

  // Attempts in total, the first included (1 = no retry). Default 5.
  DownloadOptions& max_attempts(int v) {
    max_attempts_ = v;
    return *this;
  }
  int max_attempts() const { return max_attempts_; }

  // Wait before the first retry; doubled after each further failure and
  // capped at max_backoff_ms. Defaults 1000 ms and 30000 ms.
  DownloadOptions& initial_backoff_ms(long v) {
    initial_backoff_ms_ = v;
    return *this;
  }
  long initial_backoff_ms() const { return initial_backoff_ms_; }
  DownloadOptions& max_backoff_ms(long v) {
    max_backoff_ms_ = v;
    return *this;
  }
  long max_backoff_ms() const { return max_backoff_ms_; }

  // Print "\r>> Downloading <name> 12.3%" to stderr, only when stderr is a
  // terminal. Default true.
  DownloadOptions& show_progress(bool v) {
    show_progress_ = v;
    return *this;
  }
  bool show_progress() const { return show_progress_; }

 private:
  long connect_timeout_s_ = 30;
  long low_speed_limit_bytes_ = 1;
  long low_speed_time_s_ = 60;
  int max_attempts_ = 5;
  long initial_backoff_ms_ = 1000;
  long max_backoff_ms_ = 30000;
  bool show_progress_ = true;
};

// Downloads `url` to `dest_path`, replacing an existing file there.
//
// Bytes go to "<dest_path>.part"; only a complete download is renamed onto
// `dest_path`. An existing .part (from an earlier attempt or an earlier run)
// is continued with an HTTP Range request; a server that answers 200 instead
// of 206 is followed from byte 0. Connection errors, timeouts, 5xx/408/429
// answers and bodies shorter than their Content-Length are retried up to
// max_attempts with backoff (the .part is kept); any other 4xx fails at once
// and removes the .part. file:// URLs are copied without resuming.
//
// Throws slimtorch::Error naming the URL and what happened ("HTTP 404",
// "connection refused", ...). Thread-safe for distinct `dest_path`s.
void DownloadFile(const std::string& url, const std::string& dest_path,
                  const DownloadOptions& options = DownloadOptions());

// The local path of a file:// URL ("file:///a/b" and "file://localhost/a/b"
// → "/a/b"); throws when `url` is not a file:// URL with an absolute path.
std::string FileUrlToPath(const std::string& url);

// True when `url` starts with "file://".
bool IsFileUrl(const std::string& url);

}  // namespace slimtorch
