#pragma once
// BMP and GIF decoding with the pixels of TensorFlow's tf.io.decode_image
// (tf.io.decode_bmp / tf.io.decode_gif, uint8, expand_animations=False).
// Our own code; what TensorFlow does was established by running it
// (scripts/golden/gen_bmp_gif_goldens.py writes the cases and TF's answers to
// tests/golden/bmp_gif_goldens.inc).
//
// BMP, as TensorFlow reads it (its own reader, not a general BMP library):
//   * Only four header fields are read, at fixed file offsets: the pixel
//     data offset (10), width (18), height (22) and bits per pixel (28).
//     The header size / version (BITMAPINFOHEADER, V4, V5, ...), the
//     compression field and the bitfield masks are ignored, so V4/V5 files
//     decode like plain ones, and a BI_BITFIELDS 32-bit image is read as
//     BGRA whatever its masks say.
//   * Bytes per pixel = bits per pixel / 8 (integer division) must be 1, 3
//     or 4: 24-bit is BGR, 32-bit is BGRA, 8-bit is ONE channel holding the
//     raw byte — the palette is ignored, so a palette image gives its
//     indices, not its colours (a gray-palette image gives its grays).
//     1-, 4- and 16-bit images are rejected (as TF does).
//   * Rows are padded to 4 bytes; positive height = bottom-up rows, negative
//     = top-down. Width must be > 0, height != 0, width*|height| < 2^28, and
//     the file size must be exactly offset + padded row size * |height|
//     (trailing bytes or a short file are errors, as in TF).
//   * channels: 0 = the image's own count, except that alpha is dropped
//     (8-bit -> 1, 24-bit -> 3, 32-bit -> 3; TF would give 4 for 32-bit);
//     3 = RGB (an 8-bit image's byte is repeated into R, G and B, as TF
//     does); 1 is an error, as in TF ("channels must be 0, 3 or 4 for BMP"),
//     also for 8-bit images.
//
// GIF, as TensorFlow (giflib 5.2.2's DGifSlurp + TF's gif_io) reads it:
//   * All frames are read (only the first is returned). A frame counts when
//     it was read to its end: descriptor, colour table, LZW code size
//     (<= 8), data for all width*height pixels and the sub-block terminator.
//     Reading stops at the first problem (truncation, a bad record byte, an
//     LZW end code before the last pixel, ...) or at the ';' trailer; the
//     frame being read when a problem occurred is dropped. It is an error
//     when no frame counts; otherwise the first frame is returned (so a
//     missing trailer or garbage after a complete frame is fine).
//   * The output size is NOT the logical screen size: it is the largest
//     frame width by the largest frame height over the counted frames.
//     When the first frame does not cover that canvas exactly from (0,0),
//     the canvas is black and the frame is drawn at its offset, clipped to
//     the canvas (TF's quirk: a lone 4x4 frame at (2,3) yields a 4x4 image
//     that is black except its bottom-right 2x1 corner).
//   * Pixels whose index is the first frame's transparent index (first
//     Graphic Control Extension before the frame, if its first sub-block is
//     4 bytes and its transparency flag is set) are black (0,0,0).
//   * The frame's local colour table if it has one, else the global one;
//     neither is an error; an index >= the table size (2^(bits)) is an error
//     (unless it is the transparent index).
//   * LZW as giflib decodes it, including what it does with codes that are
//     not in the table yet (it makes up a string rather than failing); only
//     the codes needed for the pixels are read (garbage after them is
//     ignored). An extension whose first sub-block is empty also swallows
//     the following sub-block chain (giflib's reading of it).
//   * channels: 0 or 3 give RGB (3 channels); 1 is an error, as in TF
//     ("channels must be 0 or 3 for GIF").
//
// Limits of our own: an image of 2^28 pixels or more is refused (TF's BMP
// limit; TF has none for GIF). Corrupt input never reads out of bounds: it
// decodes as TF would or throws slimtorch::Error naming `context`.
// Thread-safe: no shared state.

#include <cstdint>
#include <functional>
#include <string>

namespace slimtorch {

// "BM" at the start (what TensorFlow checks).
bool IsBmp(const std::string& bytes);
// "GIF8" at the start (what TensorFlow checks; GIF87a and GIF89a files).
bool IsGif(const std::string& bytes);

// Returns where to write height*width*channels bytes (HWC, RGB order).
using BmpGifAllocate = std::function<uint8_t*(int height, int width,
                                              int channels)>;

// Decode into the buffer `alloc` returns; `channels` as described above
// (0, 3; 1 is refused as TensorFlow refuses it). `context` names the source
// in errors.
// What an 8-bit BMP's bytes become. kIndices is TensorFlow's reading (the
// raw byte, palette ignored). kColors looks each byte up in the palette:
// one gray channel (channels = 0) when every palette entry is gray, RGB
// otherwise; an index past the palette is an error. Needs a Windows header
// (40 bytes or more); 24- and 32-bit images are the same either way.
enum class BmpPalette { kIndices, kColors };

void DecodeBmpInto(const std::string& bytes, int channels,
                   const BmpGifAllocate& alloc, const std::string& context,
                   BmpPalette palette = BmpPalette::kIndices);
void DecodeGifInto(const std::string& bytes, int channels,
                   const BmpGifAllocate& alloc, const std::string& context);

}  // namespace slimtorch
