# Sourced by the bench scripts: bench_record appends one row to
# bench/results/<topic>.csv through bench/lib/results.py (columns, the
# ratio's direction and the environment knobs are described there and in
# docs/performance.md).
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib/results.sh"
#   bench_record TOPIC MEASURE OURS PEER UNIT PEER_NAME [NOTES]
#
# OURS or PEER "-" or "": not measured (the ratio is left empty).
# ratio > 1 means slimtorch is better (ours/peer for rates, peer/ours for
# times). BENCH_RECORD=0 prints the row instead of writing it.
BENCH_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_record() {
  python3 "$BENCH_LIB/results.py" "$@"
}
