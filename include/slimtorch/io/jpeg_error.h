#pragma once
// The libjpeg error manager of every JPEG encoder and decoder here: a fatal
// error keeps libjpeg's message and longjmps back to the caller's setjmp
// (libjpeg's default would exit the process).
//
// Usage: cinfo.err = jpeg_std_error(&err.base); err.base.error_exit =
// JpegErrorExit; (decoders also set emit_message = JpegEmitMessage), then
// `if (setjmp(err.jump) == 0) { ...libjpeg calls... }`. No C++ object with a
// destructor may live across the setjmp.

// clang-format off
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
// clang-format on

namespace slimtorch {

// `base` first: libjpeg hands JpegErrorExit a pointer to it.
struct JpegErrorJump {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};  // the fatal error's text
  bool truncated = false;  // set by JpegEmitMessage: the data ended early
};

// error_exit: formats the message into JpegErrorJump::message and longjmps.
void JpegErrorExit(j_common_ptr cinfo);

// emit_message: warnings are ignored as TensorFlow does, except the one for
// data that ends early (libjpeg would fill the rest with gray), which sets
// `truncated`: TF fails on truncated JPEGs unless asked to recover them.
void JpegEmitMessage(j_common_ptr cinfo, int level);

}  // namespace slimtorch
