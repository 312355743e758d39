#pragma once
// 8-bit nets: TensorFlow's contrib.quantize rewrite (quantization-aware
// training, the eval graph) applied by the layers themselves, and the
// post-training calibration of the same ranges.
//
// A Quantizer belongs to one net (Net::EnableQuantization). While that
// net's Forward runs, the quantizer is active on the thread, and every
// quantizable layer asks it for the weights it computes with and hands it
// its output:
//   - slim.conv2d (plain or depthwise), slim.separable_conv2d,
//     slim.fully_connected: the weights go through FakeQuant (8 bits,
//     narrow range, per tensor or per output channel) with a range taken
//     from the weights themselves at each training step (TF's
//     LastValueQuantize: [min(w_min, 0), max(w_max, 0)]); batch norm that
//     belongs to the layer is folded into the weights first, as
//     contrib.quantize's FoldBatchNorms does (training: the batch's
//     statistics, with the correction to the moving ones); the layer's
//     output after its activation (or its bias when it has none) goes
//     through FakeQuant (8 bits, per tensor) with a range that follows the
//     batch's [min, max] by a moving average (TF's MovingAvgQuantize,
//     decay 0.999) — "act_quant";
//   - the graph ops between layers whose input is quantized (or derived
//     from one by adding a constant), as TF's rewrite quantizes any Add or
//     Mul with a quantized input: the residual adds (Add: "add_quant";
//     AddRelu: "act_quant" after its ReLU, as TF puts it after the
//     activation that follows a bypass), Mul and Scale
//     ("activation_Mul_quant": MobileNet v3's hard-swish and
//     squeeze-excite), Relu6 ("act_quant": hard-swish's ReLU6), each named
//     after the scope of the layer quantized last.
// Pools, concatenations, means and the image input stay float, as TF's
// rewrite leaves them. Standalone batch norm layers (pre-activation
// ResNet v2, NASNet's cells) are not folded.
//
// The ranges are model variables (buffers of the net's root module):
// "<layer>/weights_quant/{min,max}" ("<layer>/separable_conv2d/weights_quant"
// for a separable conv's depthwise step), "<layer>/act_quant/{min,max}",
// "<block>/add_quant/{min,max}", plus the moving averages' zero-debias
// shadows "<range>/{min,max}/biased" and "…/local_step". They are saved and
// restored with the checkpoints and travel with Net::Clone.
//
// Modes, from the net's training flag and the quantizer's state:
//   training  (quantization-aware training): ranges updated every step;
//             FakeQuant applied from quant_delay on (TF counts its steps
//             from 1: the step that makes global step quant_delay, the
//             first with quant_delay 0 or 1, quantizes);
//   eval      (the eval rewrite / export): FakeQuant with the stored
//             ranges, batch norm folded with the moving statistics; the
//             recorded graph (export) gets the ranges (layer_trace.h:
//             QuantRange);
//   calibrating (post-training): a float forward pass (batch norm folded)
//             in which every activation that would be quantized is shown to
//             an observer; the weights' ranges are set from the weights.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {

struct QuantizeOptions {
  // Bits of weights and activations (contrib.quantize: 8 and 8).
  TORCH_ARG(int64_t, weight_bits) = 8;
  TORCH_ARG(int64_t, activation_bits) = 8;
  // Weights quantized per output channel (axis 0 of our layout) rather than
  // per tensor (TF-Slim's).
  TORCH_ARG(bool, per_channel) = false;
  // Decay of the activation ranges' moving averages (contrib: 0.999).
  TORCH_ARG(double, ema_decay) = 0.999;
  // Training: FakeQuant from this global step on (--quantize_delay); the
  // ranges follow the batches before it too.
  TORCH_ARG(int64_t, quant_delay) = 0;
  // Training: from this global step on, batch norm folds with the moving
  // statistics and stops updating them (contrib's freeze_bn_delay); -1:
  // never (create_training_graph).
  TORCH_ARG(int64_t, freeze_bn_delay) = -1;
};

// Sees each activation of a calibration pass: (range name, e.g.
// "MobilenetV1/Conv2d_0/act_quant", the float activation).
using ActivationObserver =
    std::function<void(const std::string&, const torch::Tensor&)>;

class Quantizer {
 public:
  // `root`: the net's module (its buffers get the ranges); `scope`: the
  // net's TF-Slim scope (names are "<scope>/<module path>/...").
  Quantizer(torch::nn::Module& root, std::string scope,
            const QuantizeOptions& options);
  Quantizer(const Quantizer&) = delete;
  Quantizer& operator=(const Quantizer&) = delete;

  const QuantizeOptions& options() const { return options_; }
  // Creates every range the net's forward pass asks for (`run` runs it
  // once, with this quantizer active and recording): called by
  // Net::EnableQuantization. Buffers are registered on the root module with
  // TensorFlow's initial values (weights -6..6, activations 0..6, adds
  // -6..6; shadows 0).
  void Discover(const std::function<void()>& run);

  // The training step that the next forward belongs to (Net::SetGlobalStep).
  void SetGlobalStep(int64_t step) { step_ = step; }
  int64_t global_step() const { return step_; }

  // Post-training calibration: while set, forward passes are float (batch
  // norm folded), each activation goes to `observer`, and each weight range
  // is set from its weights. Clear with nullptr.
  void SetObserver(ActivationObserver observer);
  bool calibrating() const { return static_cast<bool>(observer_); }
  // Sets an activation range (full name as the observer saw it; min <= 0 <=
  // max enforced by widening).
  void SetActivationRange(const std::string& name, double min, double max);

  // Every variable of the quantizer (TF-Slim names, as in
  // Net::ModelVariables), in creation order.
  std::vector<std::string> VariableNames() const;
  // The activation ranges' names ("…/act_quant", "…/add_quant"), in order.
  std::vector<std::string> ActivationRangeNames() const;
  // Throws naming the first range whose width is zero or not finite (a
  // collapsed range cannot quantize: every value would map to one level).
  void CheckRanges() const;

  // ---- For the layers (while this quantizer is active). ----
  bool training() const;
  // Whether batch norm folds with its moving statistics in training
  // (freeze_bn_delay reached).
  bool batch_norm_frozen() const;
  // The weights `layer` computes with: `w` (float, batch norm folded in)
  // fake-quantized with the range "<layer>/<name>" (name: "weights_quant",
  // "separable_conv2d/weights_quant"), updated from `w` when training or
  // calibrating; `traced` gets the range for the recorded graph.
  torch::Tensor Weights(const torch::nn::Module* layer, const std::string& name,
                        const torch::Tensor& w, QuantRange* traced);
  // `layer`'s output (after its activation) as the next layer sees it:
  // fake-quantized with "<layer>/act_quant".
  torch::Tensor LayerOutput(const torch::nn::Module* layer,
                            const torch::Tensor& y);
  // A residual add's output when an input is quantized: "<block>/add_quant"
  // (or "<block>/act_quant" when `activated`, the sum then ReLU), <block>
  // being the scope of the layer quantized last; else y.
  torch::Tensor AddOutput(const std::vector<torch::Tensor>& inputs,
                          const torch::Tensor& y, bool activated);
  // A graph op's output ("Mul", "Relu6") when an input is quantized (or
  // derived from one): "<block>/activation_Mul_quant", "<block>/act_quant";
  // else y.
  torch::Tensor OpOutput(const char* type,
                         const std::vector<torch::Tensor>& inputs,
                         const torch::Tensor& y);
  // `out` derives from `in` without being quantized itself (x + c): a
  // graph op on it counts as on a quantized value.
  void Derive(const torch::Tensor& in, const torch::Tensor& out);

  // Called by the net around each forward pass.
  void BeginPass();

 private:
  struct Range;
  Range& Find(const std::string& key, bool activation, double init_min,
              double init_max, int64_t channels);
  torch::Tensor Activation(const std::string& key, const torch::Tensor& y,
                           double init_min);
  // "<scope of the layer quantized last>/<name>", "_1", "_2" on repeats.
  std::string BlockKey(const std::string& name);
  void Mark(const torch::Tensor& t);
  bool AnyMarked(const std::vector<torch::Tensor>& ts) const;
  bool FakeQuantOn() const;
  std::string PathOf(const torch::nn::Module* layer) const;

  torch::nn::Module& root_;
  std::string scope_;
  QuantizeOptions options_;
  std::map<const torch::nn::Module*, std::string> paths_;  // relative
  std::map<std::string, std::shared_ptr<Range>> ranges_;
  std::vector<std::string> order_;  // keys in creation order
  bool discovering_ = false;
  int64_t step_ = 0;
  ActivationObserver observer_;
  // Within a pass: the last layer quantized, and the keys used (repeats of
  // a key get "_1", "_2", ...).
  std::string last_layer_;
  std::map<std::string, int> used_;
  // The values quantized (or derived) in this pass, by their TensorImpl;
  // the weak pointer tells a live one from a reused address.
  std::map<const void*, c10::weak_intrusive_ptr<c10::TensorImpl>> marked_;
};

// This thread's active quantizer, or null (a float net, or none running).
Quantizer* ActiveQuantizer();

// Makes `q` the active quantizer of this thread for its lifetime (nested
// scopes restore the previous one); null: none.
class QuantizerScope {
 public:
  explicit QuantizerScope(Quantizer* q);
  ~QuantizerScope();
  QuantizerScope(const QuantizerScope&) = delete;
  QuantizerScope& operator=(const QuantizerScope&) = delete;

 private:
  Quantizer* previous_;
};

}  // namespace nets
}  // namespace slimtorch
