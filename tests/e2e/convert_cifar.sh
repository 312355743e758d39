#!/usr/bin/env bash
# download_and_convert_data --dataset_name=cifar10|cifar100 end to end on
# archives built with python3's tarfile in the upstream layout: a full-size
# CIFAR-10 archive converts (pixels and labels checked on a few records);
# bad archives exit non-zero with one clear error line and leave no TFRecord
# under its final name.
#   bash convert_cifar.sh <build dir>
set -euo pipefail

BIN="$1"
TOOL="$BIN/download_and_convert_data"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# make_archive <dir> <cifar10|cifar100> <records per train file> <case>
# Writes <dir>/cifar-10-binary.tar.gz or cifar-100-binary.tar.gz. Record i of
# a file has label(s) i % classes and pixel byte j of its CHW image
# (i * 7 + j) % 251. <case>: good, wrong_size, dotdot, absolute, symlink.
make_archive() {
  python3 - "$@" <<'PY'
import io, os, sys, tarfile
d, kind, n, case = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.makedirs(d, exist_ok=True)
pattern = bytes((j % 251) for j in range(3072 + 251 * 7))
def records(count, nlabels):
    out = bytearray()
    for i in range(count):
        if nlabels == 1:
            out += bytes([i % 10])
        else:
            out += bytes([i % 20, i % 100])
        s = (i * 7) % 251
        out += pattern[s:s + 3072]
    return bytes(out)
if kind == "cifar10":
    name, top = "cifar-10-binary.tar.gz", "cifar-10-batches-bin"
    files = {"data_batch_%d.bin" % b: records(n, 1) for b in range(1, 6)}
    files["test_batch.bin"] = records(n, 1)
    files["batches.meta.txt"] = ("\n".join(
        "airplane automobile bird cat deer dog frog horse ship truck".split())
        + "\n\n").encode()
else:
    name, top = "cifar-100-binary.tar.gz", "cifar-100-binary"
    files = {"train.bin": records(n, 2), "test.bin": records(n, 2),
             "fine_label_names.txt": "".join("fine%d\n" % i for i in range(100)).encode(),
             "coarse_label_names.txt": "".join("coarse%d\n" % i for i in range(20)).encode()}
if case == "wrong_size":
    files[[f for f in sorted(files) if f.endswith(".bin")][0]] += b"x"
with tarfile.open(os.path.join(d, name), "w:gz", compresslevel=1) as tar:
    def add(path, data):
        info = tarfile.TarInfo(path)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    for f in sorted(files):
        add(top + "/" + f, files[f])
    if case == "dotdot":
        add("../evil", b"x")
    elif case == "absolute":
        add("/tmp/evil", b"x")
    elif case == "symlink":
        info = tarfile.TarInfo(top + "/escape")
        info.type = tarfile.SYMTYPE
        info.linkname = "../../etc"
        tar.addfile(info)
PY
}

source "$(dirname "$0")/lib.sh"

# Bad inputs (tiny archives: they fail before the split sizes are checked).
for c in wrong_size dotdot absolute symlink; do
  make_archive "$TMP/$c" cifar10 2 "$c"
done
cp "$TMP/wrong_size/cifar-10-binary.tar.gz" "$TMP/trunc.tar.gz"
mkdir -p "$TMP/trunc"
python3 - "$TMP/trunc.tar.gz" "$TMP/trunc/cifar-10-binary.tar.gz" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(data[: len(data) // 2])
PY
expect_convert_failure truncated "cifar-10-binary.tar.gz' is truncated or corrupt" \
  --dataset_name=cifar10 --dataset_dir="$TMP/out_truncated" \
  --source_url="file://$TMP/trunc/"
expect_convert_failure wrong_size "not a whole number of 3073-byte records" \
  --dataset_name=cifar10 --dataset_dir="$TMP/out_wrong_size" \
  --source_url="file://$TMP/wrong_size/"
expect_convert_failure dotdot "entry '../evil' has a '..' component" \
  --dataset_name=cifar10 --dataset_dir="$TMP/out_dotdot" \
  --source_url="file://$TMP/dotdot/"
expect_convert_failure absolute "entry '/tmp/evil' has an absolute path" \
  --dataset_name=cifar10 --dataset_dir="$TMP/out_absolute" \
  --source_url="file://$TMP/absolute/"
expect_convert_failure symlink "is a symlink to '../../etc', which would leave" \
  --dataset_name=cifar10 --dataset_dir="$TMP/out_symlink" \
  --source_url="file://$TMP/symlink/"
make_archive "$TMP/c100" cifar100 3 good
cp "$TMP/c100/cifar-100-binary.tar.gz" "$TMP/c100/cifar-10-binary.tar.gz"
expect_convert_failure cifar100_as_cifar10 "this is the CIFAR-100 archive: use --dataset_name=cifar100" \
  --dataset_name=cifar10 --dataset_dir="$TMP/out_cifar100_as_cifar10" \
  --source_url="file://$TMP/c100/"
expect_convert_failure short_split "holds 3 train examples, expected 50000 (CIFAR-100)" \
  --dataset_name=cifar100 --dataset_dir="$TMP/out_short_split" \
  --source_url="file://$TMP/c100/"
expect_convert_failure bad_label_mode "--cifar100_label_mode must be 'fine' or 'coarse'" \
  --dataset_name=cifar100 --dataset_dir="$TMP/out_bad_label_mode" \
  --cifar100_label_mode=medium

# A full-size CIFAR-10 archive converts.
make_archive "$TMP/good" cifar10 10000 good
"$TOOL" --dataset_name=cifar10 --dataset_dir="$TMP/out_good" \
  --source_url="file://$TMP/good/" 2>"$TMP/good.err" ||
  { cat "$TMP/good.err"; exit 1; }
for f in cifar10_train.tfrecord cifar10_test.tfrecord labels.txt; do
  [[ -s "$TMP/out_good/$f" ]] || { echo "FAIL good: no $f"; exit 1; }
done
grep -qx "9:truck" "$TMP/out_good/labels.txt" ||
  { echo "FAIL good: labels.txt"; cat "$TMP/out_good/labels.txt"; exit 1; }
# Count the records (TFRecord framing: u64 length, u32 crc, data, u32 crc).
python3 - "$TMP/out_good" <<'PY'
import os, struct, sys
d = sys.argv[1]
for split, want in (("train", 50000), ("test", 10000)):
    data = open(os.path.join(d, "cifar10_%s.tfrecord" % split), "rb").read()
    pos = n = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        rec = data[pos + 12: pos + 12 + length]
        assert b"image/class/label" in rec and b"\x89PNG" in rec, split
        pos += 16 + length
        n += 1
    assert n == want, (split, n, want)
PY
echo "ok   full-size cifar10 converts (50000 + 10000 records, labels.txt)"
"$TOOL" --dataset_name=cifar10 --dataset_dir="$TMP/out_good" \
  --source_url="file:///nonexistent/" 2>"$TMP/skip.err" ||
  { echo "FAIL second run did not skip"; cat "$TMP/skip.err"; exit 1; }
echo "ok   second run skips"
