#!/usr/bin/env python3
"""Appends one row to bench/results/<topic>.csv (the benchmarks' results as
data; docs/performance.md). Used by bench/lib/results.sh's bench_record and
importable from a Python bench (`from results import record`).

  python3 bench/lib/results.py TOPIC MEASURE OURS PEER UNIT PEER_NAME [NOTES]
  python3 bench/lib/results.py merge FILE.csv...
      appends the rows of CSVs written elsewhere (e.g. on a GPU machine, with
      BENCH_RESULTS_DIR there) to the topic CSV of the same name, skipping
      rows it already holds

Columns: date,machine,commit,measure,ours,peer,ratio,unit,peer_name,notes
  date     UTC, ISO 8601 (2026-11-27T10:15:00Z)
  machine  the CPU's model name and cores (/proc/cpuinfo), or for a GPU topic
           (train_gpu, or BENCH_DEVICE=gpu) the GPU's name (nvidia-smi)
  commit   git rev-parse --short HEAD, "+dirty" when tracked files (other
           than bench/results/) differ
  ours, peer the two sides' figures in UNIT ("" or "-": not measured; a row
           without ours is not written)
  ratio    > 1 means slimtorch is better: ours / peer for rates (images/s),
           peer / ours for times and sizes (ms, s, MB ...: lower is better)

Environment: BENCH_RESULTS_DIR (bench/results), BENCH_MACHINE (overrides the
machine), BENCH_COMMIT (overrides the commit, for a copy without .git), BENCH_DEVICE (cpu|gpu), BENCH_BETTER (higher|lower, overrides the
unit's direction), BENCH_RECORD=0 (print the row to stderr, write nothing).
"""
import csv
import datetime
import io
import os
import re
import subprocess
import sys

COLUMNS = ["date", "machine", "commit", "measure", "ours", "peer", "ratio",
           "unit", "peer_name", "notes"]
TOPICS = ["train_cpu", "train_gpu", "input", "checkpoint", "export", "deploy"]
# Units where less is better; every other unit (images/s, steps/s, x) is a rate.
LOWER_IS_BETTER = {"ns", "us", "ms", "s", "min", "ms/step", "s/step", "ms/batch",
                   "B", "KB", "MB", "GB", "KiB", "MiB", "GiB", "%"}

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit():
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    head = _run(["git", "rev-parse", "--short", "HEAD"])
    if not head:
        return "unknown"
    # The results files themselves do not count: the run's own first row
    # would make its second "dirty".
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                  ".", ":(exclude)bench/results"])
    return head + ("+dirty" if dirty else "")


def cpu_machine():
    model, cores = "", 0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key == "processor":
                    cores += 1
    except OSError:
        pass
    cores = cores or os.cpu_count() or 0
    model = re.sub(r"\s+", " ", model or "unknown CPU")
    return "%s, %d cores" % (model, cores)


def gpu_machine():
    names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    names = [n.strip() for n in names.splitlines() if n.strip()]
    if not names:
        return ""
    return names[0] + (" x%d" % len(names) if len(names) > 1 else "")


def machine(topic):
    if os.environ.get("BENCH_MACHINE"):
        return os.environ["BENCH_MACHINE"]
    device = os.environ.get("BENCH_DEVICE") or ("gpu" if topic == "train_gpu" else "cpu")
    return (device == "gpu" and gpu_machine()) or cpu_machine()


def _number(text):
    text = ("" if text is None else str(text)).strip()
    if text in ("", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def ratio(ours, peer, unit):
    """ours vs peer, > 1 when ours is better; "" when either is missing."""
    o, p = _number(ours), _number(peer)
    if o is None or p is None or o == 0 or p == 0:
        return ""
    better = os.environ.get("BENCH_BETTER") or (
        "lower" if unit in LOWER_IS_BETTER else "higher")
    return "%.2f" % (p / o if better == "lower" else o / p)


def row(topic, measure, ours, peer, unit, peer_name, notes=""):
    clean = lambda v: "" if v is None or str(v).strip() == "-" else str(v).strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(topic),
        "commit": commit(),
        "measure": measure,
        "ours": clean(ours),
        "peer": clean(peer),
        "ratio": ratio(ours, peer, unit),
        "unit": unit,
        "peer_name": peer_name,
        "notes": notes,
    }


def append(topic, values, directory=None):
    """Appends the dict `values` (COLUMNS) to TOPIC's CSV in `directory`
    (default results_dir()), writing the header first when the file is new."""
    if topic not in TOPICS:
        raise SystemExit("results.py: unknown topic %r (one of %s)" % (topic, ", ".join(TOPICS)))
    text = io.StringIO()
    csv.DictWriter(text, COLUMNS, lineterminator="\n").writerow(values)
    if os.environ.get("BENCH_RECORD", "1") == "0":
        sys.stderr.write("%s.csv (not written, BENCH_RECORD=0): %s" % (topic, text.getvalue()))
        return
    directory = directory or results_dir()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, topic + ".csv")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a") as f:
        if new:
            f.write(",".join(COLUMNS) + "\n")
        f.write(text.getvalue())


def results_dir():
    return os.environ.get("BENCH_RESULTS_DIR") or os.path.join(ROOT, "bench", "results")


def merge(paths):
    for path in paths:
        topic = os.path.basename(path)[:-len(".csv")]
        target = os.path.join(os.path.join(ROOT, "bench", "results"), topic + ".csv")
        have = set()
        if os.path.exists(target):
            with open(target, newline="") as f:
                have = {tuple(r[c] for c in COLUMNS) for r in csv.DictReader(f)}
        added = 0
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                key = tuple(r.get(c, "") for c in COLUMNS)
                if key not in have:
                    append(topic, dict(zip(COLUMNS, key)), os.path.dirname(target))
                    have.add(key)
                    added += 1
        print("%s: %d row(s) added to %s" % (path, added, target))


def record(topic, measure, ours, peer, unit, peer_name, notes=""):
    """Appends a row; a row without our figure (a failed run) is skipped."""
    if _number(ours) is None:
        sys.stderr.write("results.py: %s: no figure of ours (%r), no row written\n" % (measure, ours))
        return
    append(topic, row(topic, measure, ours, peer, unit, peer_name, notes))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["merge"] and len(args) > 1:
        merge(args[1:])
        sys.exit(0)
    if len(args) not in (6, 7):
        sys.exit(__doc__)
    record(*args)
