#include "slimtorch/io/bmp_gif_codec.h"

// BMP and GIF decoders that reproduce tf.io.decode_image's uint8 pixels; see
// the header for the behaviour, established by running TensorFlow (the cases
// are in scripts/golden/gen_bmp_gif_goldens.py).

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"

namespace slimtorch {
namespace {

// Images of this many pixels or more are refused: TensorFlow's BMP limit
// (width * |height| < INT32_MAX / 8), used for GIF as well.
constexpr int64_t kMaxPixels = 2147483647 / 8;

uint32_t LoadU16(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
}

int32_t LoadI32(const uint8_t* p) {
  const uint32_t v = static_cast<uint32_t>(p[0]) |
                     static_cast<uint32_t>(p[1]) << 8 |
                     static_cast<uint32_t>(p[2]) << 16 |
                     static_cast<uint32_t>(p[3]) << 24;
  int32_t out;
  std::memcpy(&out, &v, sizeof(out));
  return out;
}

void CheckChannels(int channels, const char* format,
                   const std::string& context) {
  if (channels == 0 || channels == 3) return;
  if (channels == 1) {
    SLIM_FAIL(context, ": a ", format,
              " image cannot be decoded to 1 channel (TensorFlow's "
              "decode_image refuses channels=1 for ",
              format, " as well); ask for 0 or 3 channels");
  }
  SLIM_FAIL(context, ": ", format, " images decode to 0 (native) or 3 ",
            "channels, not ", channels);
}

// ------------------------------------------------------------------ GIF

constexpr int kMaxCode = 4095;   // largest 12-bit code
constexpr int kNoCode = 4098;    // "no such code" (its low byte is 2)

// Reads bytes of the file; `pos` moves forward only.
struct ByteStream {
  const uint8_t* data;
  size_t size;
  size_t pos;

  size_t left() const { return size - pos; }
  bool Take(size_t n, const uint8_t** out) {
    if (left() < n) return false;
    *out = data + pos;
    pos += n;
    return true;
  }
};

// The LZW decompressor of one frame, with giflib's semantics (what
// TensorFlow uses): code widths grow as its running counter passes powers of
// two, the table stops growing (no reset) when full, a code that is not in
// the table yet (other than the next one) is not an error but decodes to the
// previous string plus the byte 2, chains that do not end in a pixel value or
// are longer than 4094 are errors. Codes are read only while pixels are
// still missing.
class LzwDecoder {
 public:
  LzwDecoder(ByteStream* in, int code_size)
      : in_(in),
        clear_(1 << code_size),
        end_(clear_ + 1),
        code_size_(code_size) {
    prefix_.fill(kNoCode);
    suffix_.fill(0);
    ResetTable();
  }

  // Produces `n` pixel indices into `out` (nullptr: count and check only).
  // Returns false with *why set when the data is unusable.
  bool Decode(uint64_t n, uint8_t* out, std::string* why) {
    uint64_t done = 0;
    while (done < n) {
      if (depth_ > 0) {
        done += Pop(n - done, out ? out + done : nullptr);
        continue;
      }
      int code;
      if (!ReadCode(&code, why)) return false;
      if (code == end_) {
        *why = StrCat("LZW end code after ", done, " of ", n, " pixels");
        return false;
      }
      if (code == clear_) {
        ResetTable();
        continue;
      }
      const int slot = running_ - 2;  // the table entry this code defines
      if (code < clear_) {
        if (out) out[done] = static_cast<uint8_t>(code);
        ++done;
      } else {
        int link;
        if (prefix_[code] == kNoCode) {
          // Not in the table: the previous string plus one more byte.
          link = last_;
          const uint8_t extra = static_cast<uint8_t>(
              LeadingValue(code == slot ? last_ : code));
          suffix_[slot] = extra;
          stack_[depth_++] = extra;
        } else {
          link = code;
        }
        while (depth_ < kMaxCode && link > clear_ && link <= kMaxCode) {
          stack_[depth_++] = suffix_[link];
          link = prefix_[link];
        }
        if (depth_ >= kMaxCode || link > kMaxCode) {
          *why = StrCat("corrupt LZW data (code ", code, ") after ", done,
                        " of ", n, " pixels");
          return false;
        }
        stack_[depth_++] = static_cast<uint8_t>(link);
        done += Pop(n - done, out ? out + done : nullptr);
      }
      if (last_ != kNoCode && slot <= kMaxCode && prefix_[slot] == kNoCode) {
        prefix_[slot] = last_;
        suffix_[slot] = static_cast<uint8_t>(
            LeadingValue(code == slot ? last_ : code));
        highest_defined_ = std::max(highest_defined_, slot);
      }
      last_ = code;
    }
    return true;
  }

  // Skips the rest of the frame's data sub-blocks, through the empty one.
  bool SkipRest(std::string* why) {
    in_->pos += block_left_;
    block_left_ = 0;
    for (;;) {
      const uint8_t* len;
      if (!in_->Take(1, &len)) {
        *why = "truncated after the frame's pixel data (no block terminator)";
        return false;
      }
      if (*len == 0) return true;
      const uint8_t* skipped;
      if (!in_->Take(*len, &skipped)) {
        *why = "truncated data sub-block after the frame's pixels";
        return false;
      }
    }
  }

 private:
  void ResetTable() {
    for (int i = end_ + 1; i <= highest_defined_; ++i) prefix_[i] = kNoCode;
    highest_defined_ = end_;
    running_ = end_ + 1;
    bits_ = code_size_ + 1;
    limit_ = 1 << bits_;
    last_ = kNoCode;
  }

  // The first pixel value of `code`'s string, following at most 4096 links;
  // kNoCode when the chain reaches an undefined code.
  int LeadingValue(int code) const {
    for (int steps = 0; code > clear_ && steps <= kMaxCode; ++steps) {
      if (code > kMaxCode) return kNoCode;
      code = prefix_[code];
    }
    return code;
  }

  uint64_t Pop(uint64_t want, uint8_t* out) {
    const uint64_t n = std::min<uint64_t>(want, depth_);
    if (out) {
      for (uint64_t i = 0; i < n; ++i) out[i] = stack_[--depth_];
    } else {
      depth_ -= static_cast<int>(n);
    }
    return n;
  }

  bool NextByte(uint8_t* byte, std::string* why) {
    if (block_left_ == 0) {
      const uint8_t* len;
      if (!in_->Take(1, &len)) {
        *why = "truncated LZW data";
        return false;
      }
      if (*len == 0) {
        *why = "LZW data ends (empty sub-block) before the last pixel";
        return false;
      }
      if (in_->left() < *len) {
        *why = "truncated LZW data sub-block";
        return false;
      }
      block_left_ = *len;
    }
    *byte = in_->data[in_->pos++];
    --block_left_;
    return true;
  }

  bool ReadCode(int* code, std::string* why) {
    while (held_bits_ < bits_) {
      uint8_t byte;
      if (!NextByte(&byte, why)) return false;
      bit_buffer_ |= static_cast<uint32_t>(byte) << held_bits_;
      held_bits_ += 8;
    }
    *code = static_cast<int>(bit_buffer_ & ((1u << bits_) - 1));
    bit_buffer_ >>= bits_;
    held_bits_ -= bits_;
    if (running_ < kMaxCode + 2) {
      ++running_;
      if (running_ > limit_ && bits_ < 12) {
        limit_ <<= 1;
        ++bits_;
      }
    }
    return true;
  }

  ByteStream* in_;
  const int clear_;
  const int end_;
  const int code_size_;
  int running_ = 0;  // next table slot + 2 once a code has been read
  int bits_ = 0;
  int limit_ = 0;
  int last_ = kNoCode;
  int highest_defined_ = 0;
  int block_left_ = 0;
  uint32_t bit_buffer_ = 0;
  int held_bits_ = 0;
  int depth_ = 0;
  std::array<int, kMaxCode + 1> prefix_;
  std::array<uint8_t, kMaxCode + 1> suffix_;
  std::array<uint8_t, kMaxCode + 1> stack_;
};

struct GifFrame {
  int left = 0, top = 0, width = 0, height = 0;
  const uint8_t* colors = nullptr;  // RGB triples, local or global table
  int color_count = 0;
  std::vector<uint8_t> indices;  // width * height, row-major
};

// A frame's image descriptor, colour table and LZW code size.
struct FrameHeader {
  int left = 0, top = 0, width = 0, height = 0;
  uint8_t flags = 0;
  const uint8_t* colors = nullptr;  // local table, else the global one
  int color_count = 0;
  int code_size = 0;
};

// Reads the frame's header after its ','; false with *why when it is
// truncated or invalid.
bool ReadFrameHeader(ByteStream* in, const uint8_t* global_colors,
                     int global_count, FrameHeader* f, std::string* why) {
  const uint8_t* d;
  if (!in->Take(9, &d)) {
    *why = "truncated image descriptor";
    return false;
  }
  f->left = static_cast<int>(LoadU16(d));
  f->top = static_cast<int>(LoadU16(d + 2));
  f->width = static_cast<int>(LoadU16(d + 4));
  f->height = static_cast<int>(LoadU16(d + 6));
  f->flags = d[8];
  f->colors = global_colors;
  f->color_count = global_count;
  if (f->flags & 0x80) {
    f->color_count = 1 << ((f->flags & 7) + 1);
    if (!in->Take(3 * static_cast<size_t>(f->color_count), &f->colors)) {
      *why = "truncated local colour table";
      return false;
    }
  }
  const uint8_t* code_size;
  if (!in->Take(1, &code_size)) {
    *why = "truncated before the LZW code size";
    return false;
  }
  if (*code_size > 8) {
    *why = StrCat("LZW code size ", static_cast<int>(*code_size), " > 8");
    return false;
  }
  f->code_size = *code_size;
  if (f->width == 0 || f->height == 0) {
    *why = StrCat("frame of zero size (", f->width, "x", f->height, ")");
    return false;
  }
  return true;
}

// Keeps the decoded frame: its place, colours and indices (`stream`, in
// stream order) in row order.
void KeepFrame(const FrameHeader& f, std::vector<uint8_t> stream,
               GifFrame* keep) {
  const int w = f.width, h = f.height;
  keep->left = f.left;
  keep->top = f.top;
  keep->width = w;
  keep->height = h;
  keep->colors = f.colors;
  keep->color_count = f.colors ? f.color_count : 0;
  if (f.flags & 0x40) {  // interlaced: rows 0,8,..; 4,12,..; 2,6,..; 1,3,..
    keep->indices.resize(static_cast<uint64_t>(w) * h);
    static constexpr int kStart[4] = {0, 4, 2, 1};
    static constexpr int kStep[4] = {8, 8, 4, 2};
    size_t row_in = 0;
    for (int pass = 0; pass < 4; ++pass) {
      for (int y = kStart[pass]; y < h; y += kStep[pass]) {
        std::memcpy(keep->indices.data() + static_cast<size_t>(y) * w,
                    stream.data() + row_in * w, w);
        ++row_in;
      }
    }
  } else {
    keep->indices = std::move(stream);
  }
}

// Reads one frame after its ',' (the stream is left after it). With `keep`,
// its indices and colour table go there. Returns false with *why when the
// frame cannot be read to its end.
bool ReadFrame(ByteStream* in, const uint8_t* global_colors,
               int global_count, GifFrame* keep, int* width, int* height,
               std::string* why) {
  FrameHeader f;
  if (!ReadFrameHeader(in, global_colors, global_count, &f, why)) {
    return false;
  }
  const int w = f.width, h = f.height;
  const uint64_t pixels = static_cast<uint64_t>(w) * h;
  std::vector<uint8_t> stream;
  if (keep) {
    const uint64_t limit = GetResourceLimits().max_image_pixels;
    if (pixels > limit) {
      *why = StrCat("a frame of ", w, "x", h, " = ", pixels,
                    " pixels is too large (",
                    LimitHint(limit, "pixels", "SLIMTORCH_MAX_IMAGE_PIXELS"),
                    ")");
      return false;
    }
    // Each code gives at most 4095 pixels and takes at least one bit: refuse
    // sizes the remaining bytes cannot hold before allocating for them.
    if (pixels / (static_cast<uint64_t>(kMaxCode) * 8) > in->left()) {
      *why = StrCat("truncated: a ", w, "x", h, " frame cannot fit in the ",
                    in->left(), " bytes left");
      return false;
    }
    stream.resize(pixels);
  }
  LzwDecoder lzw(in, f.code_size);
  if (!lzw.Decode(pixels, keep ? stream.data() : nullptr, why) ||
      !lzw.SkipRest(why)) {
    return false;
  }
  *width = w;
  *height = h;
  if (keep) KeepFrame(f, std::move(stream), keep);
  return true;
}

// Reads one extension after its '!'. Sub-blocks are read as giflib does: the
// first one (if not empty) carries the function code, then sub-blocks up to
// an empty one — so an empty first sub-block does not end the extension.
// With `gce` (extensions before the first frame), the first Graphic Control
// Extension sets gce->transparent (when its block is 4 bytes with the
// transparency flag).
struct GceState {
  bool seen = false;
  int transparent = -1;
};

bool ReadExtension(ByteStream* in, GceState* gce, std::string* why) {
  const uint8_t* function;
  const uint8_t* len;
  const uint8_t* body;
  if (!in->Take(1, &function) || !in->Take(1, &len) ||
      !in->Take(*len, &body)) {
    *why = "truncated extension";
    return false;
  }
  if (gce && !gce->seen && *len > 0 && *function == 0xF9) {
    gce->seen = true;
    if (*len == 4 && (body[0] & 1)) gce->transparent = body[3];
  }
  for (;;) {
    if (!in->Take(1, &len) || !in->Take(*len, &body)) {
      *why = "truncated extension";
      return false;
    }
    if (*len == 0) return true;
  }
}

// An 8-bit BMP's palette as RGB triples (BMP stores B, G, R, 0).
struct BmpColorTable {
  std::vector<uint8_t> rgb;
  bool gray = true;  // every entry has R == G == B
};

BmpColorTable ReadBmpColorTable(const std::string& bytes, int64_t offset,
                                const std::string& context) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const int64_t header = LoadI32(p + 14);
  SLIM_CHECK(header >= 40 && bytes.size() >= 50, context,
             ": 8-bit BMP with a ", header,
             "-byte header: its palette cannot be read (expected a Windows "
             "header of 40 bytes or more); save it as 24-bit BMP or PNG");
  const int64_t used = LoadI32(p + 46);
  SLIM_CHECK(used >= 0 && used <= 256, context, ": 8-bit BMP says its "
             "palette holds ", used, " colours (expected 0 to 256)");
  const int64_t count = used == 0 ? 256 : used;
  const int64_t start = 14 + header;
  SLIM_CHECK(start + 4 * count <= offset, context, ": 8-bit BMP palette of ",
             count, " colours at byte ", start,
             " runs past the pixel data at byte ", offset);
  BmpColorTable table;
  table.rgb.resize(3 * count);
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* bgr = p + start + 4 * i;
    table.rgb[3 * i] = bgr[2];
    table.rgb[3 * i + 1] = bgr[1];
    table.rgb[3 * i + 2] = bgr[0];
    table.gray = table.gray && bgr[0] == bgr[1] && bgr[1] == bgr[2];
  }
  return table;
}

// What DecodeBmpInto reads from a BMP's headers.
struct BmpLayout {
  int64_t offset = 0;  // of the pixel data
  int64_t width = 0;
  int64_t rows = 0;
  bool top_down = false;  // negative height: the first row is the top one
  int in_channels = 0;    // 1, 3 (BGR) or 4 (BGRA)
  int64_t row_size = 0;   // bytes per row, padded to 4
};

// The layout of a BMP (its first 32 bytes present), checked against the
// file's size; throws naming `context`.
BmpLayout ReadBmpLayout(const std::string& bytes, const std::string& context) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const int64_t offset = LoadI32(p + 10);
  const int64_t width = LoadI32(p + 18);
  const int64_t height = LoadI32(p + 22);
  const int bpp = static_cast<int16_t>(LoadU16(p + 28));
  const int in_channels = bpp / 8;
  SLIM_CHECK(in_channels == 1 || in_channels == 3 || in_channels == 4,
             context, ": unsupported BMP with ", bpp,
             " bits per pixel (TensorFlow decodes 8-, 24- and 32-bit BMPs "
             "only)");
  SLIM_CHECK(width > 0, context, ": BMP width ", width, " is not positive");
  SLIM_CHECK(height != 0, context, ": BMP height is zero");
  SLIM_CHECK(offset >= 0, context, ": BMP pixel data offset ", offset,
             " is negative");
  const int64_t rows = height < 0 ? -height : height;
  SLIM_CHECK(width * rows < kMaxPixels, context, ": BMP of ", width, "x",
             rows, " pixels is too large");
  const int64_t row_size = (in_channels * width + 3) / 4 * 4;
  const int64_t expected = offset + row_size * rows;
  SLIM_CHECK(static_cast<int64_t>(bytes.size()) == expected, context,
             ": BMP of ", bytes.size(), " bytes, but its header (pixel data "
             "at ", offset, ", ", rows, " rows of ", row_size,
             " bytes) needs exactly ", expected,
             (static_cast<int64_t>(bytes.size()) < expected ? " (truncated)"
                                                            : ""));
  return {offset, width, rows, height < 0, in_channels, row_size};
}

// The pixels of the BMP laid out as `l` into `out` (rows x width x
// out_channels, top row first): palette entries of `table` when it has
// any, else gray copied or BGR(A) reordered.
void CopyBmpPixels(const uint8_t* pixels, const BmpLayout& l,
                   const BmpColorTable& table, int out_channels, uint8_t* out,
                   const std::string& context) {
  const int64_t rows = l.rows, width = l.width;
  const int in_channels = l.in_channels;
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* src =
        pixels + (l.top_down ? y : rows - 1 - y) * l.row_size;
    uint8_t* dst = out + y * width * out_channels;
    for (int64_t x = 0; x < width; ++x, src += in_channels) {
      if (in_channels == 1 && !table.rgb.empty()) {
        const size_t index = src[0];
        SLIM_CHECK(index < table.rgb.size() / 3, context, ": BMP pixel (",
                   x, ", ", y, ") has colour index ", index,
                   " but the palette holds ", table.rgb.size() / 3,
                   " colours");
        const uint8_t* rgb = table.rgb.data() + 3 * index;
        if (out_channels == 1) {
          *dst++ = rgb[0];
        } else {
          *dst++ = rgb[0];
          *dst++ = rgb[1];
          *dst++ = rgb[2];
        }
      } else if (in_channels == 1) {
        for (int c = 0; c < out_channels; ++c) *dst++ = src[0];
      } else {  // BGR(A) -> RGB
        *dst++ = src[2];
        *dst++ = src[1];
        *dst++ = src[0];
      }
    }
  }
}

// What reading a GIF's records found: the first frame, the canvas (the
// largest frame), the first Graphic Control Extension.
struct GifRecords {
  GifFrame first;
  int frames = 0, canvas_w = 0, canvas_h = 0;
  GceState gce;
  std::string stop;  // why reading stopped early, if it did
};

// Reads every frame, as TensorFlow does, for the canvas size; stops at the
// trailer or at the first record that cannot be read (r->stop says why).
void ReadGifRecords(ByteStream* in, const uint8_t* global_colors,
                    int global_count, GifRecords* r) {
  while (r->stop.empty()) {
    const uint8_t* record;
    if (!in->Take(1, &record)) {
      r->stop = "truncated (no ';' trailer)";
      break;
    }
    if (*record == ';') break;
    if (*record == '!') {
      ReadExtension(in, r->frames == 0 ? &r->gce : nullptr, &r->stop);
    } else if (*record == ',') {
      int w = 0, h = 0;
      if (ReadFrame(in, global_colors, global_count,
                    r->frames == 0 ? &r->first : nullptr, &w, &h, &r->stop)) {
        ++r->frames;
        r->canvas_w = std::max(r->canvas_w, w);
        r->canvas_h = std::max(r->canvas_h, h);
      }
    } else {
      r->stop = StrCat("unexpected record byte ", static_cast<int>(*record),
                       " at offset ", in->pos - 1);
    }
  }
}

// The first frame onto the canvas `out` (canvas_h x canvas_w RGB); what it
// does not cover, and its transparent pixels, are black.
void PaintFirstFrame(const GifRecords& r, uint8_t* out,
                     const std::string& context) {
  const GifFrame& first = r.first;
  const int canvas_w = r.canvas_w, canvas_h = r.canvas_h;
  const bool covers = first.left == 0 && first.top == 0 &&
                      first.width == canvas_w && first.height == canvas_h;
  if (!covers) {
    std::memset(out, 0, static_cast<size_t>(canvas_w) * canvas_h * 3);
  }
  const int x_end = std::min(first.left + first.width, canvas_w);
  const int y_end = std::min(first.top + first.height, canvas_h);
  for (int y = first.top; x_end > first.left && y < y_end; ++y) {
    const uint8_t* src = first.indices.data() +
                         static_cast<size_t>(y - first.top) * first.width;
    uint8_t* dst = out + (static_cast<size_t>(y) * canvas_w + first.left) * 3;
    for (int x = first.left; x < x_end; ++x, dst += 3) {
      const int index = *src++;
      if (index == r.gce.transparent) {
        dst[0] = dst[1] = dst[2] = 0;
        continue;
      }
      SLIM_CHECK(index < first.color_count, context,
                 ": invalid GIF: colour index ", index,
                 " outside the colour table of ", first.color_count);
      std::memcpy(dst, first.colors + 3 * index, 3);
    }
  }
}

}  // namespace

bool IsBmp(const std::string& bytes) {
  return bytes.size() >= 2 && bytes[0] == 'B' && bytes[1] == 'M';
}

bool IsGif(const std::string& bytes) {
  return bytes.size() >= 4 && bytes.compare(0, 4, "GIF8") == 0;
}

void DecodeBmpInto(const std::string& bytes, int channels,
                   const BmpGifAllocate& alloc, const std::string& context,
                   BmpPalette palette) {
  CheckChannels(channels, "BMP", context);
  SLIM_CHECK(IsBmp(bytes), context, ": not a BMP file (no \"BM\" signature)");
  SLIM_CHECK(bytes.size() >= 32, context, ": truncated BMP: ", bytes.size(),
             " bytes, the header needs 32");
  const BmpLayout l = ReadBmpLayout(bytes, context);
  const BmpColorTable table =
      l.in_channels == 1 && palette == BmpPalette::kColors
          ? ReadBmpColorTable(bytes, l.offset, context)
          : BmpColorTable{};
  const bool gray = l.in_channels == 1 && (table.rgb.empty() || table.gray);
  const int out_channels = channels == 0 && gray ? 1 : 3;
  CheckImagePixels(l.rows, l.width, "BMP image", context);
  uint8_t* out = alloc(static_cast<int>(l.rows), static_cast<int>(l.width),
                       out_channels);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  CopyBmpPixels(p + l.offset, l, table, out_channels, out, context);
}

void DecodeGifInto(const std::string& bytes, int channels,
                   const BmpGifAllocate& alloc, const std::string& context) {
  CheckChannels(channels, "GIF", context);
  SLIM_CHECK(IsGif(bytes), context, ": not a GIF file (no \"GIF8\" signature)");
  ByteStream in{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                0};
  const uint8_t* head;
  SLIM_CHECK(in.Take(13, &head), context,
             ": truncated GIF header (", bytes.size(), " bytes)");
  const uint8_t* global_colors = nullptr;
  int global_count = 0;
  if (head[10] & 0x80) {
    global_count = 1 << ((head[10] & 7) + 1);
    SLIM_CHECK(in.Take(3 * static_cast<size_t>(global_count), &global_colors),
               context, ": truncated GIF global colour table");
  }
  GifRecords r;
  ReadGifRecords(&in, global_colors, global_count, &r);
  SLIM_CHECK(r.frames > 0, context, ": invalid GIF: ",
             r.stop.empty() ? "no image in the file" : r.stop);
  SLIM_CHECK(r.first.colors != nullptr, context,
             ": invalid GIF: the first frame has no colour table");
  SLIM_CHECK(static_cast<int64_t>(r.canvas_w) * r.canvas_h < kMaxPixels,
             context, ": GIF of ", r.canvas_w, "x", r.canvas_h,
             " pixels is too large");
  CheckImagePixels(r.canvas_h, r.canvas_w, "GIF canvas", context);
  PaintFirstFrame(r, alloc(r.canvas_h, r.canvas_w, 3), context);
}

}  // namespace slimtorch
