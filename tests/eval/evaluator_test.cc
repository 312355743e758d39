#include "slimtorch/eval/evaluator.h"

#include <gtest/gtest.h>

#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// A 3-class dataset of 28x28x1 images, registered for this test only.
DatasetSpec TinySpec() {
  DatasetSpec s;
  s.name = "evaluator_test_tiny";
  s.splits_to_sizes = {{"test", 23}};
  s.num_classes = 3;
  s.file_pattern = "tiny_%s.tfrecord";
  s.image_height = 28;
  s.image_width = 28;
  s.image_channels = 1;
  return s;
}
SLIM_REGISTER_DATASET("evaluator_test_tiny", TinySpec);

TEST(EvaluatorTest, OnePassAccuracyMatchesTheNetAndSkipsRecall5) {
  testing::TempDir dir;
  testing::WriteTinyImageRecords(dir.Join("tiny_test.tfrecord"), 23, 10,
                                 {0, 1, 2, 2}, 28, 28, 1);
  torch::manual_seed(5);
  auto net = CreateNet("lenet",
                       NetOptions().num_classes(3).input_channels(1));
  CheckpointData ckpt;
  ckpt.tensors = net->ModelVariables();
  ckpt.tensors.push_back({"global_step", torch::tensor(int64_t{77})});
  SaveCheckpoint(dir.Join("model.safetensors"), ckpt);

  // Expected accuracy computed directly: image k has all pixels 10 + k,
  // lenet preprocessing maps them to (v - 128) / 128.
  net->module().eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  const int64_t labels[4] = {0, 1, 2, 2};
  for (int k = 0; k < 23; ++k) {
    torch::Tensor x = torch::full({1, 1, 28, 28}, (10.0 + k - 128.0) / 128.0);
    correct += net->Forward(x).logits.argmax(1).item<int64_t>() == labels[k % 4];
  }

  EvalOptions o;
  o.checkpoint_path = dir.Join("model.safetensors");
  o.eval_dir = dir.Join("eval");
  o.dataset_name = "evaluator_test_tiny";
  o.dataset_dir = dir.path();
  o.model_name = "lenet";
  o.batch_size = 5;  // 23 = 4 full batches + 3: no wrap-around
  o.num_preprocessing_threads = 2;
  EvalResult r = Evaluate(o);
  EXPECT_EQ(r.global_step, 77);
  EXPECT_EQ(r.num_examples, 23);
  EXPECT_DOUBLE_EQ(r.accuracy, correct / 23.0);
  EXPECT_FALSE(r.recall_5.has_value());  // 3 classes < 5
  EXPECT_FALSE(Glob(dir.Join("eval/events.out.tfevents.*")).empty());

  o.max_num_batches = 2;
  EXPECT_EQ(Evaluate(o).num_examples, 10);
}

}  // namespace
}  // namespace slimtorch
