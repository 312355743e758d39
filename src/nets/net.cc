#include "slimtorch/nets/net.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <set>
#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/preprocessing/preprocessing.h"

namespace slimtorch {
namespace {

// "conv1.weights" → "<scope>/conv1/weights".
std::string TfName(const std::string& scope, std::string key) {
  for (char& c : key) {
    if (c == '.') c = '/';
  }
  // No outer scope (NASNet, PNASNet): the names start at the layers.
  return scope.empty() ? key : scope + "/" + key;
}

// 1234567 → "1,234,567".
std::string Grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace

void EndPoints::emplace_back(std::string key, torch::Tensor value) {
  std::vector<std::pair<std::string, torch::Tensor>>::emplace_back(
      std::move(key), std::move(value));
  if (nets::LayerCostRecorder* r = nets::LayerCostRecorder::Active()) {
    costs_.resize(size() - 1);
    costs_.push_back(r->Take());
  }
}

NetSummary SummarizeNet(Net& net, int64_t image_size) {
  net.CheckImageSize(image_size);
  torch::nn::Module& m = net.module();
  const bool was_training = m.is_training();
  auto params = m.parameters();
  const torch::Device device =
      params.empty() ? torch::Device(torch::kCPU) : params.front().device();
  m.eval();
  NetSummary summary;
  summary.net = net.scope();
  summary.image_size = image_size;
  try {
    torch::NoGradGuard no_grad;
    nets::LayerCostRecorder recorder;
    summary.num_frames = net.num_frames();
    std::vector<int64_t> example = {1, net.input_channels(), image_size,
                                    image_size};
    if (summary.num_frames > 0) {
      example.insert(example.begin() + 2, summary.num_frames);
    }
    NetOutput out = net.Forward(
        torch::zeros(example, torch::TensorOptions().device(device)));
    const auto& costs = out.end_points.costs();
    for (size_t i = 0; i < out.end_points.size(); ++i) {
      EndPointSummary e;
      e.name = out.end_points[i].first;
      e.shape = out.end_points[i].second.sizes().vec();
      if (i < costs.size()) {
        e.parameters = costs[i].parameters;
        e.multiply_adds = costs[i].multiply_adds;
      }
      summary.multiply_adds += e.multiply_adds;
      summary.end_points.push_back(std::move(e));
    }
    // Layers after the last end point (none in the zoo) still count.
    summary.multiply_adds += recorder.Take().multiply_adds;
  } catch (...) {
    m.train(was_training);
    throw;
  }
  m.train(was_training);
  summary.parameters = net.NumParameters();
  return summary;
}

std::string NetSummary::ToString() const {
  size_t name_w = 9, shape_w = 12;
  for (const auto& e : end_points) {
    name_w = std::max(name_w, e.name.size());
    shape_w = std::max(shape_w, ShapeString(e.shape).size());
  }
  std::ostringstream os;
  os << net << " at " << image_size << "x" << image_size;
  if (num_frames > 0) os << ", " << num_frames << " frames";
  os << " (per " << (num_frames > 0 ? "clip" : "example")
     << "; parameters and multiply-adds of the layers since "
        "the previous end point)\n";
  os << std::left << std::setw(name_w + 2) << "end point"
     << std::setw(shape_w + 2) << "output shape" << std::right << std::setw(14)
     << "parameters" << std::setw(18) << "multiply-adds"
     << "\n";
  for (const auto& e : end_points) {
    os << std::left << std::setw(name_w + 2) << e.name << std::setw(shape_w + 2)
       << ShapeString(e.shape) << std::right << std::setw(14)
       << Grouped(e.parameters) << std::setw(18) << Grouped(e.multiply_adds)
       << "\n";
  }
  os << std::left << std::setw(name_w + shape_w + 4) << "total" << std::right
     << std::setw(14) << Grouped(parameters) << std::setw(18)
     << Grouped(multiply_adds) << "\n";
  return os.str();
}

NamedTensors Net::TrainableVariables() {
  NamedTensors out;
  for (const auto& item : module().named_parameters(/*recurse=*/true)) {
    out.push_back({TfName(scope(), item.key()), item.value()});
  }
  return out;
}

NamedTensors Net::ModelVariables() {
  NamedTensors out = TrainableVariables();
  for (const auto& item : module().named_buffers(/*recurse=*/true)) {
    out.push_back({TfName(scope(), item.key()), item.value()});
  }
  return out;
}

bool IsDepthwiseKernel(const std::string& name) {
  static const std::string kSuffix = "depthwise_weights";
  return name.size() >= kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) ==
             0;
}

namespace {

// Between TensorFlow's [P, I, O] (P = kh * kw) and our [O, I, P] for 4-byte
// elements: to_ours: dst[o][i][p] = src[p][i][o]; else the inverse. Tiles of
// 16 x 16 (o, i) keep both sides in cache; tiles are split across threads.
// The same values as permute + contiguous, several times faster.
void ReverseTranspose(const uint32_t* src, uint32_t* dst, int64_t P, int64_t I,
                      int64_t O, bool to_ours) {
  constexpr int64_t kTile = 16;
  const int64_t o_tiles = (O + kTile - 1) / kTile;
  at::parallel_for(0, o_tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ot = begin; ot < end; ++ot) {
      const int64_t o0 = ot * kTile, oe = std::min(O, o0 + kTile);
      for (int64_t i0 = 0; i0 < I; i0 += kTile) {
        const int64_t ie = std::min(I, i0 + kTile);
        for (int64_t p = 0; p < P; ++p) {
          for (int64_t i = i0; i < ie; ++i) {
            const int64_t tf_row = (p * I + i) * O;
            if (to_ours) {
              for (int64_t o = o0; o < oe; ++o) {
                dst[(o * I + i) * P + p] = src[tf_row + o];
              }
            } else {
              for (int64_t o = o0; o < oe; ++o) {
                dst[tf_row + o] = src[(o * I + i) * P + p];
              }
            }
          }
        }
      }
    }
  });
}

// `t` ([P, I, O] or [O, I, P] as `to_ours` says) rearranged into a new
// tensor of `sizes`; nullopt when the fast kernel does not apply.
c10::optional<torch::Tensor> FastReverse(const torch::Tensor& t, int64_t P,
                                         int64_t I, int64_t O, bool to_ours,
                                         at::IntArrayRef sizes) {
  if (t.element_size() != 4 || !t.is_cpu() || t.numel() < 4096) {
    return c10::nullopt;
  }
  const torch::Tensor src = t.contiguous();
  torch::Tensor dst = torch::empty(sizes, src.options());
  ReverseTranspose(static_cast<const uint32_t*>(src.data_ptr()),
                   static_cast<uint32_t*>(dst.data_ptr()), P, I, O, to_ours);
  return dst;
}

}  // namespace

torch::Tensor FromTfLayout(const std::string& name, const torch::Tensor& tf) {
  if (tf.dim() == 4 && IsDepthwiseKernel(name)) {
    // [kh, kw, in, mult] → [in, mult, kh, kw] → [in * mult, 1, kh, kw].
    const int64_t P = tf.size(0) * tf.size(1), C = tf.size(2) * tf.size(3);
    if (tf.size(3) == 1) {  // [P, 1, C] → [C, 1, P]
      if (auto out =
              FastReverse(tf, P, 1, C, true, {C, 1, tf.size(0), tf.size(1)})) {
        return *out;
      }
    }
    torch::Tensor t = tf.permute({2, 3, 0, 1}).contiguous();
    return t.reshape({-1, 1, t.size(2), t.size(3)});
  }
  if (tf.dim() == 4) {
    const int64_t P = tf.size(0) * tf.size(1);
    if (auto out =
            FastReverse(tf, P, tf.size(2), tf.size(3), true,
                        {tf.size(3), tf.size(2), tf.size(0), tf.size(1)})) {
      return *out;
    }
    return tf.permute({3, 2, 0, 1}).contiguous();
  }
  if (tf.dim() == 5) {  // [kt, kh, kw, in, out] → [out, in, kt, kh, kw]
    const int64_t P = tf.size(0) * tf.size(1) * tf.size(2);
    if (auto out = FastReverse(
            tf, P, tf.size(3), tf.size(4), true,
            {tf.size(4), tf.size(3), tf.size(0), tf.size(1), tf.size(2)})) {
      return *out;
    }
    return tf.permute({4, 3, 0, 1, 2}).contiguous();
  }
  if (tf.dim() == 2) {
    if (auto out = FastReverse(tf, 1, tf.size(0), tf.size(1), true,
                               {tf.size(1), tf.size(0)})) {
      // [1, in, out] → [out, in, 1]: the transpose.
      return *out;
    }
    return tf.t().contiguous();
  }
  return tf.contiguous();
}

void FromTfLayoutInto(const std::string& name, const torch::Tensor& tf,
                      const torch::Tensor& dst) {
  const bool direct = tf.is_cpu() && dst.is_cpu() && tf.is_contiguous() &&
                      dst.is_contiguous() && tf.element_size() == 4 &&
                      tf.scalar_type() == dst.scalar_type() &&
                      tf.numel() == dst.numel();
  int64_t P = 0, I = 0, O = 0;
  std::vector<int64_t> ours;
  if (tf.dim() == 4 && IsDepthwiseKernel(name)) {
    if (tf.size(3) == 1) {
      P = tf.size(0) * tf.size(1), I = 1, O = tf.size(2);
      ours = {O, 1, tf.size(0), tf.size(1)};
    }
  } else if (tf.dim() == 4) {
    P = tf.size(0) * tf.size(1), I = tf.size(2), O = tf.size(3);
    ours = {O, I, tf.size(0), tf.size(1)};
  } else if (tf.dim() == 2) {
    P = 1, I = tf.size(0), O = tf.size(1);
    ours = {O, I};
  } else if (tf.dim() == 5) {
    P = tf.size(0) * tf.size(1) * tf.size(2), I = tf.size(3), O = tf.size(4);
    ours = {O, I, tf.size(0), tf.size(1), tf.size(2)};
  }
  torch::NoGradGuard no_grad;
  if (direct && P > 0 && dst.sizes().vec() == ours) {
    ReverseTranspose(static_cast<const uint32_t*>(tf.data_ptr()),
                     static_cast<uint32_t*>(dst.data_ptr()), P, I, O, true);
    return;
  }
  if (direct && P == 0 && tf.dim() != 4 && tf.dim() != 5 &&
      dst.sizes() == tf.sizes()) {
    std::memcpy(dst.data_ptr(), tf.data_ptr(), tf.numel() * 4);
    return;
  }
  dst.copy_(FromTfLayout(name, tf));
}

torch::Tensor ToTfLayout(const std::string& name, const torch::Tensor& ours,
                         int64_t depth_multiplier) {
  if (ours.dim() == 4 && IsDepthwiseKernel(name)) {
    SLIM_CHECK(depth_multiplier > 0 && ours.size(1) == 1 &&
                   ours.size(0) % depth_multiplier == 0,
               "depthwise kernel '", name, "' of shape ",
               ShapeString(ours.sizes().vec()),
               " does not split into a depth multiplier of ", depth_multiplier);
    return ours
        .reshape({ours.size(0) / depth_multiplier, depth_multiplier,
                  ours.size(2), ours.size(3)})
        .permute({2, 3, 0, 1})
        .contiguous();
  }
  if (ours.dim() == 4) {
    if (auto out = FastReverse(
            ours, ours.size(2) * ours.size(3), ours.size(1), ours.size(0),
            false, {ours.size(2), ours.size(3), ours.size(1), ours.size(0)})) {
      return *out;
    }
    return ours.permute({2, 3, 1, 0}).contiguous();
  }
  if (ours.dim() == 5) {  // [out, in, kt, kh, kw] → [kt, kh, kw, in, out]
    if (auto out = FastReverse(ours, ours.size(2) * ours.size(3) * ours.size(4),
                               ours.size(1), ours.size(0), false,
                               {ours.size(2), ours.size(3), ours.size(4),
                                ours.size(1), ours.size(0)})) {
      return *out;
    }
    return ours.permute({2, 3, 4, 1, 0}).contiguous();
  }
  if (ours.dim() == 2) {
    if (auto out = FastReverse(ours, 1, ours.size(1), ours.size(0), false,
                               {ours.size(1), ours.size(0)})) {
      return *out;
    }
    return ours.t().contiguous();
  }
  return ours.contiguous();
}

std::map<std::string, int64_t> Net::DepthMultipliers() {
  std::map<std::string, int64_t> out;
  for (const auto& item : module().named_modules("", /*include_self=*/false)) {
    const auto* sep =
        dynamic_cast<const nets::SeparableConv2dImpl*>(item.value().get());
    if (sep != nullptr && sep->options.depth_multiplier() != 1) {
      out[TfName(scope(), item.key() + ".depthwise_weights")] =
          sep->options.depth_multiplier();
    }
  }
  return out;
}

NamedTensors Net::TfModelVariables() {
  const std::map<std::string, int64_t> multipliers = DepthMultipliers();
  NamedTensors out;
  torch::NoGradGuard no_grad;
  for (const NamedTensor& v : ModelVariables()) {
    auto it = multipliers.find(v.name);
    out.push_back(
        {v.name, ToTfLayout(v.name, v.tensor.detach(),
                            it == multipliers.end() ? 1 : it->second)});
  }
  return out;
}

std::map<std::string, std::vector<int64_t>> Net::TfVariableShapes() {
  const std::map<std::string, int64_t> multipliers = DepthMultipliers();
  std::map<std::string, std::vector<int64_t>> out;
  for (const NamedTensor& v : ModelVariables()) {
    auto it = multipliers.find(v.name);
    const int64_t mult = it == multipliers.end() ? 1 : it->second;
    const std::vector<int64_t> s = v.tensor.sizes().vec();
    if (s.size() == 4 && IsDepthwiseKernel(v.name)) {
      out[v.name] = {s[2], s[3], s[0] / mult, mult};
    } else if (s.size() == 4) {
      out[v.name] = {s[2], s[3], s[1], s[0]};
    } else if (s.size() == 2) {
      out[v.name] = {s[1], s[0]};
    } else if (s.size() == 5) {
      out[v.name] = {s[2], s[3], s[4], s[1], s[0]};
    } else {
      out[v.name] = s;
    }
  }
  return out;
}

torch::Tensor Net::RegularizationLoss() {
  torch::Tensor total;
  for (const auto& m : module().modules(/*include_self=*/true)) {
    const auto* reg = dynamic_cast<const nets::Regularized*>(m.get());
    if (reg == nullptr) continue;
    torch::Tensor term = reg->RegularizationLoss();
    if (!term.defined()) continue;
    total = total.defined() ? total + term : term;
  }
  if (!total.defined()) {
    auto params = module().parameters();
    total = params.empty() ? torch::zeros({})
                           : torch::zeros({}, params.front().options());
  }
  return total;
}

namespace {

// sum(v^2) without a squared copy. dot() accumulates in float and drifts
// (1.7e-5 relative over LeNet's 3.2M fully-connected weights, where
// RegularizationLoss()'s cascade sum does not), so it runs on chunks whose
// results are then summed.
torch::Tensor SquaredNorm(const torch::Tensor& v) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  // A dense tensor in any memory order (channels-last weights) is summed
  // over its storage as it lies, without a reordering copy.
  torch::Tensor flat = v.is_contiguous() || !v.is_non_overlapping_and_dense()
                           ? v.reshape({-1})
                           : v.as_strided({v.numel()}, {1});
  const int64_t n = flat.numel();
  // On a GPU one dot: cuBLAS reduces in a tree (no such drift), and every
  // chunk would be a kernel and several host-side ops of each step.
  if (n <= kChunk || !flat.is_cpu()) return torch::dot(flat, flat);
  std::vector<torch::Tensor> parts;
  for (int64_t i = 0; i < n; i += kChunk) {
    torch::Tensor chunk = flat.narrow(0, i, std::min(kChunk, n - i));
    parts.push_back(torch::dot(chunk, chunk));
  }
  return torch::stack(parts).sum();
}

}  // namespace

torch::Tensor Net::ApplyRegularizationGradients() {
  torch::NoGradGuard no_grad;
  torch::Tensor total;
  for (const auto& m : module().modules(/*include_self=*/true)) {
    const auto* reg = dynamic_cast<const nets::Regularized*>(m.get());
    if (reg == nullptr) continue;
    for (auto [v, c] : reg->L2Variables()) {
      torch::Tensor term = SquaredNorm(v).mul_(0.5 * c);
      total = total.defined() ? total.add_(term) : term;
      if (!v.requires_grad()) continue;
      torch::Tensor& grad = v.mutable_grad();
      if (grad.defined()) {
        grad.add_(v, c);
      } else {
        grad = v.mul(c);
      }
    }
  }
  if (!total.defined()) {
    auto params = module().parameters();
    total = params.empty() ? torch::zeros({})
                           : torch::zeros({}, params.front().options());
  }
  return total;
}

DataFormat ParseDataFormat(const std::string& flag) {
  if (flag == "channels_first") return DataFormat::kChannelsFirst;
  if (flag == "channels_last") return DataFormat::kChannelsLast;
  SLIM_CHECK(flag == "auto",
             "--data_format must be auto, "
             "channels_first or channels_last, got '",
             flag, "'");
  return DataFormat::kAuto;
}

torch::MemoryFormat ResolveDataFormat(const std::string& data_format,
                                      const std::string& model_name,
                                      const torch::Device& device) {
  return ResolveDataFormat(ParseDataFormat(data_format), model_name, device);
}

torch::MemoryFormat ResolveDataFormat(DataFormat data_format,
                                      const std::string& model_name,
                                      const torch::Device& device) {
  if (data_format == DataFormat::kChannelsFirst) {
    return torch::MemoryFormat::Contiguous;
  }
  if (data_format == DataFormat::kChannelsLast) {
    return torch::MemoryFormat::ChannelsLast;
  }
  if (!device.is_cpu()) return torch::MemoryFormat::Contiguous;
  // NetFacts::cpu_channels_last: measured per net (docs/performance.md).
  // lenet, alexnet_v2 and overfeat run as fast or faster in NCHW, cifarnet
  // much faster (its LRN kernel is NCHW).
  return NetFactsOf(model_name).cpu_channels_last
             ? torch::MemoryFormat::ChannelsLast
             : torch::MemoryFormat::Contiguous;
}

void Net::SetMemoryFormat(torch::MemoryFormat format) {
  SLIM_CHECK(format == torch::MemoryFormat::Contiguous ||
                 format == torch::MemoryFormat::ChannelsLast,
             "a net computes in NCHW or channels-last order, not ", format);
  torch::NoGradGuard no_grad;
  auto convert = [&](torch::Tensor t) {
    if (t.dim() == 4 && !t.is_contiguous(format)) t.set_(t.contiguous(format));
  };
  for (auto& p : module().parameters()) convert(p);
  for (auto& b : module().buffers()) convert(b);
  memory_format_ = format;
}

torch::Tensor Net::InNetFormat(const torch::Tensor& images) const {
  if (images.dim() != 4 || images.is_contiguous(memory_format_)) return images;
  return images.contiguous(memory_format_);
}

void Net::CheckImageSize(int64_t size) const {
  SLIM_CHECK(size == default_image_size(), scope(), " takes only ",
             default_image_size(), "x", default_image_size(),
             " images (its fully-connected layers are sized for them), not ",
             size, "x", size);
}

int64_t Net::NumParameters() {
  int64_t n = 0;
  for (const auto& p : module().parameters()) n += p.numel();
  return n;
}

void SetLogits(NetOutput& out, const torch::Tensor& logits) {
  out.logits = logits;
  out.end_points.emplace_back("Logits", logits);
  out.end_points.emplace_back("Predictions", torch::softmax(logits, 1));
}

torch::Tensor GlobalPool(const torch::Tensor& x, EndPoints& end_points) {
  torch::Tensor pooled = nets::SpatialMean(x);
  end_points.emplace_back("global_pool", pooled);
  return pooled;
}

torch::Tensor SqueezeSpatial(const torch::Tensor& logits,
                             const NetOptions& options) {
  if (!options.spatial_squeeze()) return logits;
  // TensorFlow's squeeze needs 1x1 maps (CheckImageSize keeps them so).
  if (logits.dim() == 4 && logits.size(2) == 1 && logits.size(3) == 1) {
    return nets::SqueezeHw(logits);
  }
  return logits.squeeze(3).squeeze(2);
}

void CheckNetInput(const torch::Tensor& images, const std::string& net,
                   int64_t channels, int64_t size, const std::string& why) {
  SLIM_CHECK(images.dim() == 4 && images.size(1) == channels, net,
             " expects [N, ", channels, ", H, W] images, got ", images.sizes());
  SLIM_CHECK(images.size(2) == size && images.size(3) == size, net, " expects ",
             size, "x", size, " images (", why, "), got ", images.size(2), "x",
             images.size(3));
}

void CheckSquareImages(const torch::Tensor& images, const std::string& net,
                       int64_t channels) {
  SLIM_CHECK(images.dim() == 4 && images.size(1) == channels &&
                 images.size(2) == images.size(3),
             net, " expects square [N, ", channels, ", S, S] images, got ",
             images.sizes());
}

NetRegistry& GetNetRegistry() {
  static NetRegistry registry("model");
  return registry;
}

void RegisterNet(const std::string& name, NetFactory factory, NetFacts facts) {
  const std::string preprocessing = facts.preprocessing;
  GetNetRegistry().Register(
      name, NetDescriptor{std::move(factory), std::move(facts)});
  if (preprocessing.empty() || preprocessing == name) return;
  GetPreprocessingRegistry().Alias(name, preprocessing);
  GetBatchPreprocessingRegistry().Alias(name, preprocessing);
  GetCounterBatchPreprocessingRegistry().Alias(name, preprocessing);
}

const NetFacts& NetFactsOf(const std::string& name) {
  static const NetFacts kNone;
  return GetNetRegistry().Has(name) ? GetNetRegistry().Get(name).facts : kNone;
}

std::shared_ptr<Net> CreateNet(const std::string& name,
                               const NetOptions& options) {
  std::shared_ptr<Net> net = GetNetRegistry().Get(name).factory(options);
  net->registered_name_ = name;
  net->options_ = std::make_shared<const NetOptions>(options);
  return net;
}

void Net::EnableQuantization(const nets::QuantizeOptions& options,
                             int64_t image_size) {
  SLIM_CHECK(!quantizer_, scope(), " is quantized already");
  SLIM_CHECK(num_frames() == 0, "quantizing the video nets (", registered_name_,
             ") is not supported yet: their 3-D convolutions have no 8-bit "
             "rewrite");
  const int64_t size = image_size > 0 ? image_size : default_image_size();
  auto quantizer =
      std::make_shared<nets::Quantizer>(module(), scope(), options);
  // An eval-mode pass on a zero batch finds every range, a training-mode one
  // those of the auxiliary heads; the state they touch (batch norm's moving
  // statistics, the global generator's draws) is put back.
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  const at::Tensor rng = gen.get_state();
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved;
  for (const torch::Tensor& b : module().buffers()) {
    saved.emplace_back(b, b.clone());
  }
  const bool was_training = module().is_training();
  module().train(false);
  torch::Device device(torch::kCPU);
  for (const torch::Tensor& p : module().parameters()) {
    device = p.device();
    break;
  }
  const torch::Tensor images =
      torch::zeros({2, input_channels(), size, size}, torch::Device(device));
  quantizer_ = quantizer;  // (Forward activates it)
  try {
    quantizer->Discover([&] { Forward(images); });
    // Training may run more (an auxiliary head); a size the net cannot
    // train on fails here as training itself would, later.
    module().train(true);
    try {
      quantizer->Discover([&] { Forward(images); });
    } catch (const std::exception&) {
    }
  } catch (...) {
    quantizer_.reset();
    module().train(was_training);
    for (auto& b : saved) b.first.copy_(b.second);
    gen.set_state(rng);
    throw;
  }
  module().train(was_training);
  for (auto& b : saved) b.first.copy_(b.second);
  gen.set_state(rng);
  quantized_image_size_ = size;
}

std::shared_ptr<Net> Net::Rebuild(const c10::optional<torch::Device>& device) {
  if (!options_) return nullptr;
  std::shared_ptr<Net> copy;
  {
    // The fresh net's initializers draw from the global generator: put its
    // state back, so cloning changes no later draw.
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    const at::Tensor state = gen.get_state();
    copy = CreateNet(registered_name_, *options_);
    gen.set_state(state);
  }
  // A quantized net's copy gets the same ranges (then copied below).
  if (quantizer_) {
    copy->EnableQuantization(quantizer_->options(), quantized_image_size_);
    copy->quantizer_->SetGlobalStep(quantizer_->global_step());
  }
  torch::NoGradGuard no_grad;
  const auto params = module().named_parameters();
  const auto buffers = module().named_buffers();
  for (auto& p : copy->module().named_parameters()) {
    const torch::Tensor& src = params[p.key()];
    p.value().set_(src.detach().clone());
    p.value().requires_grad_(src.requires_grad());
  }
  for (auto& b : copy->module().named_buffers()) {
    b.value().set_(buffers[b.key()].detach().clone());
  }
  const auto params_now = module().parameters();
  const torch::Device where =
      device.value_or(params_now.empty() ? torch::Device(torch::kCPU)
                                         : params_now.front().device());
  copy->module().to(where);
  copy->module().train(module().is_training());
  copy->SetMemoryFormat(memory_format_);
  return copy;
}

}  // namespace slimtorch
