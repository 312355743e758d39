// The trainer's checkpoints (trainer.h): the restore phase (resume from
// train_dir's latest checkpoint, or warm start from --checkpoint_path), the
// saves, and what a failure says about them.

#include <glog/logging.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/device_update.h"
#include "slimtorch/train/moving_average.h"
#include "slimtorch/train/trainer.h"
#include "slimtorch/train/variables.h"
#include "train_state.h"

namespace slimtorch {
namespace {

bool AllFinite(const NamedTensors& vars, std::string* bad) {
  for (const auto& v : vars) {
    if (!torch::isfinite(v.tensor).all().item<bool>()) {
      *bad = v.name;
      return false;
    }
  }
  return true;
}

}  // namespace

void Trainer::Restore() {
  RunGenerator::Scope rng(*rng_);
  latest_ = ResumableCheckpoint(o_.train_dir);
  if (latest_) {
    if (!o_.checkpoint_path.empty()) {
      LOG(INFO) << "Ignoring --checkpoint_path because a checkpoint already "
                   "exists in "
                << o_.train_dir;
    }
    Resume(*latest_);
  } else if (!o_.checkpoint_path.empty()) {
    WarmStart();
  }
  if (!latest_ && o_.moving_average_decay != 0.0) {
    // Shadows start from the variables as training starts (after a warm
    // start: the restored values).
    averages_ = std::make_unique<ExponentialMovingAverage>(
        o_.moving_average_decay, AveragedVariables(), o_.moving_average_warmup);
  }
  position_ = input_.start_position;
  if (!input_.resume_state.empty()) {
    input_state_ = std::make_shared<const std::string>(input_.resume_state);
  }
}

namespace {

// Quantization-aware training from a float checkpoint: TF-Slim restores
// model variables only, and the ranges start afresh.
void LogAbsentRanges(const std::vector<std::string>& absent) {
  if (absent.empty()) return;
  LOG(INFO) << absent.size()
            << " quantization variables are not in the checkpoint (a float "
               "one): they start at TensorFlow's initial values and follow "
               "the training batches";
}

}  // namespace

NamedTensors Trainer::AveragedVariables() const {
  // TF-Slim averages slim.get_model_variables(); the quantization ranges are
  // not among them.
  if (net_->quantizer() == nullptr) return model_vars_;
  const std::vector<std::string> names = net_->quantizer()->VariableNames();
  const std::set<std::string> ranges(names.begin(), names.end());
  NamedTensors out;
  for (const NamedTensor& v : model_vars_) {
    if (ranges.count(v.name) == 0) out.push_back(v);
  }
  return out;
}

void Trainer::WarmStart() {
  RestoreOptions restore;
  restore.exclude_scopes = o_.checkpoint_exclude_scopes;
  restore.ignore_missing = o_.ignore_missing_vars;
  restore.hints.model_name = o_.model_name;
  restore.hints.scope_flags = true;  // train_image_classifier has them
  std::vector<std::string> absent;
  QuantizationRangesOptional(*net_, &restore, &absent);
  const RestoredCheckpoint ckpt = RestoreCheckpointFor(
      o_.checkpoint_path, *net_, restore, /*shadows=*/false);
  LOG(INFO) << "Fine-tuning from "
            << (ckpt.tensorflow ? "TensorFlow checkpoint " : "") << ckpt.path
            << " (" << ckpt.restored << " variables restored)";
  LogAbsentRanges(absent);
}

CheckpointData Trainer::ReadCheckpoint(const std::string& path) const {
  try {
    const OpenedCheckpoint opened = OpenCheckpoint(path);
    CheckpointData ckpt;
    if (opened.tensorflow()) {  // --checkpoint_format=tensorflow
      ckpt.tensors = FromTfLayouts(opened.tf().ReadAll(), *net_);
    } else {
      ckpt = opened.data();
    }
    return ckpt;
  } catch (const Error& e) {
    SLIM_FAIL("cannot resume from the latest checkpoint '", path, "' in ",
              o_.train_dir, ": ", e.what(), ". ",
              ResumeFromEarlierAdvice(o_.train_dir, path));
  }
}

void Trainer::Resume(const std::string& path) {
  CheckpointData ckpt = ReadCheckpoint(path);
  RestoreOptions restore;  // everything: a resume is not a warm start
  restore.hints.model_name = o_.model_name;
  restore.hints.checkpoint_flag = "--train_dir";
  std::vector<std::string> absent;
  QuantizationRangesOptional(*net_, &restore, &absent);
  RestoreVariables(model_vars_, ckpt, path, restore);
  LogAbsentRanges(absent);
  std::map<std::string, torch::Tensor> state;
  for (auto& t : ckpt.tensors) state[t.name] = t.tensor;
  try {
    optimizer_->LoadState(state);
  } catch (const Error& e) {
    SLIM_FAIL("cannot resume from '", path, "' with --optimizer=", o_.optimizer,
              ": ", e.what());
  }
  ReadResumeState(ckpt, path);
  if (o_.moving_average_decay != 0.0) {
    averages_ = std::make_unique<ExponentialMovingAverage>(
        o_.moving_average_decay, AveragedVariables(), o_.moving_average_warmup);
    if (!averages_->Load(ckpt, path)) {
      LOG(WARNING) << path << " has no moving averages (it was trained "
                   << "without --moving_average_decay); they start from the "
                   << "current variables";
    }
  }
  latest_step_ = global_step_;
  LOG(INFO) << "Resuming from " << path << " at global step " << global_step_;
}

void Trainer::ReadResumeState(const CheckpointData& ckpt,
                              const std::string& path) {
  TrainState state = ReadTrainState(ckpt, path, o_.batch_size);
  global_step_ = state.global_step;
  if (state.rng_state.defined()) rng_->set_state(state.rng_state);
  input_.start_position = state.input_position;
  if (state.input_state) input_.resume_state = *state.input_state;
}

// ------------------------------------------------------------ checkpoint

std::string Trainer::LastGoodCheckpoint() const {
  return latest_ ? StrCat("; the last good checkpoint is ", *latest_)
                 : std::string("; no checkpoint was written");
}

std::string Trainer::Stopped() const {
  const std::string stopped =
      StrCat("; training stopped at global step ", global_step_);
  if (!latest_) return stopped + "; no checkpoint was written";
  if (!CheckpointExists(*latest_)) {
    return StrCat(stopped, "; the last checkpoint written, ", *latest_,
                  ", is gone too");
  }
  return StrCat(stopped, "; the last good checkpoint is ", *latest_,
                " (the same command resumes from it)");
}

std::string Trainer::Save() {
  if (o_.replica != 0) return latest_.value_or("");  // replica 0 writes
  RunGenerator::Scope rng(*rng_);
  CheckGraphFinite();
  if (device_update_) device_update_->SyncState();  // Adam's beta powers
  std::string bad;
  SLIM_CHECK(AllFinite(model_vars_, &bad), "variable ", bad,
             " is not finite at global step ", global_step_,
             "; not saving a checkpoint");
  std::string path;
  try {
    path = manager_->Save(global_step_, CheckpointOf());
  } catch (const Error& e) {
    SLIM_FAIL("cannot save the checkpoint of global step ", global_step_, ": ",
              e.what());
  }
  latest_ = path;
  latest_step_ = global_step_;
  LOG(INFO) << "Saved checkpoint " << *latest_;
  return *latest_;
}

// The variables, optimizer slots, moving averages and the training state.
CheckpointData Trainer::CheckpointOf() {
  CheckpointData data;
  for (const auto& v : model_vars_) data.tensors.push_back(v);
  for (const auto& s : optimizer_->State()) data.tensors.push_back(s);
  if (averages_) {
    for (const auto& s : averages_->shadows()) data.tensors.push_back(s);
  }
  TrainState state;
  state.global_step = global_step_;
  state.input_position = position_;
  state.input_state = input_state_;
  state.rng_state = rng_->state();
  AppendTrainState(state, &data.tensors);
  data.metadata["model_name"] = o_.model_name;
  data.metadata["dataset_name"] = o_.dataset_name;
  data.metadata["optimizer"] = o_.optimizer;
  data.metadata["global_step"] = std::to_string(global_step_);
  if (tf_format_) data.tensors = ToTfLayouts(data.tensors, *net_);
  return data;
}

}  // namespace slimtorch
