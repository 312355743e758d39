// The photo input path alone: TFRecords of JPEGs → decode → inception or
// vgg preprocessing → batches, as training and evaluation run it, timed in
// images per second (bench/input/photo_input.sh runs it beside tf.data and
// torchvision).
//
//   build/bench/input_bench --file_pattern='/tmp/photos/tfrecord/*' \
//       --preprocessing_name=inception --is_training=true --image_size=224 \
//       --batch_size=32 --num_preprocessing_threads=2
//
// The last line printed is machine-readable: images_per_sec=<float>.

#include <gflags/gflags.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <limits>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/data/pipeline.h"
#include "tool_common.h"

DEFINE_string(file_pattern, "", "Glob of the TFRecord files to read.");
DEFINE_string(preprocessing_name, "inception",
              "Preprocessing registry name (inception, vgg, ...).");
DEFINE_bool(is_training, true,
            "Training input (shuffled, distorted) or evaluation input.");
DEFINE_int32(image_size, 224, "Square output size.");
DEFINE_int32(batch_size, 32, "Batch size.");
DEFINE_int32(num_preprocessing_threads, 4, "Decode/preprocess workers.");
DEFINE_int32(num_readers, 1, "Files read at a time (training).");
DEFINE_int32(warmup_batches, 5, "Batches taken before timing.");
DEFINE_int32(batches, 50, "Timed batches.");
DEFINE_int64(shuffle_buffer_size, 0, "0: 20 * batch_size.");
DEFINE_bool(fused, true,
            "The photo path (fused preprocessing, windowed JPEG decode); "
            "false times the generic per-image path.");
DEFINE_uint64(seed, 0, "Seed of shuffling and augmentation.");

namespace slimtorch {
namespace {

void Run() {
  SLIM_CHECK(FLAGS_batches > 0 && FLAGS_warmup_batches >= 0,
             "--batches must be positive and --warmup_batches >= 0");
  PipelineOptions o;
  o.files = Glob(FLAGS_file_pattern);
  SLIM_CHECK(!o.files.empty(), "--file_pattern='", FLAGS_file_pattern,
             "' matches no file");
  o.batch_size = FLAGS_batch_size;
  o.training = FLAGS_is_training;
  o.num_readers = FLAGS_num_readers;
  o.num_preprocessing_threads = FLAGS_num_preprocessing_threads;
  o.shuffle_buffer_size = FLAGS_shuffle_buffer_size;
  o.seed = FLAGS_seed;
  o.default_format = "jpg";
  o.num_classes = std::numeric_limits<int64_t>::max();
  PreprocessingOptions pre;
  pre.output_height = pre.output_width = FLAGS_image_size;
  pre.is_training = FLAGS_is_training;
  o.preprocess = GetPreprocessing(FLAGS_preprocessing_name, pre);
  if (FLAGS_fused) {
    o.photo = PhotoPreprocessing::Create(FLAGS_preprocessing_name, pre);
    SLIM_CHECK(o.photo != nullptr, "preprocessing '", FLAGS_preprocessing_name,
               "' has no fused photo form");
  }
  o.output_height = o.output_width = FLAGS_image_size;
  // An evaluation pass is finite: start a new one when it ends.
  auto pipeline = std::make_unique<Pipeline>(o);
  auto next = [&] {
    std::optional<Batch> b = pipeline->Next();
    if (!b) {
      pipeline = std::make_unique<Pipeline>(o);
      b = pipeline->Next();
    }
    return b->size();
  };
  for (int i = 0; i < FLAGS_warmup_batches; ++i) next();
  const auto start = std::chrono::steady_clock::now();
  int64_t images = 0;
  for (int i = 0; i < FLAGS_batches; ++i) images += next();
  const double secs = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  std::printf("input_bench preprocessing=%s training=%d threads=%d fused=%d "
              "batch=%d images=%lld seconds=%.3f\n",
              FLAGS_preprocessing_name.c_str(), FLAGS_is_training ? 1 : 0,
              FLAGS_num_preprocessing_threads, FLAGS_fused ? 1 : 0,
              FLAGS_batch_size, static_cast<long long>(images), secs);
  std::printf("images_per_sec=%.2f\n", images / secs);
}

}  // namespace
}  // namespace slimtorch

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(
      argc, argv, "Times the photo input pipeline in images per second.", [] {
        at::set_num_threads(1);  // the workers are the parallelism
        slimtorch::Run();
      });
}
