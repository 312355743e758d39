#include "slimtorch/train/run_setup.h"

#include <algorithm>

namespace slimtorch {

InputOptions ResolveRunInput(const RunOptions& o) {
  InputOptions input = o;
  if (input.preprocessing_name.empty()) input.preprocessing_name = o.model_name;
  return input;
}

std::shared_ptr<Net> BuildRunNet(const DatasetSpec& spec, const RunOptions& o,
                                 NetOptions net, bool training,
                                 InputOptions* input) {
  std::shared_ptr<Net> built = CreateNet(
      o.model_name, net.num_classes(NumNetClasses(spec, o.labels_offset))
                        .input_channels(InputChannels(spec, *input))
                        .image_size(std::max<int64_t>(o.image_size, 0)));
  CheckPrecision(o.precision, o.device);
  built->module().to(o.device);
  built->SetMemoryFormat(
      ResolveDataFormat(o.data_format, o.model_name, o.device));
  if (training) {
    built->module().train();
  } else {
    built->module().eval();
  }
  input->image_size =
      o.image_size > 0 ? o.image_size : built->default_image_size();
  built->CheckImageSize(input->image_size);
  return built;
}

}  // namespace slimtorch
