#include "slimtorch/data/input.h"

#include "slimtorch/core/error.h"

namespace slimtorch {

int64_t DefaultShuffleBufferSize(int64_t split_size, int64_t batch_size) {
  return split_size <= kFullShuffleMaxExamples ? split_size : 20 * batch_size;
}

int64_t InputChannels(const DatasetSpec& spec, const InputOptions& options) {
  PreprocessingOptions p;
  p.use_grayscale = options.use_grayscale;
  return PreprocessedChannels(spec.image_channels, p);
}

int64_t NumNetClasses(const DatasetSpec& spec, int64_t labels_offset) {
  SLIM_CHECK(labels_offset >= 0 && labels_offset < spec.num_classes,
             "--labels_offset=", labels_offset, " must be in [0, ",
             spec.num_classes, ") for dataset '", spec.name, "'");
  return spec.num_classes - labels_offset;
}

PipelineOptions MakePipelineOptions(const DatasetSpec& spec,
                                    const InputOptions& o) {
  PipelineOptions p;
  p.files = spec.SplitFiles(o.dataset_dir, o.split_name);
  p.batch_size = o.batch_size;
  p.training = o.training;
  p.num_readers = o.num_readers;
  p.num_preprocessing_threads = o.num_preprocessing_threads;
  p.shuffle_buffer_size =
      o.shuffle_buffer_size > 0
          ? o.shuffle_buffer_size
          : DefaultShuffleBufferSize(spec.SplitSize(o.split_name), o.batch_size);
  p.seed = o.seed;
  p.start_position = o.start_position;
  p.decode_channels = spec.image_channels;
  p.default_format = spec.default_format;
  p.num_classes = NumNetClasses(spec, o.labels_offset);
  p.labels_offset = o.labels_offset;
  PreprocessingOptions pre;
  pre.output_height = o.image_size;
  pre.output_width = o.image_size;
  pre.is_training = o.training;
  pre.use_grayscale = o.use_grayscale;
  p.preprocess = GetPreprocessing(o.preprocessing_name, pre);
  p.output_channels = PreprocessedChannels(spec.image_channels, pre);
  p.output_height = o.image_size;
  p.output_width = o.image_size;
  return p;
}

}  // namespace slimtorch
