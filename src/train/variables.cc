#include "slimtorch/train/variables.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/checkpoint.h"
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

std::string VariableMismatch::ToString() const {
  if (missing) return name + " is missing";
  if (!dtype.empty()) return StrCat(name, " has dtype ", dtype);
  return StrCat(name, " has shape ", ShapeString(checkpoint),
                " in the checkpoint, ", ShapeString(model), " in the model");
}

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;
using OrderedShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// Lower case, letters and digits only: "MobilenetV1", "mobilenet_v1" →
// "mobilenetv1".
std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

std::string TopScope(const std::string& name) {
  return name.substr(0, name.find('/'));
}

// The top scope most of `names` share; "" when none has one. Our own
// bookkeeping ("global_step", "slimtorch/...") does not count.
template <typename Names>
std::string MainScope(const Names& names) {
  std::map<std::string, int64_t> counts;
  for (const auto& entry : names) {
    const std::string& name = entry.first;
    if (name.find('/') == std::string::npos) continue;
    const std::string top = TopScope(name);
    if (top != "slimtorch") ++counts[top];
  }
  std::string best;
  int64_t most = 0;
  for (const auto& [scope, n] : counts) {
    if (n > most) best = scope, most = n;
  }
  return best;
}

std::string JoinNames(const std::vector<std::string>& names,
                      const char* last_sep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? last_sep : ", ";
    out += names[i];
  }
  return out;
}

// How well a net's variables fit the checkpoint: variables found with
// their shape, and variables in all.
struct Fit {
  int64_t same = 0;
  int64_t total = 0;
};

Fit FitOf(const OrderedShapes& vars, const Shapes& ckpt) {
  Fit f;
  for (const auto& [name, shape] : vars) {
    ++f.total;
    auto it = ckpt.find(name);
    if (it != ckpt.end() && it->second == shape) ++f.same;
  }
  return f;
}

// The registered nets whose main scope is `scope`, each built once (with 2
// classes), with its variables' shapes (TensorFlow's layout when
// `tf_layout`).
std::vector<std::pair<std::string, OrderedShapes>> NetsOfScope(
    const std::string& scope, bool tf_layout) {
  std::vector<std::pair<std::string, OrderedShapes>> out;
  for (const std::string& name : GetNetRegistry().Names()) {
    if (!NetNameMatchesScope(name, scope)) continue;
    OrderedShapes vars;
    try {
      std::shared_ptr<Net> net = CreateNet(name, NetOptions().num_classes(2));
      if (net->scope() != scope) continue;
      if (tf_layout) {
        for (auto& kv : net->TfVariableShapes()) vars.push_back(kv);
      } else {
        for (const NamedTensor& v : net->ModelVariables()) {
          vars.emplace_back(v.name, v.tensor.sizes().vec());
        }
      }
    } catch (const std::exception&) {
      continue;
    }
    out.emplace_back(name, std::move(vars));
  }
  return out;
}

// Among the registered nets of `scope`, those whose variables fit the
// checkpoint best (most variables with the checkpoint's shape; then the
// fewest variables besides), and how well.
std::vector<std::string> BestFits(const std::string& scope, const Shapes& ckpt,
                                  bool tf_layout, Fit* best_fit) {
  std::vector<std::string> best;
  *best_fit = Fit{};
  for (const auto& [name, vars] : NetsOfScope(scope, tf_layout)) {
    const Fit f = FitOf(vars, ckpt);
    const int64_t extra = f.total - f.same;
    const int64_t best_extra = best_fit->total - best_fit->same;
    if (best.empty() || f.same > best_fit->same ||
        (f.same == best_fit->same && extra < best_extra)) {
      best = {name};
      *best_fit = f;
    } else if (f.same == best_fit->same && extra == best_extra) {
      best.push_back(name);
    }
  }
  return best;
}

// When every problem is a shape mismatch in exactly one dimension, the same
// pair of sizes each time, and one of them is 1-D (the logits' weights
// [classes, ...] and biases [classes]): that pair, checkpoint first. Else
// {0, 0}.
std::pair<int64_t, int64_t> ClassesMismatch(
    const std::vector<VariableMismatch>& problems) {
  std::pair<int64_t, int64_t> pair{0, 0};
  bool biases = false;
  for (const VariableMismatch& p : problems) {
    biases = biases || p.model.size() == 1;
    if (p.missing || !p.dtype.empty() ||
        p.checkpoint.size() != p.model.size()) {
      return {0, 0};
    }
    int differing = 0;
    for (size_t d = 0; d < p.model.size(); ++d) {
      if (p.checkpoint[d] == p.model[d]) continue;
      ++differing;
      const std::pair<int64_t, int64_t> here{p.checkpoint[d], p.model[d]};
      if (pair.first != 0 && here != pair) return {0, 0};
      pair = here;
    }
    if (differing != 1) return {0, 0};
  }
  return biases ? pair : std::pair<int64_t, int64_t>{0, 0};
}

// When the only problem is the model's first variable (its first
// convolution) taking another number of input channels: {checkpoint's,
// model's}. Else {0, 0}.
std::pair<int64_t, int64_t> ChannelsMismatch(
    const std::vector<VariableMismatch>& problems,
    const OrderedShapes& model_shapes, bool tf_layout) {
  if (problems.size() != 1 || model_shapes.empty()) return {0, 0};
  const VariableMismatch& p = problems.front();
  // Evaluating moving averages, the problem names the variable's shadow.
  const std::string shadow = model_shapes.front().first + "/ExponentialMovingAverage";
  if ((p.name != model_shapes.front().first && p.name != shadow) || p.missing ||
      !p.dtype.empty() || p.model.size() != 4 || p.checkpoint.size() != 4) {
    return {0, 0};
  }
  const size_t in = tf_layout ? 2 : 1;
  for (size_t d = 0; d < 4; ++d) {
    if (d != in && p.checkpoint[d] != p.model[d]) return {0, 0};
  }
  return {p.checkpoint[in], p.model[in]};
}

// "<top>/<second>" scopes of the problems' variables, in order, once each
// ("MobilenetV1/Logits", "InceptionV3/AuxLogits"): what
// --checkpoint_exclude_scopes would leave out.
std::vector<std::string> ProblemScopes(
    const std::vector<VariableMismatch>& problems) {
  std::vector<std::string> scopes;
  for (const VariableMismatch& p : problems) {
    const size_t first = p.name.find('/');
    const size_t second =
        first == std::string::npos ? first : p.name.find('/', first + 1);
    std::string scope =
        second == std::string::npos ? p.name : p.name.substr(0, second);
    if (std::find(scopes.begin(), scopes.end(), scope) == scopes.end()) {
      scopes.push_back(std::move(scope));
    }
  }
  return scopes;
}

// The full list, written to a file in the temporary directory; its path, or
// "" when it cannot be written.
std::string WriteProblemList(const std::string& ckpt_path,
                             const std::vector<VariableMismatch>& problems) {
  std::string text = StrCat("# checkpoint '", ckpt_path, "': ",
                            problems.size(),
                            " variables do not fit the model\n");
  for (const VariableMismatch& p : problems) text += p.ToString() + "\n";
  try {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         StrCat("slimtorch-checkpoint-mismatch-", ::getpid(), ".txt"))
            .string();
    WriteFileAtomically(path, text);
    return path;
  } catch (const std::exception&) {
    return "";
  }
}

// The end of "Check --model_name...": the checkpoint's own flag.
std::string OrCheckpoint(const MismatchHints& hints) {
  if (hints.checkpoint_flag == "--train_dir") {
    return ", or train in a new --train_dir (this one holds the checkpoints "
           "of an earlier run)";
  }
  return " and " + hints.checkpoint_flag;
}

// Example problems shown in the error; the others go to the file.
constexpr size_t kShownProblems = 3;

}  // namespace

bool NetNameMatchesScope(const std::string& name, const std::string& scope) {
  // Video nets: TF-Slim keeps Inception v1's scope for I3D and S3D-G (so
  // that image checkpoints inflate into them).
  if ((name == "i3d" || name == "s3dg") && scope == "InceptionV1") return true;
  const std::string squashed = Squash(scope);
  return !squashed.empty() &&
         Squash(name).compare(0, squashed.size(), squashed) == 0;
}

std::vector<std::string> NetsWithScope(const std::string& scope) {
  std::vector<std::string> out;
  for (auto& [name, vars] : NetsOfScope(scope, /*tf_layout=*/false)) {
    out.push_back(name);
  }
  return out;
}

namespace {

// Why a checkpoint does not fit, from what its problems have in common, and
// which flags to check; both "" when nothing likelier than the counts shows.
struct LikelyCause {
  std::string cause;
  std::string check;
};

// Another net, or another variant of this one (a width, a depth).
LikelyCause AnotherNet(const std::string& ckpt_scope,
                       const std::string& model_scope,
                       const Shapes& checkpoint_shapes,
                       const OrderedShapes& model_shapes, bool tf_layout,
                       const MismatchHints& hints, const std::string& model,
                       int64_t differ) {
  Fit best_fit;
  const std::vector<std::string> best =
      BestFits(ckpt_scope, checkpoint_shapes, tf_layout, &best_fit);
  const bool model_is_best =
      std::find(best.begin(), best.end(), hints.model_name) != best.end() ||
      FitOf(model_shapes, checkpoint_shapes).same >= best_fit.same;
  if (best.empty() && ckpt_scope != model_scope) {
    return {StrCat("its variables are under ", ckpt_scope,
                   "/, which no registered net uses; ", model, " builds ",
                   model_scope, "/"),
            ""};
  }
  if (best.empty() || model_is_best) return {};
  std::string cause =
      StrCat("it looks like a checkpoint of ", JoinNames(best, " or "));
  if (ckpt_scope == model_scope) {
    cause += StrCat(", but ", model, " builds another variant of ",
                    model_scope, "/ (", differ, " of its ",
                    model_shapes.size(), " variables differ in shape)");
  } else {
    cause += StrCat(" (its variables are under ", ckpt_scope, "/), but ",
                    model, " builds ", model_scope, "/");
  }
  return {cause, StrCat("Check --model_name (--model_name=", best.front(),
                        " builds that net)", OrCheckpoint(hints), ".")};
}

LikelyCause FindLikelyCause(const std::vector<VariableMismatch>& problems,
                            const Shapes& checkpoint_shapes,
                            const OrderedShapes& model_shapes, bool tf_layout,
                            const MismatchHints& hints,
                            const std::string& model, int64_t differ) {
  const std::string model_scope = MainScope(model_shapes);
  const std::string ckpt_scope = MainScope(checkpoint_shapes);
  if (ckpt_scope.empty()) {
    return {StrCat("it holds none of the ", model_shapes.size(),
                   " variables of ", model, " (", model_scope, "/...)"),
            StrCat("Check ", hints.checkpoint_flag, ".")};
  }
  const std::pair<int64_t, int64_t> classes = ClassesMismatch(problems);
  if (classes.first != 0 && ckpt_scope == model_scope) {
    std::string check = StrCat("Check ", hints.classes_flags, ".");
    if (hints.scope_flags) {
      check += StrCat(" To fine-tune it on these ", classes.second,
                      " classes, leave its logits out: "
                      "--checkpoint_exclude_scopes=",
                      JoinNames(ProblemScopes(problems), ","), ".");
    }
    return {StrCat("its logits have ", classes.first, " classes where ", model,
                   " has ", classes.second,
                   ": it was trained on another set of classes"),
            check};
  }
  const std::pair<int64_t, int64_t> channels =
      ChannelsMismatch(problems, model_shapes, tf_layout);
  if (channels.first != 0 && ckpt_scope == model_scope) {
    return {StrCat("its first layer takes images of ", channels.first,
                   " channel", channels.first == 1 ? "" : "s", " where ",
                   model, " takes ", channels.second),
            StrCat("Check ", hints.channels_flags, ".")};
  }
  return AnotherNet(ckpt_scope, model_scope, checkpoint_shapes, model_shapes,
                    tf_layout, hints, model, differ);
}

// The first problems as examples, then the count and the file that lists
// them all.
std::string ProblemExamples(const std::string& ckpt_path,
                            const std::vector<VariableMismatch>& problems,
                            bool tf_layout, int64_t differ) {
  std::string msg;
  const size_t shown = std::min(problems.size(), kShownProblems);
  for (size_t i = 0; i < shown; ++i) {
    msg += "\n  " + problems[i].ToString();
  }
  if (problems.size() > shown) {
    const std::string file = WriteProblemList(ckpt_path, problems);
    msg += StrCat("\n  ... ", problems.size() - shown, " more (",
                  problems.size(), " in all",
                  tf_layout ? ", shapes in TensorFlow's layout" : "",
                  file.empty() ? std::string(")")
                               : StrCat("; the full list is in ", file, ")"));
  } else if (tf_layout && differ > 0) {
    msg += "\n  (shapes in TensorFlow's layout)";
  }
  return msg;
}

}  // namespace

std::string CheckpointMismatchError(const std::string& ckpt_path,
                                    const std::vector<VariableMismatch>& problems,
                                    const Shapes& checkpoint_shapes,
                                    const OrderedShapes& model_shapes,
                                    bool tf_layout, const MismatchHints& hints) {
  const std::string model =
      hints.model_name.empty() ? std::string("the model")
                               : StrCat("--model_name=", hints.model_name);
  int64_t missing = 0;
  for (const VariableMismatch& p : problems) missing += p.missing;
  const int64_t differ = static_cast<int64_t>(problems.size()) - missing;
  LikelyCause likely =
      FindLikelyCause(problems, checkpoint_shapes, model_shapes, tf_layout,
                      hints, model, differ);
  if (likely.cause.empty()) {
    likely.cause = StrCat("of the ", model_shapes.size(), " variables of ",
                          model, ", ");
    if (missing > 0) likely.cause += StrCat(missing, " are missing from it");
    if (missing > 0 && differ > 0) likely.cause += " and ";
    if (differ > 0) likely.cause += StrCat(differ, " have another shape or type");
  }
  if (likely.check.empty()) {
    likely.check = StrCat("Check --model_name", OrCheckpoint(hints), ".");
    if (hints.scope_flags) {
      likely.check +=
          " --checkpoint_exclude_scopes leaves scopes out of the restore "
          "(e.g. the logits of a net trained on other classes); "
          "--ignore_missing_vars skips missing variables.";
    }
  }
  const std::string where =
      hints.checkpoint_flag == "--train_dir"
          ? StrCat("checkpoint '", ckpt_path, "' in --train_dir")
          : StrCat("checkpoint '", ckpt_path, "'");
  return StrCat(where, " does not fit ", model, ": ", likely.cause, ". ",
                likely.check) +
         ProblemExamples(ckpt_path, problems, tf_layout, differ);
}

namespace {

// The names TensorFlow's contrib.quantize may have given our quantization
// variable `name` ("<scope>/<layer>/act_quant/min"): its variables take the
// op's name scope, which some nets open twice ("MobilenetV1/MobilenetV1/
// Conv2d_0/...", "InceptionV1/InceptionV1/..."); a layer output that feeds
// a bypass is "conv_quant", a bypass after an activation
// "post_activation_bypass_quant"; a moving average's shadows live under the
// quantizer's scope twice ("<q>/<q>/min/biased").
std::vector<std::string> TfQuantizationNames(const std::string& name) {
  static const char* kTails[] = {"/min/biased", "/min/local_step",
                                 "/max/biased", "/max/local_step", "/min",
                                 "/max"};
  std::string q, tail;
  for (const char* t : kTails) {
    const std::string suffix = t;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
            0) {
      q = name.substr(0, name.size() - suffix.size());
      tail = suffix;
      break;
    }
  }
  if (q.empty()) return {};
  std::vector<std::string> quantizers = {q};
  const auto replace_last = [&](const std::string& from, const std::string& to) {
    const size_t at = q.rfind(from);
    if (at != std::string::npos && at + from.size() == q.size()) {
      quantizers.push_back(q.substr(0, at) + to);
    }
  };
  replace_last("/act_quant", "/conv_quant");
  replace_last("/add_quant", "/post_activation_bypass_quant");
  const size_t slash = q.find('/');
  const size_t n = quantizers.size();
  for (size_t i = 0; i < n && slash != std::string::npos; ++i) {
    quantizers.push_back(q.substr(0, slash) +
                         "/" + quantizers[i]);
  }
  std::vector<std::string> names;
  const bool shadow = tail.find('/', 1) != std::string::npos;
  for (const std::string& candidate : quantizers) {
    names.push_back(shadow ? candidate + "/" + candidate + tail
                           : candidate + tail);
  }
  return names;
}

// Whether an absent variable is one of options.optional (then noted in
// *options.absent).
bool SkipOptional(const std::string& name, const RestoreOptions& options) {
  if (options.optional.count(name) == 0) return false;
  if (options.absent) options.absent->push_back(name);
  return true;
}

}  // namespace

void QuantizationRangesOptional(Net& net, RestoreOptions* options,
                                std::vector<std::string>* absent) {
  if (net.quantizer() == nullptr) return;
  for (const std::string& name : net.quantizer()->VariableNames()) {
    options->optional.insert(name);
  }
  options->absent = absent;
}

void RequireQuantizationRanges(const std::string& path,
                               const std::vector<std::string>& absent) {
  SLIM_CHECK(absent.empty(), "--quantize: checkpoint ", path, " has no ",
             "quantization ranges (", absent.size(),
             " quantization variables missing, e.g. ",
             absent.empty() ? "" : absent.front(),
             "): it was trained without --quantize_delay. Evaluate it "
             "without --quantize, fine-tune it with train_image_classifier "
             "--quantize_delay=0, or calibrate ranges on data without "
             "retraining: --quantize --calibration_dataset_dir=DIR "
             "(post-training quantization)");
}

int RestoreVariables(const NamedTensors& variables, const CheckpointData& ckpt,
                     const std::string& ckpt_path,
                     const RestoreOptions& options) {
  std::vector<VariableMismatch> problems;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  for (const auto& v : variables) {
    if (InScopes(v.name, options.exclude_scopes)) continue;
    torch::Tensor saved = ckpt.Find(v.name);
    if (!saved.defined()) {
      if (SkipOptional(v.name, options)) continue;
      if (!options.ignore_missing) {
        VariableMismatch p;
        p.name = v.name;
        p.missing = true;
        problems.push_back(std::move(p));
      }
      continue;
    }
    if (saved.sizes() != v.tensor.sizes()) {
      VariableMismatch p;
      p.name = v.name;
      p.checkpoint = saved.sizes().vec();
      p.model = v.tensor.sizes().vec();
      problems.push_back(std::move(p));
      continue;
    }
    copies.emplace_back(v.tensor, saved);
  }
  if (!problems.empty()) {
    Shapes ckpt_shapes;
    for (const NamedTensor& t : ckpt.tensors) {
      ckpt_shapes[t.name] = t.tensor.sizes().vec();
    }
    OrderedShapes model_shapes;
    for (const NamedTensor& v : variables) {
      model_shapes.emplace_back(v.name, v.tensor.sizes().vec());
    }
    SLIM_FAIL(CheckpointMismatchError(ckpt_path, problems, ckpt_shapes,
                                      model_shapes, /*tf_layout=*/false,
                                      options.hints));
  }
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
    const TfPrefixReader& reader, Net& net, const RestoreOptions& options,
    bool shadows) {
  const std::map<std::string, std::vector<int64_t>> tf_shapes =
      net.TfVariableShapes();
  std::vector<VariableMismatch> problems;
  std::vector<std::pair<NamedTensor, std::string>> plan;
  const NamedTensors model_vars = net.ModelVariables();
  for (const NamedTensor& v : model_vars) {
    if (InScopes(v.name, options.exclude_scopes)) continue;
    // (quantization ranges have no moving averages, as in TF-Slim, where
    // they are not model variables)
    const bool optional = options.optional.count(v.name) > 0;
    std::string saved =
        shadows && !optional ? MovingAverageName(v.name) : v.name;
    const TfTensorInfo* info = reader.Find(saved);
    if (info == nullptr && optional) {
      // A quantization range under the name TF's rewrite gave it.
      for (const std::string& alias : TfQuantizationNames(v.name)) {
        if ((info = reader.Find(alias)) != nullptr) {
          saved = alias;
          break;
        }
      }
    }
    VariableMismatch p;
    p.name = saved;
    if (info == nullptr) {
      if (SkipOptional(v.name, options)) continue;
      SLIM_CHECK(!shadows, "--moving_average_decay is set but checkpoint '",
                 reader.prefix(), "' has no moving averages (key '", saved,
                 "' not found); it was trained without "
                 "--moving_average_decay. Evaluate it without the flag.");
      if (!options.ignore_missing) {
        p.missing = true;
        problems.push_back(std::move(p));
      }
      continue;
    }
    const std::vector<int64_t>& model = tf_shapes.at(v.name);
    if (info->shape != model) {
      p.checkpoint = info->shape;
      p.model = model;
      problems.push_back(std::move(p));
      continue;
    }
    if (!info->supported) {
      p.dtype = TfDtypeName(info->tf_dtype);
      problems.push_back(std::move(p));
      continue;
    }
    plan.emplace_back(v, saved);
  }
  if (!problems.empty()) {
    std::map<std::string, std::vector<int64_t>> ckpt_shapes;
    for (const TfTensorInfo& t : reader.tensors()) ckpt_shapes[t.name] = t.shape;
    std::vector<std::pair<std::string, std::vector<int64_t>>> model_shapes;
    for (const NamedTensor& v : model_vars) {
      model_shapes.emplace_back(v.name, tf_shapes.at(v.name));
    }
    SLIM_FAIL(CheckpointMismatchError(reader.prefix(), problems, ckpt_shapes,
                                      model_shapes, /*tf_layout=*/true,
                                      options.hints));
  }
  return plan;
}

// The checkpoint's scalar global_step, if it has one.
c10::optional<int64_t> TfGlobalStep(const TfPrefixReader& reader) {
  const TfTensorInfo* step = reader.Find("global_step");
  if (step == nullptr || !step->supported || !step->shape.empty()) {
    return c10::nullopt;
  }
  return reader.Read("global_step").to(torch::kLong).item<int64_t>();
}

// Reads saved tensor `saved` into variable `var`: through `buffer` (grown
// as needed) when the dtypes match, else by a copy that converts.
void ReadVariable(const TfPrefixReader& reader, const std::string& saved,
                  const NamedTensor& var, torch::Tensor* buffer) {
  const TfTensorInfo& info = *reader.Find(saved);
  torch::Tensor tf;
  if (TorchDtypeOf(info.tf_dtype) != var.tensor.scalar_type()) {
    tf = reader.Read(saved);  // another dtype: converted by copy_
  } else {
    const int64_t bytes = var.tensor.numel() * var.tensor.element_size();
    if (buffer->numel() < bytes) *buffer = torch::empty({bytes}, torch::kUInt8);
    tf = buffer->narrow(0, 0, bytes).view(var.tensor.scalar_type());
    reader.ReadInto(saved, tf);
  }
  FromTfLayoutInto(var.name, tf.view(info.shape), var.tensor);
}

// Reads the planned variables from `reader` in parallel: largest first,
// shared out to a few workers; each reads a tensor's TensorFlow bytes into
// its own reused buffer and converts them from there straight into the
// variable, so no memory is allocated per tensor. Returns how many it wrote.
int ReadPlanInto(const TfPrefixReader& reader,
                 std::vector<std::pair<NamedTensor, std::string>> plan) {
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
        ReadVariable(reader, plan[k].second, plan[k].first, &buffer);
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
  return restored;
}

// RestoreCheckpointFor's safetensors half: the variables (or their shadows)
// from the loaded file, and its global_step.
void RestoreFromData(const CheckpointData& data, Net& net,
                     const RestoreOptions& options, bool shadows,
                     RestoredCheckpoint* out) {
  const NamedTensors vars = net.ModelVariables();
  if (shadows) {
    // Every variable from its moving average but the quantization ranges,
    // which have none (as in TF-Slim).
    NamedTensors averaged, ranges;
    for (const NamedTensor& v : vars) {
      (options.optional.count(v.name) ? ranges : averaged).push_back(v);
    }
    RestoreMovingAverages(averaged, data, out->path);
    out->restored = static_cast<int>(averaged.size()) +
                    RestoreVariables(ranges, data, out->path, options);
  } else {
    out->restored = RestoreVariables(vars, data, out->path, options);
  }
  const torch::Tensor step = data.Find("global_step");
  if (step.defined() && step.numel() == 1) {
    out->global_step = step.item<int64_t>();
  }
}

}  // namespace

LoadedCheckpoint LoadCheckpointFor(const std::string& path_or_dir, Net& net,
                                   const RestoreOptions& options,
                                   bool shadows) {
  const OpenedCheckpoint ckpt = OpenCheckpoint(path_or_dir);
  LoadedCheckpoint out;
  out.path = ckpt.path();
  if (!ckpt.tensorflow()) {
    out.data = ckpt.data();
    return out;
  }
  const TfPrefixReader& reader = ckpt.tf();
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
  const OpenedCheckpoint ckpt = OpenCheckpoint(path_or_dir);
  RestoredCheckpoint out;
  out.path = ckpt.path();
  if (!ckpt.tensorflow()) {
    RestoreFromData(ckpt.data(), net, options, shadows, &out);
    return out;
  }
  const TfPrefixReader& reader = ckpt.tf();
  out.tensorflow = true;
  out.restored =
      ReadPlanInto(reader, PlanTfRestore(reader, net, options, shadows));
  if (auto step = TfGlobalStep(reader)) out.global_step = *step;
  return out;
}

}  // namespace slimtorch
