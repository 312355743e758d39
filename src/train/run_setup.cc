#include "slimtorch/train/run_setup.h"

#include <algorithm>

#include "slimtorch/core/error.h"

namespace slimtorch {

InputOptions ResolveRunInput(const RunOptions& o) {
  InputOptions input = o;
  if (input.preprocessing_name.empty()) input.preprocessing_name = o.model_name;
  return input;
}

void CheckImageNet(const std::string& model_name, int64_t num_frames) {
  // The video nets take clips; these tools read image datasets (TF-Slim's
  // image scripts cannot run them either: their 4-D images do not fit).
  const bool video = num_frames > 0 || NetFactsOf(model_name).num_frames > 0;
  SLIM_CHECK(!video, "--model_name=", model_name,
             " is a video net: it takes clips [batch, frames, height, width, "
             "channels], and train_image_classifier / eval_image_classifier "
             "read image datasets only. Export it with export_inference_graph "
             "--is_video_model --num_frames=N, or run it from C++ on clips.");
}

std::shared_ptr<Net> BuildRunNet(const DatasetSpec& spec, const RunOptions& o,
                                 NetOptions net, bool training,
                                 InputOptions* input) {
  std::shared_ptr<Net> built = CreateNet(
      o.model_name, net.num_classes(NumNetClasses(spec, o.labels_offset))
                        .input_channels(InputChannels(spec, *input))
                        .image_size(std::max<int64_t>(o.image_size, 0)));
  CheckImageNet(o.model_name, built->num_frames());
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
  if (o.quantize) built->EnableQuantization(*o.quantize, input->image_size);
  return built;
}

}  // namespace slimtorch
