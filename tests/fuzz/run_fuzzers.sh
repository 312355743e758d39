#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang, AddressSanitizer
# and UndefinedBehaviorSanitizer (only the sources a target needs; LibTorch
# itself is not instrumented) and runs each for SECONDS (default 300) from a
# corpus of TensorFlow's own files. Not part of CTest or CI: run it after
# changing a parser.
#   tests/fuzz/run_fuzzers.sh [SECONDS]
# Needs clang (Debian: clang, libclang-rt-dev), libsnappy-dev optional.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-300}
out=${FUZZ_DIR:-/tmp/slimtorch_fuzz}
mkdir -p "$out/gen" "$out/corpus/tf_checkpoint"
protoc --proto_path="$root/src/io/proto" --cpp_out="$out/gen" \
  "$root/src/io/proto/tensor_bundle.proto"
snappy=()
if [[ -f /usr/include/snappy.h ]]; then snappy=(-DSLIMTORCH_WITH_SNAPPY -lsnappy); fi
san=(-fsanitize=address,undefined,fuzzer -fno-sanitize-recover=undefined)
clang++ -std=c++17 -O1 -g "${san[@]}" -D_GLIBCXX_USE_CXX11_ABI=1 \
  -I"$root/include" -I"$out/gen" -isystem /usr/include/torch/csrc/api/include \
  "$root/tests/fuzz/tf_checkpoint_fuzz.cc" "$root/src/io/tf_checkpoint.cc" \
  "$root/src/io/sstable.cc" "$root/src/io/crc32c.cc" "$root/src/io/checkpoint.cc" \
  "$root/src/io/safetensors.cc" "$root/src/core/file_util.cc" "$out/gen/tensor_bundle.pb.cc" \
  "${snappy[@]}" -ltorch -ltorch_cpu -lc10 -lprotobuf -lpthread \
  -o "$out/tf_checkpoint_fuzz"

# Seeds: TensorFlow-written V2 bundles and V1 files from
# tests/golden/tf_checkpoints, each as raw table bytes (kinds 0, 1) and as
# table entries (kinds 2, 3).
python3 - "$root/tests/golden/tf_checkpoints" "$out/corpus/tf_checkpoint" <<'PY'
import os, re, struct, sys, tarfile

def varint(b, p):
  v = s = 0
  while True:
    c = b[p]; p += 1; v |= (c & 0x7F) << s; s += 7
    if c < 0x80: return v, p

def block(b, off, size):
  data = b[off:off + size]
  n = struct.unpack("<I", data[-4:])[0]
  end, p, key, out = len(data) - 4 - 4 * n, 0, b"", []
  while p < end:
    shared, p = varint(data, p); unshared, p = varint(data, p)
    vlen, p = varint(data, p)
    key = key[:shared] + data[p:p + unshared]; p += unshared
    out.append((key, data[p:p + vlen])); p += vlen
  return out

def entries(table):  # uncompressed tables only, as TensorFlow writes them
  p = len(table) - 48
  _, p = varint(table, p); _, p = varint(table, p)
  off, p = varint(table, p); size, p = varint(table, p)
  out = []
  for _, handle in block(table, off, size):
    o, q = varint(handle, 0); n, _ = varint(handle, q)
    out += block(table, o, n)
  return b"".join(bytes(enc(len(k))) + k + bytes(enc(len(v))) + v
                  for k, v in out)

def enc(n):
  out = []
  while n >= 0x80: out.append(n & 0x7F | 0x80); n >>= 7
  return out + [n]

src, dst = sys.argv[1:]
for archive in ["saver_formats.tar.gz", "cifarnet_v2.tar.gz", "lenet_v1.tar.gz"]:
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
        seed = bytes([kind]) + struct.pack("<I", len(table)) + table + shard
        open(os.path.join(dst, "%s.%d" % (base, kind)), "wb").write(seed)
    elif re.fullmatch(r"model\.ckpt-\d+", os.path.basename(name)):
      for kind, table in ((1, data), (3, entries(data))):
        open(os.path.join(dst, "%s.%d" % (base, kind)), "wb").write(
            bytes([kind]) + table)
PY
ls "$out/corpus/tf_checkpoint" | sed 's/^/seed: /'
ASAN_OPTIONS=detect_leaks=1 "$out/tf_checkpoint_fuzz" -max_total_time="$seconds" \
  -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=2000000 \
  -artifact_prefix="$out/" "$out/corpus/tf_checkpoint"
