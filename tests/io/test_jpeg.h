#pragma once
// Test JPEGs made with libjpeg-turbo directly (an encoder independent of the
// code under test).

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace slimtorch {
namespace testing_io {

// A photo-like JPEG (smooth waves plus noise) with the luma sampling
// factors h x v (chroma 1x1), or gray; baseline, or progressive with
// libjpeg's default scans (jpeg_simple_progression).
inline std::string TestJpeg(int height, int width, int components, int h_samp,
                            int v_samp, uint32_t seed,
                            bool progressive = false) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> px(static_cast<size_t>(height) * width * components);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < components; ++c) {
        const double wave = 100 * std::sin(0.07 * x * (c + 1) + 0.05 * y);
        const int v = 128 + static_cast<int>(wave) + static_cast<int>(gen() % 40) - 20;
        px[(static_cast<size_t>(y) * width + x) * components + c] =
            static_cast<uint8_t>(std::min(255, std::max(0, v)));
      }
    }
  }
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = components;
  cinfo.in_color_space = components == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 90, TRUE);
  if (components == 3) {
    cinfo.comp_info[0].h_samp_factor = h_samp;
    cinfo.comp_info[0].v_samp_factor = v_samp;
  }
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = &px[static_cast<size_t>(cinfo.next_scanline) * width * components];
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  jpeg_destroy_compress(&cinfo);
  return out;
}

// The scans (SOS markers) of a JPEG.
inline int CountScans(const std::string& jpeg) {
  int scans = 0;
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    scans += jpeg[i] == '\xff' && jpeg[i + 1] == '\xda';
  }
  return scans;
}

// `jpeg` cut before its scan number `scans` + 1 (counting from 1), with an
// EOI marker: a well-formed progressive JPEG whose later scans are missing
// (libjpeg decodes it without a warning). Entropy-coded data stuffs 0xFF
// bytes and libjpeg's header segments never hold 0xFF 0xDA, so in what
// TestJpeg makes, 0xFF 0xDA is always an SOS marker.
inline std::string FirstScans(const std::string& jpeg, int scans) {
  int seen = 0;
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == '\xff' && jpeg[i + 1] == '\xda' && seen++ == scans) {
      return jpeg.substr(0, i) + "\xff\xd9";
    }
  }
  return jpeg;
}

}  // namespace testing_io
}  // namespace slimtorch
