#!/usr/bin/env python3
"""Goldens for the BMP/GIF decoder, computed by TensorFlow's decoders.

Writes tests/golden/bmp_gif_goldens.inc for tests/io/bmp_gif_codec_test.cc:
small BMP and GIF files (written by Pillow, or built byte by byte here for
what Pillow cannot write: top-down and V4/V5 BMPs, odd bit depths, GIF
transparency, offsets, interlacing, every LZW code size, corrupt data) and
what tf.io.decode_image(channels=C, expand_animations=False) (uint8) returns
for them with C = 0 and 3 (C = 1 is refused by TF for both formats; the test
checks that the decoder refuses it too). Also:
  * for a few files, TF's answer for every prefix of the file (truncation);
  * TF's answer for single-byte corruptions of a small GIF and BMP.
Pixels are stored in full when small, else as CRC-32 plus the first bytes.

Regenerate from the repository root (needs tensorflow-cpu and pillow; CI
never runs it):
  python3 scripts/golden/gen_bmp_gif_goldens.py
"""

import io
import os
import struct
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "python3 scripts/golden/gen_bmp_gif_goldens.py"
FULL_PIXELS_MAX = 1536  # store pixels in full up to this many bytes


def rgb_pattern(h, w, seed=0):
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3),
                          indexing="ij")
    return ((y * 37 + x * 11 + c * 80 + (x * y) % 7 * 13 + seed * 29)
            % 256).astype(np.uint8)


# ------------------------------------------------------------------ BMP


def bmp(width, height, bpp, pixel_rows, header=40, compression=0,
        palette=b"", masks=None, trailing=b"", offset=None):
    """A BMP with the given header size (12/40/108/124) and raw rows.

    pixel_rows: the rows as stored (already in file order), each unpadded;
    they are padded to 4 bytes here.
    """
    data = b""
    for row in pixel_rows:
        row = bytes(row)
        data += row + b"\0" * ((4 - len(row) % 4) % 4)
    info = struct.pack("<IiiHHIIiiII", header, width, height, 1, bpp,
                       compression, len(data), 2835, 2835,
                       len(palette) // 4, 0)
    if header >= 108:
        m = masks or (0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000)
        info += struct.pack("<IIII", *m) + b"BGRs" + b"\0" * 36 + b"\0" * 12
    if header >= 124:
        info += struct.pack("<IIII", 4, 0, 0, 0)
    info = info[:header] if header >= 40 else info
    off = 14 + len(info) + len(palette) if offset is None else offset
    size = 14 + len(info) + len(palette) + len(data) + len(trailing)
    return (b"BM" + struct.pack("<IHHi", size, 0, 0, off) + info + palette +
            data + trailing)


def bgr_rows(rgb, top_down=False, alpha=None):
    rows = []
    for y in range(rgb.shape[0]):
        px = rgb[y][:, ::-1]
        if alpha is not None:
            px = np.concatenate([px, alpha[y][:, None]], axis=1)
        rows.append(px.reshape(-1).tobytes())
    return rows if top_down else rows[::-1]


def pil_bytes(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def bmp_files():
    out = {}
    rgb = rgb_pattern(5, 7)
    out["bmp24_pil"] = pil_bytes(Image.fromarray(rgb), "BMP")
    out["bmp24_width1"] = pil_bytes(Image.fromarray(rgb_pattern(3, 1)), "BMP")
    out["bmp24_width4"] = pil_bytes(Image.fromarray(rgb_pattern(2, 4)), "BMP")
    out["bmp24_topdown"] = bmp(7, -5, 24, bgr_rows(rgb, top_down=True))
    alpha = (np.arange(35).reshape(5, 7) * 7).astype(np.uint8)
    out["bmp32_pil"] = pil_bytes(
        Image.fromarray(np.dstack([rgb, alpha])), "BMP")
    out["bmp32_topdown"] = bmp(7, -5, 32, bgr_rows(rgb, True, alpha))
    out["bmp24_v4"] = bmp(7, 5, 24, bgr_rows(rgb), header=108)
    out["bmp24_v5"] = bmp(7, 5, 24, bgr_rows(rgb), header=124)
    # BI_BITFIELDS with RGBA masks: TF ignores the masks (reads BGRA).
    out["bmp32_v5_bitfields"] = bmp(
        7, 5, 32, bgr_rows(rgb, False, alpha), header=124, compression=3,
        masks=(0xFF000000, 0x00FF0000, 0x0000FF00, 0x000000FF))
    out["bmp32_v4_topdown"] = bmp(7, -5, 32, bgr_rows(rgb, True, alpha),
                                  header=108, compression=3)
    out["bmp8_palette_pil"] = pil_bytes(
        Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16),
        "BMP")
    out["bmp8_gray_pil"] = pil_bytes(Image.fromarray(rgb).convert("L"), "BMP")
    # An 8-bit top-down image with a non-gray palette, width 3 (padding 1).
    pal = b"".join(bytes([i * 9 % 256, 255 - i, i * 3 % 256, 0])
                   for i in range(256))
    idx = [[(y * 3 + x) * 17 % 256 for x in range(3)] for y in range(4)]
    out["bmp8_topdown"] = bmp(3, -4, 8, idx, palette=pal)
    # The compression field is ignored: RLE8 flag with plain data.
    out["bmp8_rle_flag"] = bmp(3, 4, 8, idx, palette=pal, compression=1)
    # bpp / 8: a 12-bit header reads as one byte per pixel in TF.
    out["bmp_bpp12"] = bmp(3, 4, 12, idx)
    out["bmp_bpp28"] = bmp(3, 2, 28, [[1, 2, 3, 4, 5, 6, 7, 8, 9]] * 2)
    # Offset 0: the pixels are read from the start of the file (the header
    # included); 3 rows of 6 pixels of 24 bits = 3 * 20 bytes in all.
    out["bmp_offset0"] = bmp(6, 3, 24, [bytes(18)] * 3, offset=0)[:60]
    # Rejected by TF.
    out["bmp1_pil"] = pil_bytes(
        Image.fromarray(rgb).convert("1"), "BMP")
    out["bmp4"] = bmp(7, 5, 4, [bytes([0x12, 0x34, 0x56, 0x70])] * 5,
                      palette=bytes(64))
    out["bmp16"] = bmp(7, 5, 16, [bytes(14)] * 5)
    out["bmp24_trailing"] = out["bmp24_pil"] + b"\0\0"
    out["bmp24_truncated"] = out["bmp24_pil"][:-1]
    out["bmp24_short_header"] = out["bmp24_pil"][:31]
    out["bmp_zero_height"] = bmp(7, 0, 24, [])
    out["bmp_negative_width"] = bmp(-7, 5, 24, bgr_rows(rgb))
    out["bmp_negative_offset"] = bmp(7, 5, 24, bgr_rows(rgb), offset=-4)
    out["bmp_huge"] = bmp(70000, 4000, 24, [])
    out["bmp24_os2_header"] = bmp(7, 5, 24, bgr_rows(rgb), header=12)
    big = rgb_pattern(40, 33, seed=3)
    out["bmp24_big"] = pil_bytes(Image.fromarray(big), "BMP")
    return out


# ------------------------------------------------------------------ GIF


def lzw_encode(indices, cs, clear_first=True, clear_when_full=True,
               clear_every=None, end=True):
    """GIF LZW with the code widths giflib reads (any code size 0..8)."""
    clear = 1 << cs
    eoi = clear + 1
    out = bytearray()
    acc = 0
    nacc = 0
    st = {}

    def reset_reader():
        st["running"] = eoi + 1
        st["bits"] = cs + 1
        st["limit"] = 1 << (cs + 1)

    def put(code):
        nonlocal acc, nacc
        acc |= code << nacc
        nacc += st["bits"]
        while nacc >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nacc -= 8
        # What the reader does after reading a code.
        if st["running"] < 4097:
            st["running"] += 1
            if st["running"] > st["limit"] and st["bits"] < 12:
                st["limit"] <<= 1
                st["bits"] += 1
        if code == clear:
            reset_reader()

    reset_reader()
    table = {}  # (prefix code, pixel) -> code
    next_code = eoi + 1

    def reset_table():
        nonlocal table, next_code
        table = {}
        next_code = eoi + 1

    if clear_first:
        put(clear)
    w = None  # code of the current string
    emitted = 0
    for k in indices:
        if w is None:
            w = k
            continue
        if (w, k) in table:
            w = table[(w, k)]
            continue
        put(w)
        emitted += 1
        if next_code <= 4095:
            table[(w, k)] = next_code
            next_code += 1
        elif clear_when_full:
            put(clear)
            reset_table()
        w = k
        if clear_every and emitted % clear_every == 0:
            put(w)
            put(clear)
            reset_table()
            w = None
    if w is not None:
        put(w)
    if end:
        put(eoi)
    if nacc:
        out.append(acc & 0xFF)
    return bytes(out)


def sub_blocks(data, sizes=(255,), terminate=True):
    b = bytearray()
    i = 0
    n = 0
    while i < len(data):
        size = sizes[n % len(sizes)]
        n += 1
        chunk = data[i:i + size]
        b.append(len(chunk))
        b += chunk
        i += size
    if terminate:
        b.append(0)
    return bytes(b)


def color_table(colors, bits):
    n = 1 << bits
    colors = list(colors) + [(0, 0, 0)] * (n - len(colors))
    return b"".join(bytes(c) for c in colors[:n])


def gce(transparent=None, disposal=0, delay=0):
    flags = (disposal << 2) | (1 if transparent is not None else 0)
    return (b"!\xf9\x04" + bytes([flags]) + struct.pack("<H", delay) +
            bytes([transparent or 0]) + b"\x00")


def interlace_rows(h):
    return (list(range(0, h, 8)) + list(range(4, h, 8)) +
            list(range(2, h, 4)) + list(range(1, h, 2)))


def frame(left, top, w, h, indices=None, cs=8, lct=None, lct_bits=None,
          interlace=False, data=None, sizes=(255,), **lzw):
    flags = 0
    if lct is not None:
        flags |= 0x80 | (lct_bits - 1)
    if interlace:
        flags |= 0x40
    b = b"," + struct.pack("<HHHHB", left, top, w, h, flags)
    if lct is not None:
        b += color_table(lct, lct_bits)
    if data is None:
        rows = [list(indices[r * w:(r + 1) * w]) for r in range(h)]
        if interlace:
            rows = [rows[r] for r in interlace_rows(h)]
        data = sub_blocks(lzw_encode([p for r in rows for p in r], cs,
                                     **lzw), sizes)
    return b + bytes([cs]) + data


def gif(sw, sh, gct=None, gct_bits=None, body=b"", version=b"89a",
        trailer=True):
    flags = 0x70
    if gct is not None:
        flags |= 0x80 | (gct_bits - 1)
    b = b"GIF" + version + struct.pack("<HHBBB", sw, sh, flags, 0, 0)
    if gct is not None:
        b += color_table(gct, gct_bits)
    return b + body + (b";" if trailer else b"")


def raw_codes(codes):
    """Packs (code, width) pairs LSB first."""
    acc = 0
    n = 0
    out = bytearray()
    for code, width in codes:
        acc |= code << n
        n += width
        while n >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            n -= 8
    if n:
        out.append(acc & 0xFF)
    return bytes(out)


def gif_files():
    out = {}
    rng = np.random.default_rng(7)
    pal16 = [(i * 16, 255 - i * 16, (i * 37) % 256) for i in range(16)]
    pal256 = [((i * 7) % 256, (i * 13 + 5) % 256, (255 - i) % 256)
              for i in range(256)]
    idx = [int(v) for v in rng.integers(0, 16, 35)]
    f0 = frame(0, 0, 7, 5, idx, 4)

    rgb = rgb_pattern(12, 16)
    out["gif_pil_rgb"] = pil_bytes(Image.fromarray(rgb), "GIF")
    out["gif_pil_gray"] = pil_bytes(Image.fromarray(rgb).convert("L"), "GIF")
    pimg = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=8)
    out["gif_pil_transparent"] = pil_bytes(pimg, "GIF", transparency=2)
    out["gif_pil_interlaced"] = pil_bytes(Image.fromarray(rgb), "GIF",
                                          interlace=True)
    frames = [Image.fromarray(rgb_pattern(12, 16, seed=s)).convert(
        "P", palette=Image.ADAPTIVE, colors=32) for s in range(3)]
    out["gif_pil_animated"] = pil_bytes(frames[0], "GIF", save_all=True,
                                        append_images=frames[1:],
                                        duration=50, loop=0)
    big = rgb_pattern(48, 64, seed=5)
    out["gif_pil_big"] = pil_bytes(Image.fromarray(big), "GIF")

    out["gif89a_basic"] = gif(7, 5, pal16, 4, f0)
    out["gif87a_basic"] = gif(7, 5, pal16, 4, f0, version=b"87a")
    out["gif_version_8x"] = gif(7, 5, pal16, 4, f0, version=b"8zz")
    out["gif_local_table"] = gif(7, 5, pal16, 4,
                                 frame(0, 0, 7, 5, idx, 4, lct=pal256[:16],
                                       lct_bits=4))
    out["gif_local_only"] = gif(7, 5, None, None,
                                frame(0, 0, 7, 5, idx, 4, lct=pal256[:16],
                                      lct_bits=4))
    idx11 = [int(v) for v in rng.integers(0, 16, 3 * 11)]
    out["gif_interlaced"] = gif(3, 11, pal16, 4,
                                frame(0, 0, 3, 11, idx11, 4, interlace=True))
    idx_tall = [int(v) for v in rng.integers(0, 16, 2 * 19)]
    out["gif_interlaced_tall"] = gif(2, 19, pal16, 4,
                                     frame(0, 0, 2, 19, idx_tall, 4,
                                           interlace=True))
    # Frames smaller than the screen, at offsets.
    out["gif_offset_frame"] = gif(10, 10, pal16, 4,
                                  frame(2, 3, 4, 4, idx[:16], 4))
    out["gif_offset_then_bigger"] = gif(
        10, 10, pal16, 4, frame(2, 3, 4, 4, idx[:16], 4) +
        frame(0, 0, 6, 5, idx[:30], 4))
    out["gif_small_first_frame"] = gif(
        9, 6, pal16, 4, frame(0, 0, 4, 3, idx[:12], 4) +
        frame(0, 0, 9, 6, [1] * 54, 4))
    out["gif_offset_far"] = gif(10, 10, pal16, 4,
                                frame(200, 300, 4, 4, idx[:16], 4) +
                                frame(0, 0, 9, 9, [2] * 81, 4))
    out["gif_screen_zero"] = gif(0, 0, pal16, 4, f0)
    # Transparency.
    out["gif_transparent"] = gif(7, 5, pal16, 4, gce(3) + f0)
    out["gif_transparent_offset"] = gif(
        10, 10, pal16, 4, gce(idx[0]) + frame(2, 3, 4, 4, idx[:16], 4) +
        frame(0, 0, 6, 5, idx[:30], 4))
    out["gif_transparent_out_of_table"] = gif(
        7, 5, pal16[:4], 2, gce(9) + frame(0, 0, 7, 5,
                                           [i if i < 4 else 9 for i in idx],
                                           4))
    out["gif_gce_not_first"] = gif(7, 5, pal16, 4,
                                   b"!\xfe\x03abc\x00" + gce(3) + f0)
    out["gif_two_gce_first_opaque"] = gif(7, 5, pal16, 4,
                                          gce(None) + gce(3) + f0)
    out["gif_two_gce_first_transparent"] = gif(7, 5, pal16, 4,
                                               gce(3) + gce(None) + f0)
    out["gif_gce_5_bytes"] = gif(7, 5, pal16, 4,
                                 b"!\xf9\x05\x01\x00\x00\x03\x00\x00" + f0)
    out["gif_gce_second_frame_only"] = gif(
        7, 5, pal16, 4, f0 + gce(3) + frame(0, 0, 7, 5, idx, 4))
    out["gif_app_extension"] = gif(
        7, 5, pal16, 4, b"!\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00" + f0)
    # giflib: an empty first sub-block does not end an extension.
    out["gif_empty_extension_chain"] = gif(7, 5, pal16, 4,
                                           b"!\xfe\x00\x02ab\x00" + f0)
    out["gif_empty_extension"] = gif(7, 5, pal16, 4, b"!\xfe\x00" + f0)
    # LZW code sizes and table handling.
    for cs in range(0, 9):
        n = 1 << cs
        pix = [int(v) for v in rng.integers(0, n, 9 * 8)]
        out["gif_code_size_%d" % cs] = gif(
            9, 8, pal256, 8, frame(0, 0, 9, 8, pix, cs))
    out["gif_code_size_2_pal256"] = gif(
        7, 5, pal256, 8, frame(0, 0, 7, 5, [i % 4 for i in idx], 2))
    noisy = [int(v) for v in rng.integers(0, 256, 64 * 64)]
    out["gif_table_full_clear"] = gif(64, 64, pal256, 8,
                                      frame(0, 0, 64, 64, noisy, 8))
    out["gif_table_full_deferred"] = gif(
        64, 64, pal256, 8, frame(0, 0, 64, 64, noisy, 8,
                                 clear_when_full=False))
    few = [int(v) for v in rng.integers(0, 3, 96 * 80)]
    out["gif_table_full_deferred_cs2"] = gif(
        96, 80, pal16, 2, frame(0, 0, 96, 80, few, 2,
                                clear_when_full=False))
    out["gif_frequent_clears"] = gif(7, 5, pal16, 4,
                                     frame(0, 0, 7, 5, idx, 4,
                                           clear_every=3))
    out["gif_no_leading_clear"] = gif(7, 5, pal16, 4,
                                      frame(0, 0, 7, 5, idx, 4,
                                            clear_first=False))
    out["gif_no_end_code"] = gif(7, 5, pal16, 4,
                                 frame(0, 0, 7, 5, idx, 4, end=False))
    out["gif_runs_kwkwk"] = gif(40, 3, pal16, 4,
                                frame(0, 0, 40, 3, [5] * 100 + [6] * 20, 4))
    out["gif_tiny_sub_blocks"] = gif(7, 5, pal16, 4,
                                     frame(0, 0, 7, 5, idx, 4,
                                           sizes=(1, 2, 3)))
    out["gif_1x1"] = gif(1, 1, pal16, 4, frame(0, 0, 1, 1, [9], 4))
    # cs=4: clear 16, end 17; 5-bit codes until the table reaches 32.
    garbage_after = raw_codes([(16, 5)] + [(1, 5)] * 13 + [(1, 6)] * 22 +
                              [(63, 6)] * 4)
    out["gif_garbage_codes_after_pixels"] = gif(
        7, 5, pal16, 4, frame(0, 0, 7, 5, data=sub_blocks(garbage_after),
                              cs=4))
    undefined = raw_codes([(16, 5), (1, 5), (30, 5)] + [(2, 5)] * 11 +
                          [(3, 6)] * 30)
    out["gif_undefined_code"] = gif(
        7, 5, pal16, 4, frame(0, 0, 7, 5, data=sub_blocks(undefined), cs=4))
    first_undefined = raw_codes([(16, 5), (18, 5)] + [(1, 5)] * 12 +
                                [(1, 6)] * 30)
    out["gif_first_code_undefined"] = gif(
        7, 5, pal16, 4, frame(0, 0, 7, 5, data=sub_blocks(first_undefined),
                              cs=4))
    early_end = sub_blocks(lzw_encode([1, 2, 3], 4))
    out["gif_early_end_code"] = gif(7, 5, pal16, 4,
                                    frame(0, 0, 7, 5, data=early_end, cs=4))
    out["gif_early_empty_sub_block"] = gif(
        7, 5, pal16, 4, frame(0, 0, 7, 5, data=sub_blocks(
            lzw_encode([1, 2, 3], 4, end=False)), cs=4))
    # File ends, garbage, later frames.
    out["gif_no_trailer"] = gif(7, 5, pal16, 4, f0, trailer=False)
    out["gif_trailing_garbage"] = gif(7, 5, pal16, 4, f0) + b"garbage"
    out["gif_bad_record_after_frame"] = gif(7, 5, pal16, 4, f0 + b"\x05",
                                            trailer=False)
    out["gif_no_block_terminator"] = gif(7, 5, pal16, 4, f0[:-1],
                                         trailer=False)
    big1 = frame(0, 0, 9, 6, [int(v) for v in rng.integers(0, 16, 54)], 4)
    big2 = frame(0, 0, 11, 4, [int(v) for v in rng.integers(0, 16, 44)], 4)
    out["gif_later_frames_bigger"] = gif(7, 5, pal16, 4, f0 + big1 + big2)
    out["gif_later_frame_truncated"] = gif(7, 5, pal16, 4,
                                           f0 + big1 + big2[:20],
                                           trailer=False)
    out["gif_later_frame_early_end"] = gif(
        7, 5, pal16, 4, f0 + frame(0, 0, 9, 6, data=early_end, cs=4) + big2)
    out["gif_later_frame_bad_code_size"] = gif(
        7, 5, pal16, 4, f0 + big1[:10] + b"\x0c\x01\x00\x00")
    out["gif_later_frame_zero_width"] = gif(
        7, 5, pal16, 4, f0 + frame(0, 0, 0, 6, data=b"\x00", cs=4))
    out["gif_later_frame_undefined_code"] = gif(
        7, 5, pal16, 4, f0 + frame(0, 0, 9, 6, data=sub_blocks(undefined),
                                   cs=4))
    # Errors.
    out["gif_index_out_of_table"] = gif(7, 5, pal16[:4], 2, f0)
    out["gif_no_color_table"] = gif(7, 5, None, None, f0)
    out["gif_code_size_9"] = gif(7, 5, pal16, 4,
                                 frame(0, 0, 7, 5, data=b"\x01\x00\x00",
                                       cs=9))
    out["gif_zero_width"] = gif(7, 5, pal16, 4,
                                frame(0, 0, 0, 5, data=early_end, cs=4))
    out["gif_only_trailer"] = gif(7, 5, pal16, 4, b"")
    out["gif_header_only"] = gif(7, 5, None, None, b"", trailer=False)
    out["gif_truncated_table"] = gif(7, 5, pal16, 4, b"",
                                     trailer=False)[:40]
    out["gif_truncated_pixels"] = gif(7, 5, pal16, 4, f0)[:-8]
    out["gif_huge_frame_tiny_data"] = gif(
        7, 5, pal16, 4, frame(0, 0, 65535, 65535, data=b"\x02\x10\x00\x00",
                              cs=4))
    return out


# ------------------------------------------------------------------ TF


def decode(data, channels):
    try:
        img = tf.io.decode_image(data, channels=channels,
                                 expand_animations=False).numpy()
        return img
    except tf.errors.InvalidArgumentError:
        return None


def crc(a):
    return zlib.crc32(np.ascontiguousarray(a).tobytes()) & 0xFFFFFFFF


def c_hex(data, indent="    "):
    h = bytes(data).hex()
    if not h:
        return '""'
    parts = [h[i:i + 72] for i in range(0, len(h), 72)]
    return ("\n" + indent).join('"%s"' % p for p in parts)


def truncation_runs(data):
    """(from_len, to_len, h, w, crc) runs of TF's result per prefix."""
    runs = []
    for n in range(0, len(data) + 1):
        img = decode(data[:n], 0) if n else None
        key = (-1, 0, 0) if img is None else (img.shape[0], img.shape[1],
                                               crc(img[:, :, :3]))
        if runs and runs[-1][2:] == key and runs[-1][1] == n:
            runs[-1][1] = n + 1
        else:
            runs.append([n, n + 1, *key])
    return runs


def corruptions(data, rng, count):
    """Single-byte corruptions (offset, value) and TF's result."""
    out = []
    for _ in range(count):
        off = int(rng.integers(0, len(data)))
        val = int(rng.integers(0, 256))
        if val == data[off]:
            val ^= 0x41
        mutated = data[:off] + bytes([val]) + data[off + 1:]
        img = decode(mutated, 0)
        key = (-1, 0, 0) if img is None else (img.shape[0], img.shape[1],
                                               crc(img[:, :, :3]))
        out.append((off, val, *key))
    return out


def main():
    files = dict(bmp_files())
    files.update(gif_files())
    lines = [
        "// BMP/GIF decoder goldens computed by TensorFlow %s" % tf.__version__,
        "// (tf.io.decode_image(channels=C, expand_animations=False), uint8).",
        "// Generated by scripts/golden/gen_bmp_gif_goldens.py; do not edit.",
        "// Regenerate from the repository root:",
        "//   " + COMMAND,
        "// Included by tests/io/bmp_gif_codec_test.cc after the definitions",
        "// of BmpGifGolden, BmpGifRun and BmpGifCorruption. Hex strings;",
        "// height = -1: TensorFlow fails. pixels: TF's output in full (empty",
        "// when large), crc: CRC-32 of the RGB channels (alpha dropped).",
        "",
    ]
    table = []
    for name, data in files.items():
        lines.append("const char k_%s[] =\n    %s;" % (name, c_hex(data)))
        assert decode(data, 1) is None, name  # TF refuses channels=1
        for channels in (0, 3):
            img = decode(data, channels)
            if img is None:
                table.append('    {"%s", k_%s, %d, -1, 0, 0, 0u, ""},'
                             % (name, name, channels))
                continue
            h, w, c = img.shape
            rgb = img[:, :, :3] if c == 4 else img
            pix = rgb.tobytes() if rgb.size <= FULL_PIXELS_MAX else b""
            table.append('    {"%s", k_%s, %d, %d, %d, %d, 0x%08xu,\n     %s},'
                         % (name, name, channels, h, w, c, crc(rgb),
                            c_hex(pix, "     ")))
    lines.append("")
    lines.append("const BmpGifGolden kBmpGifGoldens[] = {")
    lines.extend(table)
    lines.append("};")

    lines.append("")
    lines.append("// TF's result (channels=0) for every prefix length in "
                 "[from, to).")
    runs = []
    for name in ("gif_later_frames_bigger", "gif_interlaced",
                 "gif_transparent_offset", "bmp24_pil", "bmp8_topdown"):
        for r in truncation_runs(files[name]):
            runs.append('    {"%s", k_%s, %d, %d, %d, %d, 0x%08xu},'
                        % (name, name, *r))
    lines.append("const BmpGifRun kBmpGifTruncations[] = {")
    lines.extend(runs)
    lines.append("};")

    lines.append("")
    lines.append("// TF's result (channels=0) with byte `offset` set to "
                 "`value`.")
    rng = np.random.default_rng(11)
    rows = []
    for name, count in (("gif_later_frames_bigger", 400),
                        ("gif_transparent_offset", 200),
                        ("gif_code_size_3", 200),
                        ("gif_interlaced", 100), ("bmp24_pil", 60)):
        for c in corruptions(files[name], rng, count):
            rows.append('    {"%s", k_%s, %d, %d, %d, %d, 0x%08xu},'
                        % (name, name, *c))
    lines.append("const BmpGifCorruption kBmpGifCorruptions[] = {")
    lines.extend(rows)
    lines.append("};")

    path = os.path.join(REPO, "tests", "golden", "bmp_gif_goldens.inc")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
