#include "convert_util.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/download.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace internal {

std::string SourceBaseUrl(const std::string& source_url,
                          const std::string& default_url) {
  std::string base = source_url.empty() ? default_url : source_url;
  if (base.empty() || base.back() != '/') base += '/';
  return base;
}

std::string FetchSourceFile(const std::string& base_url,
                            const std::string& file, const std::string& dir,
                            std::vector<std::string>* downloaded) {
  if (IsFileUrl(base_url)) {
    std::string path = JoinPath(FileUrlToPath(base_url), file);
    SLIM_CHECK(PathExists(path), "'", path, "' does not exist (source '",
               base_url, "' must hold ", file, ")");
    return path;
  }
  std::string dest = JoinPath(dir, file);
  if (PathExists(dest)) {
    LOG(INFO) << "Using the earlier download '" << dest << "'";
  } else {
    DownloadFile(base_url + file, dest);
    std::error_code ec;
    LOG(INFO) << "Successfully downloaded " << file << " ("
              << std::filesystem::file_size(dest, ec) << " bytes)";
  }
  downloaded->push_back(dest);
  return dest;
}

void ParallelFor(int64_t n, int num_threads,
                 const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (num_threads <= 0) {
    num_threads = static_cast<int>(
        std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    try {
      constexpr int64_t kBatch = 16;
      for (;;) {
        if (failed.load()) return;
        const int64_t begin = next.fetch_add(kBatch);
        if (begin >= n) return;
        fn(begin, std::min(n, begin + kBatch));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < num_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

void WritePngExamplesTFRecord(const std::string& path, int height, int width,
                              int channels, const std::vector<int64_t>& labels,
                              const PixelFn& pixels, int num_threads) {
  const size_t image_bytes = static_cast<size_t>(height) * width * channels;
  const int64_t n = static_cast<int64_t>(labels.size());
  std::vector<std::string> records(n);
  ParallelFor(n, num_threads, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> hwc(image_bytes);
    for (int64_t i = begin; i < end; ++i) {
      pixels(i, hwc.data());
      ImageExample ex;
      ex.encoded = EncodePng(hwc.data(), height, width, channels);
      ex.format = "png";
      ex.label = labels[i];
      ex.height = height;
      ex.width = width;
      records[i] = EncodeImageExample(ex);
    }
  });

  TFRecordWriter writer(path);
  for (const std::string& record : records) writer.Write(record);
  writer.Close();
}

}  // namespace internal
}  // namespace slimtorch
