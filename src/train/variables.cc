#include "slimtorch/train/variables.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "slimtorch/core/error.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/train/moving_average.h"

namespace slimtorch {

std::vector<std::string> SplitScopes(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t b = part.find_first_not_of(" \t");
    size_t e = part.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(part.substr(b, e - b + 1));
  }
  return out;
}

bool InScopes(const std::string& name, const std::vector<std::string>& scopes) {
  for (const auto& s : scopes) {
    if (name.compare(0, s.size(), s) == 0) return true;
  }
  return false;
}

namespace {

// One error listing every problem, or nothing when there is none.
void ThrowMismatch(const std::string& ckpt_path,
                   const std::vector<std::string>& problems,
                   const std::string& note) {
  if (problems.empty()) return;
  std::string msg = StrCat(
      "checkpoint '", ckpt_path, "' does not match the model (",
      problems.size(), " variable", problems.size() > 1 ? "s" : "", note, "):");
  for (const std::string& p : problems) msg += "\n  " + p;
  msg +=
      "\n(--checkpoint_exclude_scopes leaves variables out of the "
      "restore, e.g. the logits of a net fine-tuned on other classes; "
      "--ignore_missing_vars skips missing ones)";
  SLIM_FAIL(msg);
}

}  // namespace

int RestoreVariables(const NamedTensors& variables, const CheckpointData& ckpt,
                     const std::string& ckpt_path,
                     const RestoreOptions& options) {
  std::vector<std::string> problems;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  for (const auto& v : variables) {
    if (InScopes(v.name, options.exclude_scopes)) continue;
    torch::Tensor saved = ckpt.Find(v.name);
    if (!saved.defined()) {
      if (!options.ignore_missing) problems.push_back(v.name + " is missing");
      continue;
    }
    if (saved.sizes() != v.tensor.sizes()) {
      problems.push_back(StrCat(v.name, " has shape ", saved.sizes(),
                                " in the checkpoint, ", v.tensor.sizes(),
                                " in the model"));
      continue;
    }
    copies.emplace_back(v.tensor, saved);
  }
  ThrowMismatch(ckpt_path, problems, "");
  torch::NoGradGuard no_grad;
  for (auto& c : copies) c.first.copy_(c.second);
  return static_cast<int>(copies.size());
}

namespace {

// The model variable `name` is, or lies under ("<var>/<slot>"); nullptr
// when none.
const std::vector<int64_t>* BaseShape(
    const std::string& name,
    const std::map<std::string, std::vector<int64_t>>& shapes,
    std::string* base) {
  for (size_t end = name.size(); end != std::string::npos && end > 0;
       end = name.rfind('/', end - 1)) {
    auto it = shapes.find(name.substr(0, end));
    if (it != shapes.end()) {
      *base = it->first;
      return &it->second;
    }
  }
  return nullptr;
}

}  // namespace

NamedTensors ToTfLayouts(const NamedTensors& tensors, Net& net) {
  std::map<std::string, std::vector<int64_t>> ours;
  for (const NamedTensor& v : net.ModelVariables()) {
    ours[v.name] = v.tensor.sizes().vec();
  }
  const std::map<std::string, std::vector<int64_t>> tf = net.TfVariableShapes();
  NamedTensors out;
  for (const NamedTensor& t : tensors) {
    std::string base;
    const std::vector<int64_t>* shape = BaseShape(t.name, ours, &base);
    if (shape == nullptr || t.tensor.sizes().vec() != *shape) {
      out.push_back(t);
      continue;
    }
    const std::vector<int64_t>& tf_shape = tf.at(base);
    const int64_t mult =
        IsDepthwiseKernel(base) && tf_shape.size() == 4 ? tf_shape[3] : 1;
    out.push_back({t.name, ToTfLayout(base, t.tensor.detach(), mult)});
  }
  return out;
}

NamedTensors FromTfLayouts(const NamedTensors& tensors, Net& net) {
  const std::map<std::string, std::vector<int64_t>> tf = net.TfVariableShapes();
  NamedTensors out;
  for (const NamedTensor& t : tensors) {
    std::string base;
    const std::vector<int64_t>* shape = BaseShape(t.name, tf, &base);
    if (shape == nullptr || t.tensor.sizes().vec() != *shape) {
      out.push_back(t);
      continue;
    }
    out.push_back({t.name, FromTfLayout(base, t.tensor)});
  }
  return out;
}

namespace {

// What a TensorFlow checkpoint restores into `net`: (variable, saved name)
// pairs, after checking every fit; throws one error listing every problem.
std::vector<std::pair<NamedTensor, std::string>> PlanTfRestore(
    const TfCheckpointReader& reader, Net& net, const RestoreOptions& options,
    bool shadows) {
  const std::map<std::string, std::vector<int64_t>> tf_shapes =
      net.TfVariableShapes();
  std::vector<std::string> problems;
  std::vector<std::pair<NamedTensor, std::string>> plan;
  for (const NamedTensor& v : net.ModelVariables()) {
    if (InScopes(v.name, options.exclude_scopes)) continue;
    const std::string saved = shadows ? MovingAverageName(v.name) : v.name;
    const TfTensorInfo* info = reader.Find(saved);
    if (info == nullptr) {
      SLIM_CHECK(!shadows, "--moving_average_decay is set but checkpoint '",
                 reader.prefix(), "' has no moving averages (key '", saved,
                 "' not found); it was trained without "
                 "--moving_average_decay. Evaluate it without the flag.");
      if (!options.ignore_missing) problems.push_back(saved + " is missing");
      continue;
    }
    const std::vector<int64_t>& model = tf_shapes.at(v.name);
    if (info->shape != model) {
      problems.push_back(StrCat(
          saved, " has shape ", c10::IntArrayRef(info->shape),
          " in the checkpoint, ", c10::IntArrayRef(model), " in the model"));
      continue;
    }
    if (!info->supported) {
      problems.push_back(
          StrCat(saved, " has dtype ", TfDtypeName(info->tf_dtype)));
      continue;
    }
    plan.emplace_back(v, saved);
  }
  ThrowMismatch(reader.prefix(), problems, " (shapes in TensorFlow's layout)");
  return plan;
}

// The checkpoint's scalar global_step, if it has one.
c10::optional<int64_t> TfGlobalStep(const TfCheckpointReader& reader) {
  const TfTensorInfo* step = reader.Find("global_step");
  if (step == nullptr || !step->supported || !step->shape.empty()) {
    return c10::nullopt;
  }
  return reader.Read("global_step").to(torch::kLong).item<int64_t>();
}

}  // namespace

LoadedCheckpoint LoadCheckpointFor(const std::string& path_or_dir, Net& net,
                                   const RestoreOptions& options,
                                   bool shadows) {
  LoadedCheckpoint out;
  if (!FindTfCheckpoint(path_or_dir)) {
    out.path = ResolveCheckpointPath(path_or_dir);
    out.data = LoadCheckpoint(out.path);
    return out;
  }
  const TfCheckpointReader reader(path_or_dir);
  out.path = reader.prefix();
  out.tensorflow = true;
  for (const auto& p : PlanTfRestore(reader, net, options, shadows)) {
    out.data.tensors.push_back(
        {p.second, FromTfLayout(p.first.name, reader.Read(p.second))});
  }
  if (auto step = TfGlobalStep(reader)) {
    out.data.tensors.push_back({"global_step", torch::tensor(*step)});
  }
  out.data.metadata["format"] = reader.format() == TfCheckpointFormat::kV2
                                    ? "tensorflow-v2"
                                    : "tensorflow-v1";
  return out;
}

RestoredCheckpoint RestoreCheckpointFor(const std::string& path_or_dir,
                                        Net& net, const RestoreOptions& options,
                                        bool shadows) {
  RestoredCheckpoint out;
  if (!FindTfCheckpoint(path_or_dir)) {
    out.path = ResolveCheckpointPath(path_or_dir);
    const CheckpointData data = LoadCheckpoint(out.path);
    const NamedTensors vars = net.ModelVariables();
    if (shadows) {
      RestoreMovingAverages(vars, data, out.path);
      out.restored = static_cast<int>(vars.size());
    } else {
      out.restored = RestoreVariables(vars, data, out.path, options);
    }
    const torch::Tensor step = data.Find("global_step");
    if (step.defined() && step.numel() == 1) {
      out.global_step = step.item<int64_t>();
    }
    return out;
  }
  const TfCheckpointReader reader(path_or_dir);
  out.path = reader.prefix();
  out.tensorflow = true;
  auto plan = PlanTfRestore(reader, net, options, shadows);
  // Largest first, shared out to a few workers; each reads a tensor's
  // TensorFlow bytes into its own reused buffer and converts them from there
  // straight into the variable: no memory is allocated per tensor.
  std::sort(plan.begin(), plan.end(), [](const auto& a, const auto& b) {
    return a.first.tensor.numel() * a.first.tensor.element_size() >
           b.first.tensor.numel() * b.first.tensor.element_size();
  });
  std::atomic<size_t> next{0};
  std::atomic<int> restored{0};
  std::vector<std::exception_ptr> errors;
  std::mutex errors_mutex;
  auto work = [&] {
    try {
      torch::Tensor buffer = torch::empty({0}, torch::kUInt8);
      for (size_t k = next++; k < plan.size(); k = next++) {
        const NamedTensor& var = plan[k].first;
        const std::string& saved = plan[k].second;
        const TfTensorInfo& info = *reader.Find(saved);
        torch::Tensor tf;
        if (TorchDtypeOf(info.tf_dtype) != var.tensor.scalar_type()) {
          tf = reader.Read(saved);  // another dtype: converted by copy_
        } else {
          const int64_t bytes = var.tensor.numel() * var.tensor.element_size();
          if (buffer.numel() < bytes)
            buffer = torch::empty({bytes}, torch::kUInt8);
          tf = buffer.narrow(0, 0, bytes).view(var.tensor.scalar_type());
          reader.ReadInto(saved, tf);
        }
        FromTfLayoutInto(var.name, tf.view(info.shape), var.tensor);
        ++restored;
      }
    } catch (...) {
      next = plan.size();  // the others stop too
      std::lock_guard<std::mutex> lock(errors_mutex);
      errors.push_back(std::current_exception());
    }
  };
  const int workers = static_cast<int>(std::min<size_t>(
      plan.size(), std::max(1, std::min(4, at::get_num_threads()))));
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (!errors.empty()) std::rethrow_exception(errors.front());
  out.restored = restored;
  if (auto step = TfGlobalStep(reader)) out.global_step = *step;
  return out;
}

}  // namespace slimtorch
