// Converts Fashion-MNIST and trains LeNet on it through slimtorch's library
// (no command-line tool): the datasets' converter registry, the nets
// factory and Train(), as train_image_classifier uses them.
//
//   train_lenet <source_url> <work_dir> [steps]
//   train_lenet file:///usr/share/datasets/fashion-mnist/ /tmp/lenet 200
#include <cmath>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "slimtorch/datasets/dataset.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/trainer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <source_url> <work_dir> [steps]\n";
    return 2;
  }
  const std::string work_dir = argv[2];
  try {
    slimtorch::ConvertOptions convert;
    convert.dataset_dir = work_dir + "/data";
    convert.source_url = argv[1];
    slimtorch::GetConverterRegistry().Get("fashion_mnist")(convert);

    slimtorch::TrainOptions train;
    train.train_dir = work_dir + "/train";
    train.dataset_name = "fashion_mnist";
    train.dataset_dir = convert.dataset_dir;
    train.model_name = "lenet";
    train.optimizer = "sgd";
    train.learning_rate_decay_type = "fixed";
    train.learning_rate.learning_rate = 0.01;
    train.batch_size = 50;
    train.weight_decay = 0;
    train.seed = 1;
    train.log_every_n_steps = 50;
    train.max_number_of_steps = argc > 3 ? std::atoll(argv[3]) : 200;
    slimtorch::TrainResult result = slimtorch::Train(train);

    std::cout << "nets registered: " << slimtorch::GetNetRegistry().Names().size()
              << "\nglobal step: " << result.global_step
              << "\nlast loss: " << result.last_loss
              << "\ncheckpoint: " << result.checkpoint << std::endl;
    return std::isfinite(result.last_loss) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
