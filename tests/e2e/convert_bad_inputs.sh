#!/usr/bin/env bash
# download_and_convert_data on bad inputs: each case must exit non-zero with
# one clear error line and leave no TFRecord under its final name.
#   bash convert_bad_inputs.sh <build dir>
set -euo pipefail

TOOL="$1/download_and_convert_data"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# Writes the four MNIST .gz files into $1 (2 train, 1 test image).
make_source() {
  python3 - "$1" <<'PY'
import gzip, os, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
def write(name, data):
    with gzip.open(os.path.join(d, name), "wb") as f:
        f.write(data)
for prefix, n in (("train", 2), ("t10k", 1)):
    write(prefix + "-images-idx3-ubyte.gz",
          struct.pack(">IIII", 0x803, n, 28, 28) +
          bytes((i * 7) % 256 for i in range(n * 784)))
    write(prefix + "-labels-idx1-ubyte.gz",
          struct.pack(">II", 0x801, n) + bytes(range(n)))
PY
}

source "$(dirname "$0")/lib.sh"

expect_convert_failure missing_dataset_dir \
  "You must supply the dataset directory with --dataset_dir" \
  --dataset_name=mnist
expect_convert_failure missing_dataset_name \
  "You must supply the dataset name with --dataset_name" \
  --dataset_dir="$TMP/out_missing_dataset_name"
expect_convert_failure unknown_dataset "valid names: " \
  --dataset_name=no_such_set --dataset_dir="$TMP/out_unknown_dataset"
expect_convert_failure unsupported_vww_flag "--foreground_class_of_interest is not supported yet" \
  --dataset_name=mnist --dataset_dir="$TMP/out_unsupported_vww_flag" \
  --foreground_class_of_interest=cat

# Truncated .gz: the test labels lose their tail.
make_source "$TMP/trunc"
python3 - "$TMP/trunc/t10k-labels-idx1-ubyte.gz" <<'PY'
import sys
p = sys.argv[1]
data = open(p, "rb").read()
open(p, "wb").write(data[:-6])
PY
expect_convert_failure truncated_gz "t10k-labels-idx1-ubyte.gz' is truncated" \
  --dataset_name=mnist --dataset_dir="$TMP/out_truncated_gz" \
  --source_url="file://$TMP/trunc/"

# Wrong magic: an IDX label file where the train images should be.
make_source "$TMP/magic"
cp "$TMP/magic/train-labels-idx1-ubyte.gz" "$TMP/magic/train-images-idx3-ubyte.gz"
expect_convert_failure wrong_magic "expected magic 0x00000803, got 0x00000801" \
  --dataset_name=fashion_mnist --dataset_dir="$TMP/out_wrong_magic" \
  --source_url="file://$TMP/magic/"

# ImageNet's flags belong to --dataset_name=imagenet; it needs its images.
expect_convert_failure imagenet_flag_elsewhere \
  "--train_directory applies to --dataset_name=imagenet only" \
  --dataset_name=mnist --dataset_dir="$TMP/out_imagenet_flag_elsewhere" \
  --train_directory="$TMP"
expect_convert_failure imagenet_no_images "imagenet: set --train_directory" \
  --dataset_name=imagenet --dataset_dir="$TMP/out_imagenet_no_images"
expect_convert_failure imagenet_shards "must be multiples of --num_threads (3)" \
  --dataset_name=imagenet --dataset_dir="$TMP/out_imagenet_shards" \
  --train_directory="$TMP" --validation_directory="$TMP" --num_threads=3

# And the good source converts.
make_source "$TMP/good"
"$TOOL" --dataset_name=mnist --dataset_dir="$TMP/out_good" \
  --source_url="file://$TMP/good/" 2>"$TMP/good.err"
for f in mnist_train.tfrecord mnist_test.tfrecord labels.txt; do
  [[ -s "$TMP/out_good/$f" ]] || { echo "FAIL good: no $f"; exit 1; }
done
echo "ok   good source converts"
