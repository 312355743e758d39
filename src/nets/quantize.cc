#include "slimtorch/nets/quantize.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/fake_quant.h"

namespace slimtorch {
namespace nets {

namespace {

thread_local Quantizer* active_quantizer = nullptr;

// "a/b/c" → "a/b"; "a" → "".
std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string Join(const std::string& a, const std::string& b) {
  return a.empty() ? b : a + "/" + b;
}

// Runs a fake quantization of the range `key`; an error (an empty or NaN
// range) is rethrown naming the range's variable, and for a weight range
// met in training (the weights turned NaN: training diverged) what to try.
template <typename F>
torch::Tensor NamingRange(const std::string& key, bool weights_in_training,
                          F&& quantize) {
  try {
    return quantize();
  } catch (const Error& e) {
    SLIM_FAIL(
        "quantization range '", key, "/min', '", key, "/max': ", e.what(),
        weights_in_training
            ? ". The weights are no longer finite: training diverged. With "
              "one weight range per tensor (TF-Slim's rewrite), a layer "
              "whose batch-norm-folded weights span a wide range rounds most "
              "channels to zero, which can make the gradients explode; "
              "--quantize_per_channel "
              "(one range per output channel) or a lower --learning_rate "
              "may avoid it"
            : "");
  }
}

}  // namespace

// One range: min and max (0-d, or [C] per channel), and for an activation
// the zero-debias shadows of its moving averages.
struct Quantizer::Range {
  bool activation = false;
  torch::Tensor min, max;
  torch::Tensor min_biased, min_step, max_biased, max_step;
};

Quantizer* ActiveQuantizer() { return active_quantizer; }

QuantizerScope::QuantizerScope(Quantizer* q) : previous_(active_quantizer) {
  active_quantizer = q;
}

QuantizerScope::~QuantizerScope() { active_quantizer = previous_; }

Quantizer::Quantizer(torch::nn::Module& root, std::string scope,
                     const QuantizeOptions& options)
    : root_(root), scope_(std::move(scope)), options_(options) {
  SLIM_CHECK(options.weight_bits() >= 2 && options.weight_bits() <= 16 &&
                 options.activation_bits() >= 2 &&
                 options.activation_bits() <= 16,
             "quantization: bits must be in [2, 16], got weights ",
             options.weight_bits(), ", activations ",
             options.activation_bits());
  SLIM_CHECK(options.ema_decay() > 0 && options.ema_decay() < 1,
             "quantization: the moving averages' decay must be in (0, 1), got ",
             options.ema_decay());
  for (const auto& item : root.named_modules("", false)) {
    std::string path = item.key();
    std::replace(path.begin(), path.end(), '.', '/');
    paths_[item.value().get()] = path;
  }
  paths_[&root] = "";
}

void Quantizer::Discover(const std::function<void()>& run) {
  discovering_ = true;
  try {
    QuantizerScope scope(this);
    run();
  } catch (...) {
    discovering_ = false;
    throw;
  }
  discovering_ = false;
}

void Quantizer::BeginPass() {
  last_layer_.clear();
  used_.clear();
  marked_.clear();
}

void Quantizer::Mark(const torch::Tensor& t) {
  marked_.insert_or_assign(
      t.unsafeGetTensorImpl(),
      c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()));
}

bool Quantizer::AnyMarked(const std::vector<torch::Tensor>& ts) const {
  for (const torch::Tensor& t : ts) {
    auto it = marked_.find(t.unsafeGetTensorImpl());
    if (it != marked_.end() && !it->second.expired()) return true;
  }
  return false;
}

void Quantizer::Derive(const torch::Tensor& in, const torch::Tensor& out) {
  if (AnyMarked({in})) Mark(out);
}

std::string Quantizer::BlockKey(const std::string& name) {
  std::string key = Join(Parent(last_layer_), name);
  // A block with several: the second gets "_1", as TensorFlow uniquifies a
  // repeated scope.
  const int seen = used_[key]++;
  if (seen > 0) key += "_" + std::to_string(seen);
  return key;
}

bool Quantizer::training() const {
  return root_.is_training() && !calibrating() && !discovering_;
}

bool Quantizer::batch_norm_frozen() const {
  return options_.freeze_bn_delay() >= 0 &&
         step_ + 1 >= options_.freeze_bn_delay();
}

bool Quantizer::FakeQuantOn() const {
  if (discovering_ || calibrating()) return false;
  // TensorFlow's fake_quantization_step counts the runs from 1.
  return !root_.is_training() || step_ + 1 >= options_.quant_delay();
}

std::string Quantizer::PathOf(const torch::nn::Module* layer) const {
  auto it = paths_.find(layer);
  SLIM_CHECK(it != paths_.end(),
             "quantization: a layer outside the net's modules");
  return it->second;
}

void Quantizer::SetObserver(ActivationObserver observer) {
  observer_ = std::move(observer);
}

Quantizer::Range& Quantizer::Find(const std::string& key, bool activation,
                                  double init_min, double init_max,
                                  int64_t channels) {
  auto it = ranges_.find(key);
  if (it != ranges_.end()) return *it->second;
  SLIM_CHECK(discovering_, "quantization: range ", Join(scope_, key),
             " was not seen when the net was first run (a layer that runs "
             "only in some passes?)");
  auto r = std::make_shared<Range>();
  r->activation = activation;
  torch::TensorOptions opts(torch::kFloat32);
  for (const torch::Tensor& p : root_.parameters()) {
    opts = opts.device(p.device());
    break;
  }
  const std::vector<int64_t> shape =
      channels > 0 ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  r->min = root_.register_buffer(key + "/min",
                                 torch::full(shape, init_min, opts));
  r->max = root_.register_buffer(key + "/max",
                                 torch::full(shape, init_max, opts));
  if (activation) {
    r->min_biased =
        root_.register_buffer(key + "/min/biased", torch::zeros(shape, opts));
    r->min_step =
        root_.register_buffer(key + "/min/local_step", torch::zeros({}, opts));
    r->max_biased =
        root_.register_buffer(key + "/max/biased", torch::zeros(shape, opts));
    r->max_step =
        root_.register_buffer(key + "/max/local_step", torch::zeros({}, opts));
  }
  ranges_[key] = r;
  order_.push_back(key);
  return *r;
}

torch::Tensor Quantizer::Weights(const torch::nn::Module* layer,
                                 const std::string& name,
                                 const torch::Tensor& w, QuantRange* traced) {
  const std::string key = Join(PathOf(layer), name);
  const bool per_channel = options_.per_channel();
  Range& r = Find(key, /*activation=*/false, -6.0, 6.0,
                  per_channel ? w.size(0) : 0);
  if (training() || calibrating()) {
    // LastValueQuantize: the range of the weights as they are now, 0 kept.
    torch::NoGradGuard no_grad;
    const torch::Tensor flat = w.detach().reshape({w.size(0), -1});
    torch::Tensor lo = per_channel ? std::get<0>(flat.min(1)) : flat.min();
    torch::Tensor hi = per_channel ? std::get<0>(flat.max(1)) : flat.max();
    r.min.copy_(torch::clamp_max(lo, 0.0));
    r.max.copy_(torch::clamp_min(hi, 0.0));
  }
  if (traced) {
    traced->min = r.min.detach();
    traced->max = r.max.detach();
    traced->num_bits = options_.weight_bits();
    traced->narrow_range = true;
    traced->axis = per_channel ? 0 : -1;
  }
  if (!FakeQuantOn()) return w;
  return NamingRange(Join(scope_, key), training(), [&] {
    return per_channel ? FakeQuantPerChannel(w, r.min, r.max, /*axis=*/0,
                                             options_.weight_bits(),
                                             /*narrow_range=*/true)
                       : FakeQuant(w, r.min, r.max, options_.weight_bits(),
                                   /*narrow_range=*/true);
  });
}

torch::Tensor Quantizer::LayerOutput(const torch::nn::Module* layer,
                                     const torch::Tensor& y) {
  const std::string path = PathOf(layer);
  last_layer_ = path;
  return Activation(Join(path, "act_quant"), y, 0.0);
}

torch::Tensor Quantizer::AddOutput(const std::vector<torch::Tensor>& inputs,
                                   const torch::Tensor& y, bool activated) {
  if (!AnyMarked(inputs)) return y;
  return Activation(BlockKey(activated ? "act_quant" : "add_quant"), y,
                    activated ? 0.0 : -6.0);
}

torch::Tensor Quantizer::OpOutput(const char* type,
                                  const std::vector<torch::Tensor>& inputs,
                                  const torch::Tensor& y) {
  if (!AnyMarked(inputs)) return y;
  // (TF's initial ranges: an activation's 0..6, another op's -6..6)
  const bool activation = std::string(type) == "Relu6";
  const std::string name = activation
                               ? std::string("act_quant")
                               : "activation_" + std::string(type) + "_quant";
  return Activation(BlockKey(name), y, activation ? 0.0 : -6.0);
}

torch::Tensor Quantizer::Activation(const std::string& key,
                                    const torch::Tensor& y, double init_min) {
  Range& r = Find(key, /*activation=*/true, init_min, 6.0, 0);
  if (calibrating()) {
    observer_(Join(scope_, key), y.detach());
    Mark(y);
    return y;
  }
  if (training()) {
    // MovingAvgQuantize: the batch's range (0 kept) into the moving
    // averages, which the fake quantization then uses.
    torch::NoGradGuard no_grad;
    const torch::Tensor v = y.detach();
    const double decay = options_.ema_decay();
    AssignMovingAverageZeroDebias(r.min, r.min_biased, r.min_step,
                                  torch::clamp_max(v.min(), 0.0), decay);
    AssignMovingAverageZeroDebias(r.max, r.max_biased, r.max_step,
                                  torch::clamp_min(v.max(), 0.0), decay);
  }
  if (!FakeQuantOn()) {
    Mark(y);
    return y;
  }
  torch::Tensor q = NamingRange(Join(scope_, key), false, [&] {
    return FakeQuant(y, r.min, r.max, options_.activation_bits(), false);
  });
  Mark(q);
  if (TracingOps() && !training()) {
    TracedOp op(OpKind::kFakeQuant, nullptr, "", {y}, q);
    op.quant.min = r.min.detach();
    op.quant.max = r.max.detach();
    op.quant.num_bits = options_.activation_bits();
    op.quant.narrow_range = false;
    TraceOp(op);
  }
  return q;
}

void Quantizer::SetActivationRange(const std::string& name, double min,
                                   double max) {
  const std::string prefix = scope_.empty() ? "" : scope_ + "/";
  SLIM_CHECK(name.compare(0, prefix.size(), prefix) == 0,
             "quantization: range ", name, " is not under ", scope_);
  auto it = ranges_.find(name.substr(prefix.size()));
  SLIM_CHECK(it != ranges_.end() && it->second->activation,
             "quantization: no activation range named ", name);
  torch::NoGradGuard no_grad;
  it->second->min.fill_(std::min(min, 0.0));
  it->second->max.fill_(std::max(max, 0.0));
}

std::vector<std::string> Quantizer::VariableNames() const {
  std::vector<std::string> names;
  for (const std::string& key : order_) {
    const std::string full = Join(scope_, key);
    names.push_back(full + "/min");
    names.push_back(full + "/max");
    if (ranges_.at(key)->activation) {
      for (const char* v : {"/min/biased", "/min/local_step", "/max/biased",
                            "/max/local_step"}) {
        names.push_back(full + v);
      }
    }
  }
  return names;
}

std::vector<std::string> Quantizer::ActivationRangeNames() const {
  std::vector<std::string> names;
  for (const std::string& key : order_) {
    if (ranges_.at(key)->activation) names.push_back(Join(scope_, key));
  }
  return names;
}

void Quantizer::CheckRanges() const {
  for (const std::string& key : order_) {
    const Range& r = *ranges_.at(key);
    const torch::Tensor width = (r.max - r.min).cpu();
    const bool finite = torch::isfinite(r.min).all().item<bool>() &&
                        torch::isfinite(r.max).all().item<bool>();
    SLIM_CHECK(finite && width.min().item<float>() > 0,
               "quantization range ", Join(scope_, key), " is [",
               r.min.min().item<float>(), ", ", r.max.max().item<float>(),
               "]: ",
               finite ? "it has collapsed to zero width (the activations "
                        "there were all zero in training or calibration), "
                        "so every value would map to one level"
                      : "not finite",
               "; calibrate on other data (--calibration_dataset_dir) or "
               "retrain");
  }
}

}  // namespace nets
}  // namespace slimtorch
