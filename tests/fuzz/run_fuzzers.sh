#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ (*_fuzz.cc) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs fuzzing campaigns.
#
#   tests/fuzz/run_fuzzers.sh [SECONDS] [TARGET...]   build, then fuzz each
#       TARGET (default: all) for SECONDS (default 300), FUZZ_JOBS at a time
#   tests/fuzz/run_fuzzers.sh --build [TARGET...]     build only
#   tests/fuzz/run_fuzzers.sh --merge TARGET...       minimise the checked-in
#       corpus of each TARGET with what the campaigns found (-merge=1)
#
# The readers' sources (src/core, src/io, src/datasets and the record decoding
# of src/data: only what the targets need; LibTorch itself is not
# instrumented) are compiled once into $FUZZ_DIR/obj by a generated
# build.ninja, so a rerun rebuilds only what changed.
#
# Each campaign starts from tests/fuzz/corpus/<target>/ and
# tests/fuzz/regressions/<target>/, keeps what it finds in
# $FUZZ_DIR/corpus/<target>/ and findings (crash-*, leak-*, timeout-*,
# oom-*) in $FUZZ_DIR/findings/<target>/; a finding ends a libFuzzer run, and
# the campaign starts it again for the time left. At the end each target's
# executions, exec/s, coverage (edges: libFuzzer's "cov", features: "ft"),
# corpus size and findings are appended to bench/results/fuzz.csv
# (FUZZ_RESULTS; empty: none) and printed as a table.
#
# Environment: FUZZ_DIR (/tmp/slimtorch_fuzz), FUZZ_JOBS (2), FUZZ_RSS_MB
# (2048: libFuzzer's -rss_limit_mb and -malloc_limit_mb), FUZZ_MAX_LEN
# (1048576), FUZZ_RESULTS, JOBS (compile jobs, 2), CXX (clang++).
# Needs clang with its runtime (Debian: clang, libclang-rt-dev; install them
# with scripts/install_deps.sh --fuzz) and the build dependencies of slimtorch.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_DIR:-/tmp/slimtorch_fuzz}
jobs=${FUZZ_JOBS:-2}
rss=${FUZZ_RSS_MB:-2048}
max_len=${FUZZ_MAX_LEN:-1048576}
results=${FUZZ_RESULTS-$root/bench/results/fuzz.csv}
cxx=${CXX:-clang++}
[[ $cxx == *clang* ]] || cxx=clang++

mode=run seconds=300
case "${1:-}" in
  --build) mode=build; shift ;;
  --merge) mode=merge; shift ;;
  ''|*[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac
all=$(cd "$root/tests/fuzz" && ls *_fuzz.cc | sed 's/_fuzz\.cc$//')
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || read -r -a targets <<<"$(echo $all)"
for t in "${targets[@]}"; do
  [[ -f $root/tests/fuzz/${t}_fuzz.cc ]] ||
    { echo "run_fuzzers: no target '$t' (one of: $(echo $all))" >&2; exit 2; }
done
command -v "$cxx" >/dev/null ||
  { echo "run_fuzzers: needs clang++ (scripts/install_deps.sh --fuzz)" >&2; exit 2; }

# ---------------------------------------------------------------- build
library=(
  src/core/file_util.cc src/core/python_random.cc src/core/sha1.cc
  src/core/kernel_switches.cc src/core/environment.cc
  src/core/strings.cc src/core/resource_limits.cc src/core/fault_injection.cc
  tools/cli/flag_help.cc tools/cli/command_line.cc
  src/io/crc32c.cc src/io/tfrecord.cc src/io/example.cc src/io/labels_file.cc
  src/io/image_codec.cc src/io/bmp_gif_codec.cc src/io/jpeg_decoder.cc
  src/io/jpeg_error.cc src/io/download.cc src/io/gzip.cc src/io/safetensors.cc
  src/io/checkpoint.cc src/io/archive.cc src/io/sstable.cc
  src/io/tf_checkpoint.cc
  src/datasets/dataset.cc src/datasets/mnist.cc src/datasets/convert_util.cc
  src/datasets/cifar.cc src/datasets/flowers.cc src/datasets/imagenet.cc
  src/datasets/imagenet_boxes.cc src/datasets/imagenet_image.cc
  src/datasets/imagenet_metadata.cc src/datasets/imagenet_sources.cc
  src/datasets/image_folder.cc
  src/data/record_decode.cc src/data/example_scan.cc
  tests/fuzz/fuzz_util.cc
)
build() {
  mkdir -p "$out/gen/slimtorch/io/proto" "$out/obj"
  for proto in example tensor_bundle; do
    local pb=$out/gen/slimtorch/io/proto/$proto.pb.cc
    if [[ ! -f $pb || $root/src/io/proto/$proto.proto -nt $pb ]]; then
      protoc --proto_path="$root/src/io/proto" \
        --cpp_out="$out/gen/slimtorch/io/proto" "$root/src/io/proto/$proto.proto"
    fi
  done
  local snappy_def="" snappy_lib=""
  if [[ -f /usr/include/snappy.h ]]; then
    snappy_def=-DSLIMTORCH_WITH_SNAPPY=1 snappy_lib=-lsnappy
  fi
  local objs=() src obj
  {
    echo "cflags = -std=c++17 -O1 -g -fno-omit-frame-pointer" \
      "-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
      "-DSLIMTORCH_LIBFUZZER -D_GLIBCXX_USE_CXX11_ABI=1 $snappy_def" \
      "-I$root/include -I$root/src -I$root/tools -I$root/tests/fuzz -I$out/gen" \
      "-I$out/gen/slimtorch/io/proto -isystem /usr/include/torch/csrc/api/include"
    echo "rule cxx"
    echo "  command = $cxx \$cflags \$extra -MMD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "  description = CXX \$in"
    echo "rule link"
    echo "  command = $cxx -fsanitize=address,undefined,fuzzer \$in -o \$out" \
      "-ltorch -ltorch_cpu -lc10 -lprotobuf -lpng -ljpeg -larchive -lcurl -lz" \
      "-lglog -lgflags $snappy_lib -lpthread"
    echo "  description = LINK \$out"
    for src in "${library[@]}" "$out/gen/slimtorch/io/proto/example.pb.cc" \
               "$out/gen/slimtorch/io/proto/tensor_bundle.pb.cc"; do
      obj=$out/obj/$(echo "${src#$out/}" | tr / _).o
      [[ $src == /* ]] || src=$root/$src
      echo "build $obj: cxx $src"
      echo "  extra = -fsanitize=fuzzer-no-link$([[ $src == *.pb.cc ]] && echo " -w")"
      objs+=("$obj")
    done
    for t in "${targets[@]}"; do
      echo "build $out/obj/${t}_fuzz.o: cxx $root/tests/fuzz/${t}_fuzz.cc"
      echo "  extra = -fsanitize=fuzzer"
      echo "build $out/${t}_fuzz: link $out/obj/${t}_fuzz.o ${objs[*]}"
    done
  } >"$out/build.ninja.new"
  mv "$out/build.ninja.new" "$out/build.ninja"
  ninja -C "$out" -j "${JOBS:-2}" $(for t in "${targets[@]}"; do echo "$out/${t}_fuzz"; done)
}
# The commit the rows name is the tree built now, not HEAD at the end: a
# campaign runs an hour, and commits may land meanwhile.
if [[ -z ${BENCH_COMMIT:-} ]]; then
  BENCH_COMMIT=$(cd "$root" && python3 -c \
    'import sys; sys.path.insert(0, "bench/lib"); import results; print(results.commit())')
  export BENCH_COMMIT
fi
build
[[ $mode == build ]] && exit 0

# ---------------------------------------------------------------- merge
libfuzzer_flags=(-rss_limit_mb="$rss" -malloc_limit_mb="$rss" -max_len="$max_len"
  -timeout=60 -print_final_stats=1)
if [[ $mode == merge ]]; then
  for t in "${targets[@]}"; do
    keep=$root/tests/fuzz/corpus/$t
    mkdir -p "$keep" "$out/corpus/$t"
    mv "$keep" "$keep.old"
    mkdir -p "$keep"
    ASAN_OPTIONS=detect_leaks=1 "$out/${t}_fuzz" -merge=1 "${libfuzzer_flags[@]}" \
      "$keep" "$keep.old" "$out/corpus/$t" >"$out/merge_$t.log" 2>&1 ||
      { echo "merge $t failed: $out/merge_$t.log" >&2; rm -rf "$keep"; mv "$keep.old" "$keep"; exit 1; }
    rm -rf "$keep.old"
    # Names by content, as libFuzzer's (a SHA-1), so reruns do not duplicate.
    echo "$t: $(ls "$keep" | wc -l) inputs, $(du -sk "$keep" | cut -f1) KiB"
  done
  exit 0
fi

# ---------------------------------------------------------------- campaigns
# campaign TARGET: libFuzzer runs until SECONDS have passed, restarted after
# each finding; the last run's stats plus the summed executions in
# $out/stats/TARGET.
campaign() {
  local t=$1 start=$SECONDS left execs=0 runs=0 log
  mkdir -p "$out/corpus/$t" "$out/findings/$t" "$out/logs"
  : >"$out/logs/$t.log"
  touch "$out/logs/$t.start"  # findings newer than this are this campaign's
  while left=$((seconds - (SECONDS - start))); ((left > 0)); do
    runs=$((runs + 1))
    log=$out/logs/$t.$runs.log
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
    UBSAN_OPTIONS=print_stacktrace=1 \
      "$out/${t}_fuzz" -max_total_time="$left" "${libfuzzer_flags[@]}" \
      -artifact_prefix="$out/findings/$t/" "$out/corpus/$t" \
      "$root/tests/fuzz/corpus/$t" \
      $([[ -d $root/tests/fuzz/regressions/$t ]] && echo "$root/tests/fuzz/regressions/$t") \
      >"$log" 2>&1 || true
    cat "$log" >>"$out/logs/$t.log"
    execs=$((execs + $(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 | grep . || echo 0)))
    # A run that ended without stats (killed) or at once: stop trying.
    grep -q '^stat::number_of_executed_units' "$log" || break
    ((SECONDS - start >= seconds)) && break
  done
  local last cov ft corp
  last=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$out/logs/$t.log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\) .*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  local found
  found=$(find "$out/findings/$t" -type f -newer "$out/logs/$t.start" | wc -l)
  echo "$t $((SECONDS - start)) $execs ${cov:-0} ${ft:-0} ${corp:-0} $found $runs" \
    >"$out/stats/$t"
}

# Only this run's targets: campaigns of other targets may run at the same
# time from another invocation, with their stats in the same folder.
mkdir -p "$out/stats"
for t in "${targets[@]}"; do rm -f "$out/stats/$t"; done
echo "run_fuzzers: ${#targets[@]} targets, ${seconds} s each, $jobs at a time; logs in $out/logs"
running=0
for t in "${targets[@]}"; do
  campaign "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
done
wait || true

python3 - "$out/stats" "$results" "$seconds" "$jobs" "$root" "${targets[@]}" <<'PY'
import csv, datetime, os, subprocess, sys
stats, results, seconds, jobs, root = sys.argv[1:6]
targets = sys.argv[6:]
sys.path.insert(0, os.path.join(root, "bench", "lib"))
import results as bench  # noqa: E402  (machine and commit as the benches')
rows = []
for name in sorted(t for t in targets if os.path.exists(os.path.join(stats, t))):
    t, secs, execs, cov, ft, corp, finds, runs = open(os.path.join(stats, name)).read().split()
    rows.append((t, int(secs), int(execs), int(cov), int(ft), int(corp), int(finds), int(runs)))
print("%-20s %6s %12s %8s %7s %7s %6s %8s" % ("target", "s", "executions", "exec/s", "edges",
                                            "features", "corpus", "findings"))
for t, secs, execs, cov, ft, corp, finds, runs in rows:
    print("%-20s %6d %12d %8d %7d %7d %6d %8d" % (t, secs, execs, execs // max(secs, 1),
                                                  cov, ft, corp, finds))
if not results:
    sys.exit(0)
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
machine, commit = bench.cpu_machine(), bench.commit()
new = not os.path.exists(results) or os.path.getsize(results) == 0
with open(results, "a", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    if new:
        w.writerow(["date", "machine", "commit", "measure", "value", "unit", "notes"])
    for t, secs, execs, cov, ft, corp, finds, runs in rows:
        notes = ("libFuzzer + ASan + UBSan (clang), %d s, %s campaigns at a time, %d run(s)"
                 % (secs, jobs, runs))
        for measure, value, unit in ((" executions", execs, "runs"),
                                     (" exec/s", execs // max(secs, 1), "runs/s"),
                                     (" edges", cov, "edges"),
                                     (" features", ft, "features"),
                                     (" corpus", corp, "inputs"),
                                     (" findings", finds, "files")):
            w.writerow([date, machine, commit, t + measure, value, unit, notes])
print("rows appended to %s" % results)
PY
