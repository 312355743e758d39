#!/usr/bin/env bash
# The tools' command line: --helpshort / --help print the usage
# line and each tool's flags by group with their defaults as written (0.95,
# not 0.94999999999999996) and exit 0; an unknown flag names the nearest
# ones; a missing --flagfile is one error line; flags on the command line win
# over a flagfile's wherever they stand, and the overridden values are named.
#   bash tool_flags.sh <build dir>
set -euo pipefail
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"

T="$BIN/train_image_classifier"
TOOLS=(download_and_convert_data train_image_classifier eval_image_classifier
       export_inference_graph label_image inspect_checkpoint)

fail() { echo "FAIL $1"; [[ -n "${2:-}" ]] && cat "$2"; exit 1; }

# Every tool: --helpshort and --help exit 0, the usage line first, every
# flag of its own in a named group (none left under "More flags"),
# --helpxml as gflags writes it (exit 1, XML of every flag).
for tool in "${TOOLS[@]}"; do
  for flag in --helpshort --help; do
    out="$TMP/$tool$flag.out"
    rc=0
    "$BIN/$tool" "$flag" >"$out" 2>"$TMP/help.err" || rc=$?
    [[ $rc -eq 0 ]] || fail "$tool $flag: exit status $rc" "$TMP/help.err"
    head -1 "$out" | grep -q "^usage: $tool \[--flagfile=FILE\] \[--name=value \.\.\.\]$" \
      || fail "$tool $flag: the first line is not the usage line" "$out"
    grep -q '^  --' "$out" || fail "$tool $flag: no flags listed" "$out"
    grep -q '^More flags:' "$out" && fail "$tool $flag: flags left out of the groups" "$out"
    grep -q 'win over' "$out" || fail "$tool $flag: the flagfile rule is not told" "$out"
  done
  grep -q '^Other flags (gflags, glog' "$TMP/$tool--help.out" \
    || fail "$tool --help: gflags' and glog's flags missing" "$TMP/$tool--help.out"
  grep -q '^  --flagfile=' "$TMP/$tool--helpshort.out" \
    && fail "$tool --helpshort: lists gflags' own flags" "$TMP/$tool--helpshort.out"
  rc=0
  "$BIN/$tool" --helpxml >"$TMP/$tool.xml" 2>/dev/null || rc=$?
  [[ $rc -eq 1 ]] || fail "$tool --helpxml: exit status $rc (gflags: 1)"
  python3 - "$TMP/$tool.xml" "$tool" <<'PY' || fail "$tool --helpxml" "$TMP/$tool.xml"
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.findtext("program") == sys.argv[2], root.findtext("program")
assert any("tools/" in (f.findtext("file") or "") for f in root.iter("flag"))
PY
  echo "ok   $tool: --helpshort, --help exit 0, grouped; --helpxml as gflags"
done

# train_image_classifier's groups, in order, and defaults as written.
H="$TMP/train_image_classifier--helpshort.out"
prev=0
for heading in "Data:" "Model:" "Training:" "Optimizer:" "Learning rate:" \
    "Checkpoints and fine-tuning:" "Logging and summaries:" "Devices and speed:"; do
  line=$(grep -n -x -F -- "$heading" "$H" | cut -d: -f1 || true)
  [[ -n "$line" && $line -gt $prev ]] || fail "heading '$heading' missing or out of order" "$H"
  prev=$line
done
for want in '--adadelta_rho=0.95' '--rmsprop_momentum=0.9' \
    '--learning_rate_decay_factor=0.94' '--weight_decay=4e-05' \
    '--learning_rate=0.01' '--optimizer="rmsprop"' '--train_dir="/tmp/tfmodel/"' \
    '--batch_size=32' '--clone_on_cpu=false'; do
  # Its help beside it, or below it when the flag is too wide.
  grep -q -F -e "  $want " "$H" || grep -q -x -F -e "  $want" "$H" \
    || fail "--helpshort lacks '$want'" "$H"
done
grep -q '0\.9499999' "$H" && fail "--helpshort shows gflags' %.17g doubles" "$H"
# Optimizer: --optimizer first, its help text beside it.
sed -n '/^Optimizer:$/,/^$/p' "$H" | sed -n 2p | grep -q -- '--optimizer="rmsprop" .*The name of the optimizer' \
  || fail "Optimizer group does not start with --optimizer and its help" "$H"
echo "ok   train --helpshort: groups in order, 0.95 / 4e-05 / \"rmsprop\" as written"

# The run flags train and eval share (tools/run_flags.cc) keep each
# script's own defaults: eval's split is test and its batches 100, in --help
# and in what the flag holds when a flagfile or the command line does not
# set it (the XML's <default> and <current>).
E="$TMP/eval_image_classifier--helpshort.out"
for want in '--batch_size=100' '--dataset_split_name="test"'; do
  grep -q -F -e "  $want " "$E" || fail "eval --helpshort lacks '$want'" "$E"
done
grep -q -F -e '  --dataset_split_name="train" ' "$H" \
  || fail "train --helpshort lacks --dataset_split_name=\"train\"" "$H"
python3 - "$TMP/eval_image_classifier.xml" "$TMP/train_image_classifier.xml" <<'PY' \
  || fail "the shared run flags' defaults in --helpxml"
import sys
import xml.etree.ElementTree as ET
def flags(path):
    return {f.findtext("name"): (f.findtext("default"), f.findtext("current"))
            for f in ET.parse(path).getroot().iter("flag")}
ev, tr = flags(sys.argv[1]), flags(sys.argv[2])
assert ev["batch_size"] == ("100", "100"), ev["batch_size"]
assert ev["dataset_split_name"] == ("test", "test"), ev["dataset_split_name"]
assert tr["batch_size"] == ("32", "32"), tr["batch_size"]
assert tr["dataset_split_name"] == ("train", "train"), tr["dataset_split_name"]
PY
echo "ok   train and eval share the run flags, each with its own defaults"

# Unknown flags name the nearest ones, on the command line and in flagfiles.
expect_failure unknown_flag "error: unknown flag --model (did you mean --model_name" \
  "$T" --model=lenet
expect_failure misspelt_flag "error: unknown flag --lerning_rate (did you mean --learning_rate?)" \
  "$T" --lerning_rate=0.1
expect_failure eval_unknown_flag "unknown flag --checkpoint_dir (did you mean --checkpoint_path?)" \
  "$BIN/eval_image_classifier" --checkpoint_dir=/tmp/x
printf -- '--batch_size=8\n--modle_name=lenet\n' >"$TMP/typo.flags"
expect_failure flagfile_unknown_flag "unknown flag --modle_name in $TMP/typo.flags:2 (did you mean --model_name?)" \
  "$T" --flagfile="$TMP/typo.flags"
expect_failure bad_value "error: --batch_size: 'abc' is not a valid int32 value" \
  "$T" --batch_size=abc

# A missing or unreadable flagfile: one error line.
expect_failure missing_flagfile "error: --flagfile: cannot read '$TMP/none.flags' (No such file or directory)" \
  "$T" --flagfile="$TMP/none.flags"
expect_failure directory_flagfile "error: --flagfile: cannot read '$TMP' (Is a directory)" \
  "$BIN/eval_image_classifier" --flagfile="$TMP"
printf -- '--flagfile=%s\n' "$TMP/none.flags" >"$TMP/outer.flags"
expect_failure nested_missing_flagfile "cannot read '$TMP/none.flags' (No such file or directory), named in $TMP/outer.flags:1" \
  "$T" --flagfile="$TMP/outer.flags"

# Precedence with a real flagfile: --model_summary prints the net the flags
# pick without training. The flagfile says CifarNet at 32x32; the command
# line says LeNet at 28x28, before or after the flagfile: LeNet wins both ways.
cat >"$TMP/cifarnet.flags" <<'EOF'
# CifarNet settings
--dataset_name=mnist
--model_name=cifarnet
--train_image_size=32
--learning_rate=0.01
EOF
# summary <case> <args...>: NET = the first line of the net's summary.
summary() {
  local name="$1" rc=0
  shift
  "$T" --model_summary "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
  [[ $rc -eq 0 ]] || fail "$name: exit status $rc" "$TMP/$name.err"
  NET=$(head -1 "$TMP/$name.out")
}
summary alone --flagfile="$TMP/cifarnet.flags"
[[ "$NET" == "CifarNet at 32x32 "* ]] || fail "the flagfile's values are not used" "$TMP/alone.out"
grep -q 'overrides' "$TMP/alone.err" && fail "an override named where there is none" "$TMP/alone.err"
for order in before after; do
  if [[ $order == before ]]; then
    args=(--model_name=lenet --train_image_size=28 --learning_rate=0.05 --flagfile="$TMP/cifarnet.flags")
  else
    args=(--flagfile="$TMP/cifarnet.flags" --model_name=lenet --train_image_size=28 --learning_rate=0.05)
  fi
  summary "$order" "${args[@]}"
  [[ "$NET" == "LeNet at 28x28 "* ]] \
    || fail "command line $order the flagfile: got '$NET', not LeNet at 28x28" "$TMP/$order.err"
  lines=$(grep -c 'from the command line overrides' "$TMP/$order.err" || true)
  [[ $lines -eq 1 ]] || fail "expected one line naming the overrides, got $lines" "$TMP/$order.err"
  for o in "--model_name=lenet from the command line overrides cifarnet from $TMP/cifarnet.flags" \
      "--train_image_size=28 from the command line overrides 32 from $TMP/cifarnet.flags" \
      "--learning_rate=0.05 from the command line overrides 0.01 from $TMP/cifarnet.flags"; do
    grep -q -F -- "$o" "$TMP/$order.err" || fail "the override line lacks '$o'" "$TMP/$order.err"
  done
  echo "ok   command line $order the flagfile wins: $NET"
done

# Nested flagfiles: read in place; the outer file's later lines win over the
# nested file, the command line over both.
printf -- '--flagfile=%s\n--model_name=lenet\n--train_image_size=28\n' \
  "$TMP/cifarnet.flags" >"$TMP/lenet.flags"
summary nested --flagfile="$TMP/lenet.flags"
[[ "$NET" == "LeNet at 28x28 "* ]] || fail "nested flagfile" "$TMP/nested.out"
summary nested_cli --train_image_size=32 --model_name=cifarnet --flagfile="$TMP/lenet.flags"
[[ "$NET" == "CifarNet at 32x32 "* ]] || fail "command line over a nested flagfile" "$TMP/nested_cli.out"
grep -q -F -- "--model_name=cifarnet from the command line overrides lenet from $TMP/lenet.flags" \
  "$TMP/nested_cli.err" || fail "nested override not named" "$TMP/nested_cli.err"
echo "ok   nested flagfiles read in place, the command line over both"
