// Restoring a net from a checkpoint, as train_image_classifier's
// --checkpoint_path and eval_image_classifier do it: RestoreCheckpointFor
// (TensorFlow V1/V2 or safetensors; read, CRCs, layout mapping, straight
// into the net's variables). bench/checkpoint/checkpoint_restore.sh
// runs it beside TensorFlow's own Saver.restore of the same file.
//
//   build/bench/restore_bench --checkpoint=/tmp/ckpt/v2/model.ckpt-1 \
//       --model_name=inception_v3 --num_classes=1001 --rounds=5
//
// The last line printed is machine-readable: restore_ms=<median>.

#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/variables.h"
#include "tool_common.h"

DEFINE_string(checkpoint, "", "Checkpoint path (prefix, file or directory).");
DEFINE_string(model_name, "inception_v3", "The net the checkpoint holds.");
DEFINE_int32(num_classes, 1001, "Its classes.");
DEFINE_int32(rounds, 5, "Timed restores (after one untimed).");
DEFINE_int32(num_threads, 0,
             "LibTorch's intra-op threads, as the tools' "
             "--num_intra_op_threads (0: every core).");

namespace slimtorch {
namespace {

void Run() {
  SLIM_CHECK(!FLAGS_checkpoint.empty(), "--checkpoint is required");
  SLIM_CHECK(FLAGS_rounds > 0, "--rounds must be positive");
  tools::SetThreads(FLAGS_num_threads);
  auto net =
      CreateNet(FLAGS_model_name, NetOptions().num_classes(FLAGS_num_classes));
  int restored = 0;
  std::vector<double> ms;
  for (int round = 0; round <= FLAGS_rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    restored = RestoreCheckpointFor(FLAGS_checkpoint, *net, {},
                                    /*shadows=*/false)
                   .restored;
    const double t = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (round > 0) ms.push_back(t);  // round 0 warms the page cache
    std::printf("round %d: %.1f ms (%d variables)\n", round, t, restored);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("restore_ms=%.2f\n", ms[ms.size() / 2]);
}

}  // namespace
}  // namespace slimtorch

int main(int argc, char** argv) {
  return slimtorch::tools::RunTool(argc, argv,
                                   "Times restoring a net from a checkpoint.",
                                   [] { slimtorch::Run(); });
}
