#!/usr/bin/env python3
"""Writes the first seeds of the fuzz targets of tests/fuzz/ from real files:
TensorFlow-written ones in tests/golden (TFRecords, an Example, PNGs, a
JPEG, checkpoints, safetensors from Python), the images of Debian packages
under /usr/share, Fashion-MNIST's files (dataset-fashion-mnist), configs/,
and small generated ones (JPEGs by cjpeg in several modes, BMPs, archives).

  python3 tests/fuzz/make_seeds.py OUT      # OUT/<target>/<seed>

Each seed is in its target's input format (the comment at the top of
tests/fuzz/<target>_fuzz.cc). tests/fuzz/run_fuzzers.sh --merge then keeps
the ones that add coverage in tests/fuzz/corpus/<target>/.
"""
import gzip
import io
import os
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
OUT = sys.argv[1]


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def u16(n):
    return struct.pack("<H", n)


def field(b):
    return u16(len(b)) + b[:0xFFFF]


# ------------------------------------------------------------ protobuf
def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def ld(num, payload):  # length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def example(features):
    """features: {key: ("bytes"|"int64"|"float", [values])}"""
    entries = b""
    for key in sorted(features):
        kind, values = features[key]
        if kind == "bytes":
            lst = b"".join(ld(1, v) for v in values)
            feat = ld(1, lst)
        elif kind == "float":
            feat = ld(2, ld(1, b"".join(struct.pack("<f", v) for v in values)))
        else:
            feat = ld(3, ld(1, b"".join(varint(v & (2**64 - 1)) for v in values)))
        entries += ld(1, ld(1, key.encode()) + ld(2, feat))
    return ld(1, entries)


def tfrecords(path):
    data, out, p = read(path), [], 0
    while p + 12 <= len(data):
        (n,) = struct.unpack("<Q", data[p:p + 8])
        out.append(data[p + 12:p + 12 + n])
        p += 16 + n
    return out


# ------------------------------------------------------------ images
def ppm(w, h, gray=False):
    px = bytes((x * 7 + y * 13 + c * 50) & 255 for y in range(h) for x in range(w)
               for c in range(1 if gray else 3))
    return (b"P5" if gray else b"P6") + b"\n%d %d\n255\n" % (w, h) + px


def cjpeg(w, h, args, gray=False):
    try:
        return subprocess.run(["cjpeg"] + args, input=ppm(w, h, gray),
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def bmp(w, h, bpp, top_down=False):
    row = (w * bpp // 8 + 3) // 4 * 4
    palette = b"".join(bytes([i, i, 255 - i, 0]) for i in range(256)) if bpp == 8 else b""
    offset = 54 + len(palette)
    pixels = b"".join(bytes((x * 31 + y * 17 + k) & 255 for x in range(w)
                            for k in range(bpp // 8)).ljust(row, b"\0") for y in range(h))
    header = b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset)
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, bpp, 0,
                       len(pixels), 2835, 2835, 256 if bpp == 8 else 0, 0)
    return header + info + palette + pixels


def images():
    """name -> bytes of every image seed, small ones only."""
    out = {}
    for name in ("tf_rgb.png", "tf_gray.png", "exif_orient6.jpg"):
        out[name] = read(os.path.join(GOLDEN, name))
    for dirpath, _, files in os.walk("/usr/share"):
        for f in files:
            ext = f.lower().rsplit(".", 1)[-1]
            path = os.path.join(dirpath, f)
            if ext in ("png", "gif", "jpg", "jpeg", "bmp") and os.path.isfile(path) \
                    and os.path.getsize(path) <= (24 << 10):
                key = ext + "_" + re.sub(r"[^A-Za-z0-9.]", "_", path[11:])
                if sum(k.startswith(ext) for k in out) < 40:
                    out[key] = read(path)
    modes = {"baseline": [], "progressive": ["-progressive"], "q20": ["-quality", "20"],
             "444": ["-sample", "1x1"], "422": ["-sample", "2x1"],
             "restart": ["-restart", "1"], "arith": ["-arithmetic"],
             "optimize": ["-optimize"], "dct_float": ["-dct", "float"]}
    for mode, args in modes.items():
        for w, h in ((17, 9), (40, 33)):
            jpg = cjpeg(w, h, args)
            if jpg:
                out["cjpeg_%s_%dx%d.jpg" % (mode, w, h)] = jpg
        g = cjpeg(16, 16, args, gray=True)
        if g:
            out["cjpeg_%s_gray.jpg" % mode] = g
    for bpp in (8, 24, 32):
        out["gen_%d.bmp" % bpp] = bmp(7, 5, bpp)
        out["gen_%d_topdown.bmp" % bpp] = bmp(6, 3, bpp, top_down=True)
    return out


def image_seeds(imgs):
    by = {"png": b"\x89PNG", "jpeg": b"\xff\xd8\xff", "bmp": b"BM", "gif": b"GIF8"}
    for i, (name, data) in enumerate(sorted(imgs.items())):
        for target, magic in by.items():
            if data.startswith(magic):
                # mode (channels by mode % 3), four window bytes, the file
                put(target, name, bytes([i % 3, 40, 90, 200, 130]) + data)


# ------------------------------------------------------------ targets
def tfrecord_seeds():
    path = os.path.join(GOLDEN, "tf_records.tfrecord")
    put("tfrecord", "tf_records.raw", b"\x01" + read(path))
    recs = tfrecords(path)
    put("tfrecord", "tf_records.framed", b"\x00" + u16(0) + u16(0) + b"\0" +
        b"".join(field(r) for r in recs[:3]))
    put("tfrecord", "tf_records.cut", b"\x06" + u16(40) + u16(20) + b"\x10" +
        b"".join(field(r) for r in recs[:2]))
    put("tfrecord", "empty.raw", b"\x01")
    return recs


def example_seeds(recs, imgs):
    put("example", "tf_example.pb", read(os.path.join(GOLDEN, "tf_example.pb")))
    for i, r in enumerate(recs[:4]):
        put("example", "tf_record_%d.pb" % i, r)
    jpg = next(v for k, v in sorted(imgs.items()) if k.startswith("cjpeg_baseline"))
    imagenet = example({
        "image/encoded": ("bytes", [jpg]), "image/format": ("bytes", [b"JPEG"]),
        "image/class/label": ("int64", [7]), "image/height": ("int64", [9]),
        "image/width": ("int64", [17]), "image/colorspace": ("bytes", [b"RGB"]),
        "image/channels": ("int64", [3]), "image/class/synset": ("bytes", [b"n01440764"]),
        "image/class/text": ("bytes", [b"tench"]), "image/filename": ("bytes", [b"a.JPEG"]),
        "image/object/bbox/xmin": ("float", [0.1, 0.2]), "image/object/bbox/ymin": ("float", [0.1, 0.3]),
        "image/object/bbox/xmax": ("float", [0.9, 0.8]), "image/object/bbox/ymax": ("float", [0.7, 1.0]),
        "image/object/bbox/label": ("int64", [7, 7])})
    put("example", "imagenet_like.pb", imagenet)
    raw = example({"image/encoded": ("bytes", [bytes(28 * 28)]), "image/format": ("bytes", [b"raw"]),
                   "image/class/label": ("int64", [3]), "image/height": ("int64", [28]),
                   "image/width": ("int64", [28])})
    put("example", "raw_28x28.pb", raw)
    for i, r in enumerate(recs[:3]):
        put("record", "tf_record_%d" % i, bytes([i * 3 + 1]) + r)
    put("record", "imagenet_like", b"\x09" + imagenet)
    put("record", "raw_28x28", b"\x02" + raw)
    png = imgs["tf_gray.png"]
    put("record", "png_gray", b"\x00" + example({
        "image/encoded": ("bytes", [png]), "image/format": ("bytes", [b"png"]),
        "image/class/label": ("int64", [1])}))


def mnist_seeds():
    src = "/usr/share/datasets/fashion-mnist"
    images = labels = None
    if os.path.isdir(src):
        images = gzip.decompress(read(os.path.join(src, "t10k-images-idx3-ubyte.gz")))
        labels = gzip.decompress(read(os.path.join(src, "t10k-labels-idx1-ubyte.gz")))
        images = images[:4] + struct.pack(">I", 3) + images[8:16] + images[16:16 + 3 * 784]
        labels = labels[:4] + struct.pack(">I", 3) + labels[8:11]
    else:
        images = struct.pack(">IIII", 0x803, 3, 28, 28) + bytes(range(256)) * 9 + bytes(48)
        labels = struct.pack(">II", 0x801, 3) + b"\x01\x02\x09"
    put("mnist", "fashion_3.idx", b"\x00" + struct.pack("<I", len(images)) + images + labels)
    gi, gl = gzip.compress(images, 9), gzip.compress(labels, 9)
    put("mnist", "fashion_3.gz", b"\x01" + struct.pack("<I", len(gi)) + gi + gl)
    put("mnist", "empty.idx", b"\x00" + struct.pack("<I", 16) + struct.pack(">IIII", 0x803, 0, 28, 28)
        + struct.pack(">II", 0x801, 0))


def tar_gz(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def cifar_seeds():
    rec10 = lambda k: b"".join(bytes([(i + k) % 10]) + bytes((i * 3 + j) & 255 for j in range(3072))
                               for i in range(2))
    meta = b"\n".join(b"class%d" % i for i in range(10)) + b"\n"
    names = ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]
    fields = [rec10(k) for k in range(6)] + [meta]
    put("cifar", "cifar10_members", b"\x00" + b"".join(field(f) for f in fields))
    put("cifar", "cifar10.tar.gz", b"\x01" + tar_gz(
        [("cifar-10-batches-bin/" + n, d) for n, d in zip(names + ["batches.meta.txt"], fields)]))
    rec100 = b"".join(bytes([i % 20, i % 100]) + bytes(3072) for i in range(3))
    fine = b"\n".join(b"fine%d" % i for i in range(100))
    coarse = b"\n".join(b"coarse%d" % i for i in range(20))
    put("cifar", "cifar100_members", b"\x02" + b"".join(field(f) for f in (rec100, rec100, fine, coarse)))
    put("cifar", "cifar100_coarse_members", b"\x06" + b"".join(field(f) for f in (rec100, rec100, fine, coarse)))


def archive_seeds(imgs):
    members = [("a", b"hello"), ("top/b.bin", bytes(range(200))), ("top/c/d.jpg", imgs["exif_orient6.jpg"][:3000])]
    put("archive", "members.tar.gz", b"\x01" + tar_gz(members))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in members:
            z.writestr(n, d)
    put("archive", "members.zip", b"\x01" + buf.getvalue())
    listed = b"".join(bytes([k]) + field(n.encode()) + field(d) for k, n, d in
                      ((0, "a", b"x"), (0, "top/b.bin", b"yz"), (1, "top/", b""),
                       (2, "top/link", b"b.bin"), (3, "top/hard", b"a")))
    for fmt in range(6):
        put("archive", "listed_format%d" % fmt, bytes([fmt << 1]) + listed)
        put("archive", "listed_format%d_gz" % fmt, bytes([fmt << 1 | 16]) + listed)
    put("archive", "traversal", b"\x00" + bytes([0]) + field(b"../evil") + field(b"x"))
    with tempfile.TemporaryDirectory() as d:  # libarchive-only formats
        open(os.path.join(d, "a"), "wb").write(b"hello")
        for flag, name in (("-J", "xz"), ("-j", "bz2")):
            try:
                data = subprocess.run(["tar", "-C", d, flag, "-cf", "-", "a"], capture_output=True,
                                      check=True).stdout
                put("archive", "members.tar." + name, b"\x01" + data)
            except (OSError, subprocess.CalledProcessError):
                pass


def image_folder_seeds(imgs):
    pick = [imgs["tf_rgb.png"], imgs["exif_orient6.jpg"], imgs["gen_24.bmp"], imgs["gen_8.bmp"]]
    gifs = [v for k, v in sorted(imgs.items()) if k.startswith("gif")]
    if gifs:
        pick.append(min(gifs, key=len))
    small = [p for p in pick if len(p) < 0xFFFF]
    # name byte: bit 0 picks the class folder, (byte >> 1) % 6 the extension
    exts = {b"\x89PNG": 1, b"\xff\xd8\xff": 0, b"BM": 2, b"GIF8": 3}
    seed = b"\x00"
    for i, data in enumerate(small):
        ext = next(v for k, v in exts.items() if data.startswith(k))
        seed += bytes([ext << 1 | (i & 1)]) + field(data)
    put("image_folder", "mixed", seed)
    put("image_folder", "bad_skipped", b"\x01" + bytes([0]) + field(b"\xff\xd8\xff\xe0broken")
        + bytes([3]) + field(imgs["tf_gray.png"]))


def text_seeds():
    put("labels_file", "cifar10.txt", b"".join(b"%d:class%d\n" % (i, i) for i in range(10)))
    put("labels_file", "fashion.txt", "0:T-shirt/top\n1:Trouser\n6:Shirt\r\n\n9:Ankle boot\n".encode())
    put("dataset_description", "image_folder.txt",
        b"# slimtorch dataset description\nname: flowers_photos\nfile_pattern: flowers_%s_*.tfrecord\n"
        b"num_classes: 5\nimage_channels: 3\nimage_height: 0\nimage_width: 0\n"
        b"split: train 3320\nsplit: validation 350\n")
    for f in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        if f.endswith(".flags"):
            put("flagfile", f, read(os.path.join(ROOT, "configs", f)))
    put("flagfile", "sections.flags", b"# gflags sections\ntrain_*\n--model_name=lenet\n*eval*\n"
        b"--use_grayscale\n--nouse_grayscale\n--undefok=foo\n--foo=1\n--max_number_of_steps 10\n")


def safetensors_seeds():
    st = read(os.path.join(GOLDEN, "python.safetensors"))
    put("safetensors", "python.raw", b"\x01" + st)
    (n,) = struct.unpack("<Q", st[:8])
    put("safetensors", "python.split", b"\x00" + field(st[8:8 + n]) + st[8 + n:])
    header = b'{"__metadata__":{"global_step":"3"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},' \
             b'"b":{"dtype":"BF16","shape":[],"data_offsets":[16,18]}}'
    put("safetensors", "two.split", b"\x00" + field(header) + bytes(18))


def tf_checkpoint_seeds():
    """TensorFlow-written V2 bundles and V1 files of tests/golden/tf_checkpoints,
    each as raw table bytes (kinds 0, 1) and as table entries (kinds 2, 3)."""

    def block(b, off, size):
        data = b[off:off + size]
        n = struct.unpack("<I", data[-4:])[0]
        end, p, key, out = len(data) - 4 - 4 * n, 0, b"", []
        while p < end:
            shared, p = uvarint(data, p)
            unshared, p = uvarint(data, p)
            vlen, p = uvarint(data, p)
            key = key[:shared] + data[p:p + unshared]
            p += unshared
            out.append((key, data[p:p + vlen]))
            p += vlen
        return out

    def entries(table):  # uncompressed tables only, as TensorFlow writes them
        p = len(table) - 48
        _, p = uvarint(table, p)
        _, p = uvarint(table, p)
        off, p = uvarint(table, p)
        size, p = uvarint(table, p)
        out = []
        for _, handle in block(table, off, size):
            o, q = uvarint(handle, 0)
            n, _ = uvarint(handle, q)
            out += block(table, o, n)
        return b"".join(varint(len(k)) + k + varint(len(v)) + v for k, v in out)

    src = os.path.join(GOLDEN, "tf_checkpoints")
    for archive in ("saver_formats.tar.gz", "cifarnet_v2.tar.gz", "lenet_v1.tar.gz"):
        with tarfile.open(os.path.join(src, archive)) as t:
            files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
        for name, data in files.items():
            if len(data) > 1 << 20:
                continue
            base = name.replace("/", "_")
            if name.endswith(".index"):
                shard = files.get(name[:-len(".index")] + ".data-00000-of-00001")
                if shard is None or len(shard) > 1 << 20:
                    continue
                for kind, table in ((0, data), (2, entries(data))):
                    put("tf_checkpoint", "%s.%d" % (base, kind),
                        bytes([kind]) + struct.pack("<I", len(table)) + table + shard)
            elif re.fullmatch(r"model\.ckpt-\d+", os.path.basename(name)):
                for kind, table in ((1, data), (3, entries(data))):
                    put("tf_checkpoint", "%s.%d" % (base, kind), bytes([kind]) + table)


def uvarint(b, p):
    v = s = 0
    while True:
        c = b[p]
        p += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, p


def main():
    imgs = images()
    image_seeds(imgs)
    recs = tfrecord_seeds()
    example_seeds(recs, imgs)
    mnist_seeds()
    cifar_seeds()
    archive_seeds(imgs)
    image_folder_seeds(imgs)
    text_seeds()
    safetensors_seeds()
    tf_checkpoint_seeds()
    for t in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, t))
        size = sum(os.path.getsize(os.path.join(OUT, t, f)) for f in files)
        print("%-20s %4d seeds %8d bytes" % (t, len(files), size))


if __name__ == "__main__":
    main()
