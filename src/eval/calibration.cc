#include "slimtorch/eval/calibration.h"

#include <glog/logging.h>

#include <map>
#include <memory>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/data/input.h"
#include "slimtorch/data/pipeline.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace {

InputOptions CalibrationInput(const CalibrationRun& run) {
  InputOptions input;
  input.dataset_dir = run.dataset_dir;
  input.split_name = run.split_name;
  input.preprocessing_name =
      run.preprocessing_name.empty() ? run.model_name : run.preprocessing_name;
  input.image_size = run.image_size;
  input.use_grayscale = run.use_grayscale;
  input.batch_size = run.batch_size;
  input.training = false;  // the evaluation preprocessing, in order
  input.num_readers = 1;
  return input;
}

// The calibration data's source, checked against the net.
std::unique_ptr<BatchSource> CalibrationSource(const Net& net,
                                               const CalibrationRun& run,
                                               std::string* dataset) {
  SLIM_CHECK(run.batches > 0, "--calibration_batches must be positive, got ",
             run.batches);
  SLIM_CHECK(run.batch_size > 0,
             "--calibration_batch_size must be positive, got ", run.batch_size);
  const DatasetSpec spec = ResolveDatasetSpec(run.dataset_name, run.dataset_dir);
  const InputOptions input = CalibrationInput(run);
  const int64_t channels = InputChannels(spec, input);
  SLIM_CHECK(channels == net.input_channels(), "calibration dataset '",
             spec.name, "' in ", run.dataset_dir, " gives ", channels,
             "-channel images but the net takes ", net.input_channels(),
             " (its --dataset_name / --use_grayscale): calibrate on data of "
             "the kind the net was trained on");
  SLIM_CHECK(spec.SplitSize(run.split_name) > 0, "calibration split '",
             run.split_name, "' of '", spec.name, "' in ", run.dataset_dir,
             " has no examples");
  *dataset = spec.name + "/" + run.split_name;
  return MakeInput(spec, input);
}

// Runs the float forward passes with every activation shown to its
// observer (one per range, made on first sight).
void ObserveBatches(Net& net, BatchSource& source, const CalibrationRun& run,
                    std::map<std::string, nets::RangeObserver>* observers,
                    CalibrationResult* result) {
  nets::Quantizer* q = net.quantizer();
  q->SetObserver([&](const std::string& name, const torch::Tensor& y) {
    auto it = observers->find(name);
    if (it == observers->end()) {
      it = observers->emplace(name, nets::RangeObserver(run.method)).first;
    }
    it->second.Observe(y);
  });
  try {
    torch::NoGradGuard no_grad;
    net.module().eval();
    while (result->batches < run.batches) {
      std::optional<Batch> batch = source.Next();
      if (!batch) break;
      net.Forward(batch->images);
      ++result->batches;
      result->examples += batch->images.size(0);
    }
  } catch (...) {
    q->SetObserver(nullptr);
    throw;
  }
  q->SetObserver(nullptr);
  SLIM_CHECK(result->batches > 0, "calibration split '", run.split_name,
             "' of ", run.dataset_dir, " gave no batch");
}

}  // namespace

CalibrationResult CalibrateQuantization(Net& net, const CalibrationRun& run) {
  nets::Quantizer* q = net.quantizer();
  SLIM_CHECK(q != nullptr, "calibration needs an 8-bit net (--quantize)");
  std::string dataset;
  std::unique_ptr<BatchSource> source = CalibrationSource(net, run, &dataset);
  std::map<std::string, nets::RangeObserver> observers;
  CalibrationResult result;
  ObserveBatches(net, *source, run, &observers, &result);
  for (const std::string& name : q->ActivationRangeNames()) {
    auto it = observers.find(name);
    SLIM_CHECK(it != observers.end(), "calibration: activation ", name,
               " was never seen");
    std::pair<float, float> r;
    try {
      r = it->second.Range();
    } catch (const std::exception& e) {
      SLIM_FAIL("calibration on ", run.dataset_dir, ": activation range ",
                name, ": ", e.what());
    }
    q->SetActivationRange(name, r.first, r.second);
    ++result.ranges;
  }
  q->CheckRanges();
  LOG(INFO) << "Calibrated " << result.ranges << " activation ranges on "
            << result.examples << " examples (" << result.batches
            << " batches) of " << dataset;
  return result;
}

}  // namespace slimtorch
