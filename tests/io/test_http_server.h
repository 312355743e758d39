#pragma once
// An in-process HTTP/1.1 server for tests: the downloader and the dataset
// converters are tested against it, never against the network.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace slimtorch {
namespace testing_util {

// A minimal HTTP/1.1 server on 127.0.0.1 (ephemeral port) serving
// in-memory files, one connection at a time, "Connection: close" on every
// answer. Behaviours are armed through the public atomics. The accept loop
// polls every 50 ms so the destructor stops it promptly.
class TestHttpServer {
 public:
  // Serves `files` (URL path → body, e.g. "/a.gz"); other paths get 404.
  explicit TestHttpServer(std::map<std::string, std::string> files)
      : files_(std::move(files)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(listen_fd_, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(
        ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
        0);
    EXPECT_EQ(::listen(listen_fd_, 8), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }

  ~TestHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }

  int port() const { return port_; }

  std::string Url(const std::string& path = "/file.bin") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  // Range header values of the requests seen so far ("" when absent).
  std::vector<std::string> ranges() {
    std::lock_guard<std::mutex> lock(mu_);
    return ranges_;
  }
  int num_requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(ranges_.size());
  }

  // Answer the next N requests with 500.
  std::atomic<int> fail_500{0};
  // Answer every request with 500.
  std::atomic<bool> always_500{false};
  // On the next full-body answer, send this many body bytes and close.
  std::atomic<int64_t> drop_after_bytes{-1};
  // Answer Range requests with 200 and the whole body.
  std::atomic<bool> ignore_range{false};

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      timeval tv{2, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      Serve(fd);
      ::close(fd);
    }
  }

  static void SendAll(int fd, const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n =
          ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  void Serve(int fd) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos &&
           request.size() < 65536) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    std::string path = request.substr(4, request.find(' ', 4) - 4);
    std::string range;
    for (const char* key : {"\r\nRange: ", "\r\nrange: "}) {
      size_t pos = request.find(key);
      if (pos != std::string::npos) {
        size_t start = pos + std::strlen(key);
        range = request.substr(start, request.find("\r\n", start) - start);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ranges_.push_back(range);
    }
    auto it = files_.find(path);
    if (it == files_.end()) {
      SendAll(fd, Head("404 Not Found", 9) + "not found");
      return;
    }
    const std::string& body = it->second;
    if (always_500 || fail_500 > 0) {
      if (fail_500 > 0) --fail_500;
      SendAll(fd, Head("500 Internal Server Error", 5) + "oops!");
      return;
    }
    int64_t from = 0;
    if (!range.empty() && !ignore_range) {
      long long v = 0;
      if (std::sscanf(range.c_str(), "bytes=%lld-", &v) == 1) from = v;
    }
    if (from > 0) {
      std::string part = body.substr(static_cast<size_t>(from));
      SendAll(fd, Head("206 Partial Content", part.size(),
                       "Content-Range: bytes " + std::to_string(from) + "-" +
                           std::to_string(body.size() - 1) + "/" +
                           std::to_string(body.size()) + "\r\n") +
                      part);
      return;
    }
    int64_t drop = drop_after_bytes.exchange(-1);
    std::string head = Head("200 OK", body.size());
    if (drop >= 0) {
      SendAll(fd, head + body.substr(0, static_cast<size_t>(drop)));
      return;  // closes mid-body
    }
    SendAll(fd, head + body);
  }

  static std::string Head(const std::string& status, size_t length,
                          const std::string& extra = "") {
    return "HTTP/1.1 " + status +
           "\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
           std::to_string(length) + "\r\n" + extra +
           "Connection: close\r\n\r\n";
  }

  const std::map<std::string, std::string> files_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> ranges_;
  std::thread thread_;
};

}  // namespace testing_util
}  // namespace slimtorch
