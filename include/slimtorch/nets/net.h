#pragma once
// The net zoo's common interface and registry (TF-Slim's nets_factory).
//
// A net is a LibTorch module whose variables carry TF-Slim's names
// ("LeNet/conv1/weights"); Forward() takes NCHW float images and returns
// the logits plus TF-Slim's end points. Nets register by name with
// SLIM_REGISTER_NET and are built with CreateNet().

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/core/registry.h"
#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {

// What get_network_fn(name, num_classes, weight_decay, is_training) takes.
struct NetOptions {
  // Output classes; 0 omits the logits layer and returns pre-logits features.
  TORCH_ARG(int64_t, num_classes) = 1000;
  // L2 coefficient passed into the net's arg scope (--weight_decay).
  TORCH_ARG(double, weight_decay) = 0.0;
  // Channels of the preprocessed images (TF-Slim infers it from the input).
  TORCH_ARG(int64_t, input_channels) = 3;
  // Height = width of the images the net will take (--train_image_size /
  // --eval_image_size); 0 = the net's default_image_size. Only nets whose
  // variables' shapes depend on it read it (TF-Slim sizes some kernels from
  // the input, e.g. inception_v4's AuxLogits/Conv2d_2a); their
  // CheckImageSize() then rejects other sizes.
  TORCH_ARG(int64_t, image_size) = 0;
  // TF-Slim's global_pool argument, where the net has one (alexnet_v2,
  // overfeat, vgg, inception v1-v3, mobilenet_v1: default false; resnet:
  // default true): true averages the last map over H and W (end point
  // "global_pool"), so that larger images than the default work; unset =
  // the net's default (what nets_factory, and so train_image_classifier,
  // uses).
  TORCH_ARG(c10::optional<bool>, global_pool) = c10::nullopt;
  // TF-Slim's spatial_squeeze (default true): logits [N, C] rather than
  // [N, C, 1, 1], for the nets whose logits layer is a 1x1 conv.
  TORCH_ARG(bool, spatial_squeeze) = true;
  // Video nets (i3d, s3dg): the frames of a clip; 0 = the net's default
  // (64). Image nets ignore it.
  TORCH_ARG(int64_t, num_frames) = 0;
};

// TF-Slim's end points, (key, tensor) in the order the net produces them.
// Nets add them with emplace_back(), which, while a LayerCostRecorder is
// active (SummarizeNet), also notes the cost of the layers called since the
// previous end point as this one's.
class EndPoints : public std::vector<std::pair<std::string, torch::Tensor>> {
 public:
  void emplace_back(std::string key, torch::Tensor value);
  // Per end point, when recorded (else empty).
  const std::vector<nets::LayerCost>& costs() const { return costs_; }

 private:
  std::vector<nets::LayerCost> costs_;
};

struct NetOutput {
  // [N, num_classes] logits (or pre-logits features when num_classes == 0).
  torch::Tensor logits;
  EndPoints end_points;
  // Auxiliary logits (Inception), undefined when the net has none.
  torch::Tensor aux_logits;
};

class Net {
 public:
  virtual ~Net() = default;
  // images: [N, C, H, W] float on the net's device. Training mode (dropout,
  // batch statistics) follows module().is_training().
  virtual NetOutput Forward(const torch::Tensor& images) = 0;
  virtual torch::nn::Module& module() = 0;
  // A deep copy on `device` (default: where this net is), in the same
  // memory order and mode, with the same values and trainability. Nets made
  // by CreateNet are rebuilt from their name and options and their state
  // copied by name (LibTorch's Module::clone re-creates a net's layers but
  // leaves members that point into a Scope dict on the unregistered
  // originals); others fall back to Module::clone.
  virtual std::shared_ptr<Net> Clone(
      const c10::optional<torch::Device>& device = c10::nullopt) const = 0;

  // TF-Slim scope of the net's variables ("LeNet").
  virtual const std::string& scope() const = 0;
  // TF-Slim's default_image_size.
  virtual int64_t default_image_size() const = 0;
  // Input channels the net is built for.
  virtual int64_t input_channels() const = 0;
  // Video nets (i3d, s3dg), which take clips [N, C, T, H, W]: the frames T
  // of a clip (NetOptions::num_frames or the net's default); 0 for the image
  // nets.
  virtual int64_t num_frames() const { return 0; }
  // Throws, saying why, unless the net takes size x size images. The
  // default accepts default_image_size() only (nets with fixed-size
  // fully-connected layers); nets that take other sizes override it.
  virtual void CheckImageSize(int64_t size) const;
  // The trainer's global step before each training step (the step the
  // update will make is step + 1), for nets whose training depends on it
  // (NASNet / PNASNet's drop-path schedule, a quantized net's
  // --quantize_delay); others ignore it.
  virtual void SetGlobalStep(int64_t step) { (void)step; }

  // Makes this an 8-bit net (nets/quantize.h): TensorFlow's contrib.quantize
  // rewrite, training or eval by the module's mode. Runs the net once on a
  // zero batch of `image_size` (0: the default size) to create its ranges,
  // which become model variables; the net's state is otherwise unchanged.
  // Throws for the video nets ("not supported yet") and when called twice.
  void EnableQuantization(const nets::QuantizeOptions& options,
                          int64_t image_size = 0);
  // The net's quantizer, or null for a float net.
  nets::Quantizer* quantizer() const { return quantizer_.get(); }

  // Trainable variables (parameters), TF-Slim names, in module order.
  NamedTensors TrainableVariables();
  // All model variables: parameters and buffers (BN moving statistics).
  NamedTensors ModelVariables();
  // Sum of every layer's L2 term, or a zero scalar when there is none.
  torch::Tensor RegularizationLoss();
  // Adds the gradient of RegularizationLoss() (c * V for each regularized
  // variable V with coefficient c) to the .grad of every regularized
  // variable that requires grad (creating .grad when missing), and returns
  // RegularizationLoss()'s value (0-d, no autograd). The same as
  // backpropagating RegularizationLoss(), in one pass over the weights and
  // without autograd's temporaries (a quarter of VGG-16's CPU step).
  torch::Tensor ApplyRegularizationGradients();
  // Total number of parameter elements.
  int64_t NumParameters();
  // The memory order of the net's 4-D tensors: NCHW (LibTorch's default)
  // or channels-last (NHWC in memory, the order oneDNN's CPU convolutions
  // and batch norm kernels run fastest in for most nets). Converts every
  // 4-D parameter and buffer in place, once (the tensors stay the same
  // objects, so optimizers and moving averages built later follow);
  // Forward then converts its images. Shapes, names, checkpoints, exports
  // and TfModelVariables are the same in both: only strides differ.
  void SetMemoryFormat(torch::MemoryFormat format);
  torch::MemoryFormat memory_format() const { return memory_format_; }
  // Every model variable in TensorFlow's layout (FromTfLayout's inverse;
  // copies), as TF-Slim's checkpoints hold them.
  NamedTensors TfModelVariables();
  // The TensorFlow shape of every model variable, by name.
  std::map<std::string, std::vector<int64_t>> TfVariableShapes();

 protected:
  // The images in the net's memory order.
  torch::Tensor InNetFormat(const torch::Tensor& images) const;
  // Clone() for a net CreateNet made: a fresh one from the registry (the
  // global generator's state kept), this net's state copied in; null for
  // a net made otherwise.
  std::shared_ptr<Net> Rebuild(const c10::optional<torch::Device>& device);
  torch::MemoryFormat memory_format_ = torch::MemoryFormat::Contiguous;
  // While Forward runs: this net's quantizer active on the thread.
  std::shared_ptr<nets::Quantizer> quantizer_;
  int64_t quantized_image_size_ = 0;
  struct ForwardScope {
    explicit ForwardScope(nets::Quantizer* q) : scope(q) {
      if (q) q->BeginPass();
    }
    nets::QuantizerScope scope;
  };

 private:
  friend std::shared_ptr<Net> CreateNet(const std::string& name,
                                        const NetOptions& options);
  // Set by CreateNet.
  std::string registered_name_;
  std::shared_ptr<const NetOptions> options_;

 protected:
 private:
  // Depth multiplier of each depthwise kernel other than 1, by name.
  std::map<std::string, int64_t> DepthMultipliers();
};

// A variable between TensorFlow's layout and ours, decided by its name and
// rank, never by its shape (a square kernel would be ambiguous):
//   "…depthwise_weights", rank 4: TF [kh, kw, in, mult] ↔ ours
//     [in * mult, 1, kh, kw] (channel c * mult + m is TF's [.., c, m]);
//   other rank 4 (convolution kernels): TF [kh, kw, in, out] ↔ ours
//     [out, in, kh, kw];
//   rank 2 (fully connected): TF [in, out] ↔ ours [out, in] (our flatten
//     is NHWC-ordered, as TensorFlow's, so no row permutation is needed);
//   rank 5 (3-D convolution kernels): TF [kt, kh, kw, in, out] ↔ ours
//     [out, in, kt, kh, kw];
//   any other rank: unchanged.
// Results are contiguous. ToTfLayout needs a depthwise kernel's multiplier.
torch::Tensor FromTfLayout(const std::string& name, const torch::Tensor& tf);
torch::Tensor ToTfLayout(const std::string& name, const torch::Tensor& ours,
                         int64_t depth_multiplier = 1);
// FromTfLayout written into `dst` (our shape), without a temporary when
// both are contiguous CPU tensors of one 4-byte dtype.
void FromTfLayoutInto(const std::string& name, const torch::Tensor& tf,
                      const torch::Tensor& dst);
// True for the names FromTfLayout treats as depthwise kernels.
bool IsDepthwiseKernel(const std::string& name);

using NetFactory =
    std::function<std::shared_ptr<Net>(const NetOptions& options)>;

// What is known of a net before it is built, recorded once where the net
// registers (SLIM_REGISTER_NET_WITH_FACTS) and read by the run's checks and
// set-up.
struct NetFacts {
  // Its forward pass changes with the global step (Net::SetGlobalStep:
  // NASNet's drop path schedule), so a captured step (--cuda_graph) would
  // freeze it.
  bool follows_global_step = false;
  // It trains faster channels-last than channels-first on CPUs: the memory
  // format --data_format=auto gives it there (ResolveDataFormat). Measured
  // with bench/step_profile --data_format (docs/performance.md).
  bool cpu_channels_last = false;
  // A video net's default frames of a clip (Net::num_frames); 0 for an
  // image net.
  int64_t num_frames = 0;
  // The preprocessing TF-Slim's preprocessing_factory maps the net's name
  // to ("inception", "vgg", ...): registering the net registers its name as
  // that preprocessing's (every form's) other name. Empty: a preprocessing
  // of the net's own name, if one registered (the video nets have none).
  std::string preprocessing;

  NetFacts& FollowsGlobalStep(bool on = true) {
    follows_global_step = on;
    return *this;
  }
  NetFacts& CpuChannelsLast(bool on = true) {
    cpu_channels_last = on;
    return *this;
  }
  NetFacts& NumFrames(int64_t frames) {
    num_frames = frames;
    return *this;
  }
  NetFacts& Preprocessing(std::string name) {
    preprocessing = std::move(name);
    return *this;
  }
};

// A registered net: how to build it and its facts.
struct NetDescriptor {
  NetFactory factory;
  NetFacts facts;
};
using NetRegistry = Registry<NetDescriptor>;
NetRegistry& GetNetRegistry();

// Registers the net `name` (SLIM_REGISTER_NET*): its descriptor, and its
// name as the other name of facts.preprocessing in the preprocessing
// registries.
void RegisterNet(const std::string& name, NetFactory factory, NetFacts facts);

// The facts of the net registered as `name`; a name no net registered has
// the defaults (checks read facts before the name is validated; the name
// itself fails where the net is built, listing the valid names).
const NetFacts& NetFactsOf(const std::string& name);

// Builds the net registered as `name`; throws listing the valid names.
std::shared_ptr<Net> CreateNet(const std::string& name,
                               const NetOptions& options);

// --data_format: "channels_first" (NCHW), "channels_last" (NHWC), or
// "auto": channels-last on CPU for the nets measured faster in it
// (bench/train_cpu/net_zoo_cpu.sh), NCHW for the others and on GPUs.
enum class DataFormat { kAuto, kChannelsFirst, kChannelsLast };
// The flag's value as a DataFormat; throws on any other value.
DataFormat ParseDataFormat(const std::string& flag);

// The memory order `data_format` asks of net `model_name` on `device`.
torch::MemoryFormat ResolveDataFormat(DataFormat data_format,
                                      const std::string& model_name,
                                      const torch::Device& device);
// The same from the flag's value (ParseDataFormat).
torch::MemoryFormat ResolveDataFormat(const std::string& data_format,
                                      const std::string& model_name,
                                      const torch::Device& device);

// Sets out.logits and appends TF-Slim's end points "Logits" and
// "Predictions" (the softmax over dim 1).
void SetLogits(NetOutput& out, const torch::Tensor& logits);

// A head's global average pool: the mean of `x` [N, C, H, W] over H and W,
// [N, C, 1, 1], appended to `end_points` as "global_pool" (TF-Slim's key).
torch::Tensor GlobalPool(const torch::Tensor& x, EndPoints& end_points);

// TF-Slim's spatial_squeeze on a conv head's [N, C, 1, 1] logits: [N, C]
// when options.spatial_squeeze(), else unchanged.
torch::Tensor SqueezeSpatial(const torch::Tensor& logits,
                             const NetOptions& options);

// Throws unless `images` is [N, channels, size, size]; `why` says why the
// net needs that size ("its fc3 is 7*7*64 wide").
void CheckNetInput(const torch::Tensor& images, const std::string& net,
                   int64_t channels, int64_t size, const std::string& why);

// Whether a net implementation has its own CheckImageSize(int64_t).
template <typename T, typename = void>
struct HasCheckImageSize : std::false_type {};
template <typename T>
struct HasCheckImageSize<
    T,
    std::void_t<decltype(std::declval<const T&>().CheckImageSize(int64_t{}))>>
    : std::true_type {};

// Whether a net implementation has int64_t num_frames() const (a video net).
template <typename T, typename = void>
struct HasNumFrames : std::false_type {};
template <typename T>
struct HasNumFrames<
    T, std::void_t<decltype(std::declval<const T&>().num_frames())>>
    : std::true_type {};

// Whether a net implementation has SetGlobalStep(int64_t).
template <typename T, typename = void>
struct HasSetGlobalStep : std::false_type {};
template <typename T>
struct HasSetGlobalStep<
    T, std::void_t<decltype(std::declval<T&>().SetGlobalStep(int64_t{}))>>
    : std::true_type {};

// Adapts a TORCH_MODULE implementation (a Cloneable with
//   NetOutput forward(const torch::Tensor&),
//   int64_t input_channels() const,
//   optionally void CheckImageSize(int64_t) const and, for a video net,
//   int64_t num_frames() const)
// to the Net interface, with the net's TF-Slim scope and default size
// (runtime values, so that one implementation can serve several variants:
// vgg_a / vgg_16 / vgg_19, resnet_v1_50 ... resnet_v2_200).
template <typename Impl>
class ModuleNet : public Net {
 public:
  ModuleNet(std::shared_ptr<Impl> impl, std::string scope,
            int64_t default_image_size)
      : impl_(std::move(impl)),
        scope_(std::move(scope)),
        default_image_size_(default_image_size) {}
  NetOutput Forward(const torch::Tensor& images) override {
    ForwardScope quantized(quantizer_.get());
    return impl_->forward(InNetFormat(images));
  }
  torch::nn::Module& module() override { return *impl_; }
  std::shared_ptr<Net> Clone(
      const c10::optional<torch::Device>& device) const override {
    if (auto rebuilt = const_cast<ModuleNet*>(this)->Rebuild(device)) {
      return rebuilt;
    }
    auto copy = std::make_shared<ModuleNet<Impl>>(
        std::dynamic_pointer_cast<Impl>(impl_->clone(device)), scope_,
        default_image_size_);
    copy->SetMemoryFormat(memory_format_);  // the copies keep the layout
    return copy;
  }
  const std::string& scope() const override { return scope_; }
  int64_t default_image_size() const override { return default_image_size_; }
  int64_t input_channels() const override { return impl_->input_channels(); }
  int64_t num_frames() const override {
    if constexpr (HasNumFrames<Impl>::value) {
      return impl_->num_frames();
    } else {
      return 0;
    }
  }
  void CheckImageSize(int64_t size) const override {
    if constexpr (HasCheckImageSize<Impl>::value) {
      impl_->CheckImageSize(size);
    } else {
      Net::CheckImageSize(size);
    }
  }
  void SetGlobalStep(int64_t step) override {
    if (quantizer_) quantizer_->SetGlobalStep(step);
    if constexpr (HasSetGlobalStep<Impl>::value) impl_->SetGlobalStep(step);
  }
  Impl& impl() { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
  std::string scope_;
  int64_t default_image_size_;
};

// A NetFactory for ModuleNet<Impl>, Impl built from the NetOptions, with
// Impl's static constexpr kScope and kDefaultImageSize:
// SLIM_REGISTER_NET("lenet", MakeModuleNet<nets::LeNetImpl>).
template <typename Impl>
std::shared_ptr<Net> MakeModuleNet(const NetOptions& options) {
  return std::make_shared<ModuleNet<Impl>>(
      std::make_shared<Impl>(options), Impl::kScope, Impl::kDefaultImageSize);
}

// One line of a model summary.
struct EndPointSummary {
  std::string name;
  // Output shape for one example ([1, C, H, W], [1, C, T, H, W] or [1, K]).
  std::vector<int64_t> shape;
  // Parameters and multiply-adds per example of the layers run since the
  // previous end point.
  int64_t parameters = 0;
  int64_t multiply_adds = 0;
};
struct NetSummary {
  std::string net;
  int64_t image_size = 0;
  int64_t num_frames = 0;  // video nets: frames of the example clip
  std::vector<EndPointSummary> end_points;
  int64_t parameters = 0;     // every trainable variable
  int64_t multiply_adds = 0;  // per example, all layers
  // A table: one line per end point (shape, parameters, multiply-adds),
  // then the totals.
  std::string ToString() const;
};

// Runs `net` once on a zero image_size x image_size example (inference mode,
// no gradients, the net's device; its training mode is restored) and
// reports each end point's shape and cost. A video net's example is a clip
// of num_frames() frames.
NetSummary SummarizeNet(Net& net, int64_t image_size);

// Registers `modules` (name → module, in order) as the children of a
// ModuleDict, so that their variables are named "<scope>/<name>/...": a
// TF-Slim variable scope around layers. Register the result with
// register_module(scope, Scope(...)).
using NamedModules =
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;
inline torch::nn::ModuleDict Scope(const NamedModules& modules) {
  torch::nn::ModuleDict dict;
  dict->update(modules);
  return dict;
}

// Throws unless `images` is [N, channels, S, S] (square, any S).
void CheckSquareImages(const torch::Tensor& images, const std::string& net,
                       int64_t channels);

}  // namespace slimtorch

// SLIM_REGISTER_NET("lenet", factory) where factory: NetOptions →
// shared_ptr<Net>.
#define SLIM_REGISTER_NET(name, factory)                              \
  SLIM_STATIC_REGISTRATION([] {                                       \
    ::slimtorch::RegisterNet(name, factory, ::slimtorch::NetFacts{}); \
  })
// The same with the net's NetFacts (an expression evaluated at registration).
#define SLIM_REGISTER_NET_WITH_FACTS(name, factory, facts) \
  SLIM_STATIC_REGISTRATION(                                \
      [] { ::slimtorch::RegisterNet(name, factory, facts); })
