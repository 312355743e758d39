#include "slimtorch/train/train_options.h"

#include <string>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/batch_mixing.h"
#include "slimtorch/train/device_update.h"
#include "slimtorch/train/run_setup.h"

namespace slimtorch {

AugmentationDraws ParseAugmentationDraws(const std::string& flag) {
  if (flag == "auto") return AugmentationDraws::kAuto;
  if (flag == "host") return AugmentationDraws::kHost;
  SLIM_CHECK(flag == "device",
             "--augmentation_draws must be auto, host or device, not '", flag,
             "'");
  return AugmentationDraws::kDevice;
}

CheckpointFormat ParseCheckpointFormat(const std::string& flag) {
  if (flag == "tensorflow") return CheckpointFormat::kTensorFlow;
  SLIM_CHECK(flag == "safetensors",
             "--checkpoint_format must be safetensors or tensorflow, not '",
             flag, "'");
  return CheckpointFormat::kSafetensors;
}

void CheckTrainOptions(const TrainOptions& o) {
  CheckImageNet(o.model_name);
  CheckDatasetDir(o.dataset_dir);
  SLIM_CHECK(o.batch_size > 0, "--batch_size must be positive, got ",
             o.batch_size);
  SLIM_CHECK(o.log_every_n_steps > 0, "--log_every_n_steps must be positive");
  SLIM_CHECK(
      o.num_replicas >= 1 && o.replica >= 0 && o.replica < o.num_replicas,
      "replica ", o.replica, " of ", o.num_replicas, " is out of range");
  SLIM_CHECK(o.num_replicas == 1 || o.gradient_exchange != nullptr,
             o.num_replicas, " replicas need a gradient exchange");
  SLIM_CHECK(o.clip_gradient_norm >= 0, "--clip_gradient_norm must be >= 0 ",
             "(0: no clipping), got ", o.clip_gradient_norm);
  MixOptions mix = o.mix;
  mix.label_smoothing = o.label_smoothing;
  CheckMixOptions(mix);
  SLIM_CHECK(o.repeat.repeats >= 1,
             "--repeated_augmentation must be >= 1 (1: each example once), "
             "got ",
             o.repeat.repeats);
  SLIM_CHECK(
      !o.repeat.on() || o.augmentation_draws != AugmentationDraws::kDevice,
      "--augmentation_draws=device with --repeated_augmentation is not "
      "supported yet (auto and host draw on the CPU)");
  SLIM_CHECK(!o.sync_batch_norm || !o.quantize,
             "--sync_batch_norm with --quantize_delay is not supported yet");
  SLIM_CHECK(o.accumulate_gradients >= 1,
             "--accumulate_gradients must be >= 1 (1: no accumulation), got ",
             o.accumulate_gradients);
  if (!o.cuda_graph) return;
  SLIM_CHECK(o.accumulate_gradients == 1,
             "--cuda_graph with --accumulate_gradients=",
             o.accumulate_gradients, " is not supported yet");
  SLIM_CHECK(!o.mix.enabled(),
             "--cuda_graph with --mixup_alpha or "
             "--cutmix_alpha is not supported yet");
  SLIM_CHECK(!NetFactsOf(o.model_name).follows_global_step,
             "--cuda_graph with --model_name=", o.model_name,
             " is not supported yet (its drop path keeps a share of each cell "
             "that changes with the global step; a captured step would freeze "
             "it)");
  SLIM_CHECK(!o.quantize,
             "--cuda_graph with --quantize_delay is not supported yet (the "
             "fake quantization and --freeze_bn_delay start at a global step; "
             "a captured step would freeze them)");
  SLIM_CHECK(o.device.is_cuda(),
             "--cuda_graph needs a CUDA device; training runs on ", o.device);
  SLIM_CHECK(DeviceUpdate::Supports(o.optimizer),
             "--cuda_graph with --optimizer=", o.optimizer,
             " is not supported yet (every other optimizer is)");
  SLIM_CHECK(o.num_replicas == 1, "--cuda_graph with ", o.num_replicas,
             " replicas is not supported yet");
  SLIM_CHECK(o.precision != Precision::kFloat16,
             "--cuda_graph with --precision=fp16 is not supported yet (its "
             "loss scaling decides on the host)");
}

void CheckTrainableData(const DatasetSpec& spec, const TrainOptions& o,
                        int64_t num_samples) {
  const std::string description =
      o.dataset_dir.empty()
          ? std::string()
          : JoinPath(o.dataset_dir, kDatasetDescriptionFilename);
  const bool described = !description.empty() && PathExists(description);
  SLIM_CHECK(num_samples > 0, "split '", o.split_name, "' of dataset '",
             spec.name, "' has 0 examples",
             described ? StrCat(" (", description, ")") : std::string(),
             ": there is nothing to train on");
  const int64_t classes = spec.num_classes - o.labels_offset;
  if (classes >= 2) return;
  const std::string labels_path =
      o.dataset_dir.empty() ? std::string(kLabelsFilename)
                            : JoinPath(o.dataset_dir, kLabelsFilename);
  std::string labels;
  if (PathExists(labels_path)) {
    try {
      for (const auto& [id, name] : ReadLabelsFile(labels_path)) {
        labels += StrCat(labels.empty() ? "" : ", ", id, ":", name);
      }
    } catch (const std::exception&) {
    }
    labels = StrCat("labels file ", labels_path, ": ",
                    labels.empty() ? std::string("no label") : labels);
  } else {
    labels = StrCat("no labels file ", labels_path);
  }
  SLIM_FAIL("dataset '", spec.name, "' has ", spec.num_classes, " class",
            spec.num_classes == 1 ? "" : "es",
            o.labels_offset > 0
                ? StrCat(" (", classes,
                         " after --labels_offset=", o.labels_offset, ")")
                : std::string(),
            " (", labels,
            "): a classifier needs at least 2 classes; with one its loss "
            "stays constant and it learns nothing",
            spec.name == kImageFolderDatasetName
                ? ". Give each class its own sub-folder of images and convert "
                  "again (download_and_convert_data "
                  "--dataset_name=image_folder)"
                : "");
}

}  // namespace slimtorch
