#include "slimtorch/io/jpeg_error.h"

#include <jerror.h>

namespace slimtorch {

void JpegErrorExit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrorJump*>(cinfo->err);
  e->base.format_message(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int level) {
  auto* e = reinterpret_cast<JpegErrorJump*>(cinfo->err);
  if (level < 0 && e->base.msg_code == JWRN_JPEG_EOF) e->truncated = true;
}

}  // namespace slimtorch
