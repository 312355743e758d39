#!/usr/bin/env python3
"""The soak of issue 33: a long CPU training of CifarNet interrupted by SIGTERM
and resumed, beside the evaluation loop and an uninterrupted twin.

  python3 bench/soak/soak.py [BUILD_DIR]           # run the soak (bench/soak/run.sh)
  python3 bench/soak/soak.py --write-docs docs/soak.md
      regenerates the results part of docs/soak.md from bench/results/soak.csv
      and the sample files it names

For each clone count in CLONES (1, then 2: --num_clones=2 --clone_on_cpu at
half the batch per clone, the same global batch), three processes run at once
on CIFAR-like data (Fashion-MNIST written as cifar-10-binary.tar.gz by
scripts/fashion_mnist_to_cifar.py, converted by download_and_convert_data):
  interrupted  train_image_classifier to STEPS, sent SIGTERM every INTERVAL
               seconds (each wait drawn from INTERVAL x [1-JITTER, 1+JITTER]
               by Python's random seeded with SEED) and restarted at once on
               the same train_dir; every stop must exit 0 after saving, and
               every restart must resume from the step the stop saved
  reference    the same training (same flags and --seed), uninterrupted
  eval         eval_image_classifier's loop (--eval_interval_secs) on the
               interrupted run's train_dir; once training has ended it must
               evaluate the final step, then it is stopped by SIGTERM (exit 0)
Every SAMPLE_SECS the VmRSS and VmHWM (/proc/<pid>/status: the resident
set now and the most it has ever been, which the kernel keeps, so a peak
between two samples is not missed), open file descriptors (/proc/<pid>/fd)
and threads of each role are sampled, summed over the role's process tree
(a 2-clone trainer: the launcher and its clones), and appended to
WORK/soak-<N>clone/samples.csv as they are taken.
At the end:
  - the interrupted run's model.ckpt-STEPS.safetensors must equal the
    reference's byte for byte (the whole file: weights, optimizer slots,
    moving averages, global step, RNG state, input position); a difference
    is reported tensor by tensor
  - RSS growth after warm-up: for a process that lives the whole run
    (reference, eval loop) the largest RSS of the last quarter of its samples
    after WARMUP_SECS minus that of the first quarter; for the interrupted
    run (a fresh process each segment) the largest segment peak of the later
    half of its segments minus that of the earlier half. Each must be at most
    RSS_BOUND_MIB. File descriptors and threads: the same measures, bound 0.
  - Flatness, which sampling cannot blur: the peak growth (VmHWM at the
    last sample minus VmHWM at the first sample after warm-up; for the
    interrupted run, the later half of its segments' VmHWM against the
    earlier half) and the floor growth (the smallest RSS of the last quarter
    minus that of the first: what stays resident between steps). Each must
    be at most FLAT_BOUND_MIB.
Outputs: the samples (CSV) and summary (JSON) under bench/results/soak/,
one row per clone count appended to bench/results/soak.csv
(BENCH_RECORD=0: written under WORK only, the row printed), the run's logs
under WORK. Exit status 1 when a check fails.

Settings (environment):
  DURATION       seconds of interrupted training to aim for, per clone count
                 (7200); sets STEPS from a probe of the step time
  STEPS          the number of steps (overrides DURATION's estimate)
  INTERVAL       mean seconds between SIGTERMs (300); JITTER (0.5); SEED (33)
  CLONES         the clone counts to soak, in order ("1 2")
  THREADS        --num_intra_op_threads of every process (1)
  SAMPLE_SECS    (5); WARMUP_SECS (300: past the first summary and save,
                 at 120 s); RSS_BOUND_MIB (32); FLAT_BOUND_MIB (4)
  EVAL_INTERVAL  --eval_interval_secs (60); EVAL_BATCHES (20 of 100)
  TRAIN_FLAGS    extra flags of both trainers (after the recipe's)
  WORK           the working directory (a new one under /tmp); kept
  BENCH_RECORD, BENCH_RESULTS_DIR, BENCH_MACHINE, BENCH_COMMIT: as every
                 bench (bench/lib/results.py)
"""
import csv
import datetime
import json
import os
import random
import shlex
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import results  # noqa: E402  (bench/lib/results.py: machine, commit)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import compare_checkpoints as e2e_checkpoints  # noqa: E402  (their safetensors reader)

# The soak's recipe: TF-Slim's CifarNet flags (configs/cifarnet_cifar10.flags)
# with momentum, a decay every 2 epochs and moving averages, so that every
# part of the resume state (optimizer slots, the schedule's step, EMA
# shadows, the RNG for dropout, the input position) is exercised.
RECIPE = ["--optimizer=momentum", "--momentum=0.9", "--learning_rate=0.01",
          "--learning_rate_decay_factor=0.94", "--num_epochs_per_decay=2",
          "--moving_average_decay=0.9999", "--log_every_n_steps=10"]
GLOBAL_BATCH = 128
ROLES = ("interrupted", "reference", "eval")
SOAK_COLUMNS = [
    "date", "machine", "commit", "clones", "steps", "duration_s",
    "interruptions", "evaluations", "final_equal", "rss_bound_mib",
    "rss_growth_interrupted_mib", "rss_growth_reference_mib",
    "rss_growth_eval_mib", "rss_peak_mib", "fd_growth", "thread_growth",
    "result", "samples", "notes", "flat_bound_mib", "hwm_growth_interrupted_mib",
    "hwm_growth_reference_mib", "hwm_growth_eval_mib", "floor_growth_reference_mib",
    "floor_growth_eval_mib"]
SAMPLE_COLUMNS = ["t_s", "role", "segment", "phase", "age_s", "rss_kib", "hwm_kib", "fds",
                  "threads", "processes", "step"]
MIB = 1024.0


def env(name, default):
    value = os.environ.get(name, "")
    return type(default)(value) if value.strip() else default


class Config:
    def __init__(self, build):
        self.build = os.path.abspath(build)
        self.duration = env("DURATION", 7200.0)
        self.steps = env("STEPS", 0)
        self.interval = env("INTERVAL", 300.0)
        self.jitter = env("JITTER", 0.5)
        self.seed = env("SEED", 33)
        self.clones = [int(c) for c in env("CLONES", "1 2").split()]
        self.threads = env("THREADS", 1)
        self.sample_secs = env("SAMPLE_SECS", 5.0)
        self.warmup_secs = env("WARMUP_SECS", 300.0)
        self.rss_bound = env("RSS_BOUND_MIB", 32.0)
        self.flat_bound = env("FLAT_BOUND_MIB", 4.0)
        self.eval_interval = env("EVAL_INTERVAL", 60.0)
        self.eval_batches = env("EVAL_BATCHES", 20)
        self.train_flags = shlex.split(env("TRAIN_FLAGS", ""))
        self.record = os.environ.get("BENCH_RECORD", "1") != "0"
        self.work = os.environ.get("WORK") or tempfile.mkdtemp(prefix="slimtorch-soak-")
        os.makedirs(self.work, exist_ok=True)

    def tool(self, name):
        path = os.path.join(self.build, name)
        if not os.access(path, os.X_OK):
            sys.exit("soak: %s is not built (ninja -C %s %s)" % (path, self.build, name))
        return path


def log(message):
    sys.stdout.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), message))
    sys.stdout.flush()


# ------------------------------------------------------------------ data

def make_data(cfg):
    """Fashion-MNIST as CIFAR-10 under WORK/data (kept between runs)."""
    data = os.path.join(cfg.work, "data")
    if os.path.exists(os.path.join(data, "labels.txt")):
        return data
    archive = os.path.join(cfg.work, "archive")
    os.makedirs(archive, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "fashion_mnist_to_cifar.py"),
                    "--source_dir", "/usr/share/datasets/fashion-mnist",
                    "--output", os.path.join(archive, "cifar-10-binary.tar.gz")],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(cfg.work, "convert.log"), "w") as err:
        subprocess.run([cfg.tool("download_and_convert_data"), "--dataset_name=cifar10",
                        "--dataset_dir=" + data, "--source_url=file://%s/" % archive],
                       check=True, stderr=err)
    return data


def train_flags(cfg, data, clones):
    flags = ["--flagfile=" + os.path.join(ROOT, "configs", "cifarnet_cifar10.flags"),
             "--dataset_dir=" + data] + RECIPE
    flags += ["--batch_size=%d" % (GLOBAL_BATCH // clones), "--seed=%d" % cfg.seed,
              "--num_intra_op_threads=%d" % cfg.threads, "--num_preprocessing_threads=1"]
    if clones > 1:
        flags += ["--num_clones=%d" % clones, "--clone_on_cpu"]
    return flags + cfg.train_flags


def eval_flags(cfg, data, train_dir, eval_dir, train):
    flags = ["--checkpoint_path=" + train_dir, "--eval_dir=" + eval_dir,
             "--dataset_name=cifar10", "--dataset_dir=" + data, "--dataset_split_name=test",
             "--model_name=cifarnet", "--batch_size=100",
             "--max_num_batches=%d" % cfg.eval_batches,
             "--num_intra_op_threads=%d" % cfg.threads, "--num_preprocessing_threads=1",
             "--eval_interval_secs=%g" % cfg.eval_interval]
    # The evaluation reads the moving averages when training keeps them.
    flags += [f for f in train if f.startswith("--moving_average_decay=")][-1:]
    return flags


# ------------------------------------------------------------- processes

class Proc:
    """A tool run with its stdout and stderr in files."""

    def __init__(self, argv, out, err):
        self.out, self.err = out, err
        with open(out, "w") as o, open(err, "w") as e:
            self.popen = subprocess.Popen(argv, stdout=o, stderr=e)
        self.pid = self.popen.pid
        self.started = time.monotonic()

    def alive(self):
        return self.popen.poll() is None

    def stdout(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def stderr_tail(self, lines=20):
        with open(self.err, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def process_tree(pid):
    """pid and its descendants (/proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def measure(pid):
    """(rss KiB, open fds, threads, processes, hwm KiB) summed over pid's
    tree; None when the process is gone (or a zombie)."""
    rss = hwm = fds = threads = procs = 0
    for p in process_tree(pid):
        try:
            with open("/proc/%d/status" % p) as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            n_fds = len(os.listdir("/proc/%d/fd" % p))
        except OSError:
            continue
        if "VmRSS" not in status:  # a zombie: exited, not yet reaped
            continue
        rss += int(status.get("VmRSS", "0 kB").split()[0])
        hwm += int(status.get("VmHWM", "0 kB").split()[0])
        threads += int(status.get("Threads", "0").strip())
        fds += n_fds
        procs += 1
    return (rss, fds, threads, procs, hwm) if procs else None


class StepTail:
    """The latest "global step N:" of a growing log."""

    def __init__(self):
        self.path, self.offset, self.step = None, 0, None

    def follow(self, path):
        if path != self.path:
            self.path, self.offset = path, 0

    def read(self):
        """The steps logged since the last read (also kept: .step)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except (OSError, TypeError):
            return []
        data = data[:data.rfind(b"\n") + 1]
        self.offset += len(data)
        steps = []
        for line in data.decode(errors="replace").splitlines():
            i = line.find("global step ")
            if i >= 0 and ": loss" in line:
                steps.append(int(line[i + 12:line.index(":", i)]))
        self.step = steps[-1] if steps else self.step
        return steps


# ----------------------------------------------------------------- probe

def probe_steps(cfg, flags, clones):
    """STEPS for DURATION: two trainers at once (as in the soak) time steps
    10 to 60 of 70; each restart costs the start-up once more."""
    if cfg.steps > 0:
        return cfg.steps, None
    base = os.path.join(cfg.work, "probe-%dclone" % clones)
    subprocess.run(["rm", "-rf", base], check=True)  # a probe starts afresh
    procs, tails = [], []
    for name in "ab":
        argv = [cfg.tool("train_image_classifier"), "--train_dir=%s/%s" % (base, name),
                "--max_number_of_steps=70", "--save_interval_secs=100000"] + flags
        procs.append(Proc(argv, "%s.%s.out" % (base, name), "%s.%s.log" % (base, name)))
        tails.append(StepTail())
        tails[-1].follow(procs[-1].err)
    seen = [{} for _ in procs]  # step -> seconds since start
    running = True
    while running:
        running = any(p.alive() for p in procs)
        time.sleep(0.2)
        for p, tail, s in zip(procs, tails, seen):
            for step in tail.read():
                s[step] = time.monotonic() - p.started
    for p in procs:
        if p.popen.returncode != 0:
            sys.exit("soak: probe failed:\n" + p.stderr_tail())
    per_step = sum((s[60] - s[10]) / 50 for s in seen) / len(seen)
    startup = sum(s[10] - 10 * per_step for s in seen) / len(seen)
    restarts = cfg.duration / cfg.interval
    steps = max(100, int((cfg.duration - restarts * startup) / per_step) // 10 * 10)
    log("probe: %.3f s/step, start-up %.1f s: STEPS=%d for %.0f s" %
        (per_step, startup, steps, cfg.duration))
    return steps, {"secs_per_step": per_step, "startup_secs": startup}


# ------------------------------------------------------------------ soak

class SoakFailure(Exception):
    pass


def last_evaluated_step(text):
    """The global step of the last "Evaluated ... (global step N)" line."""
    i = text.rfind("(global step ")
    if i < 0:
        return None
    return int(text[i + 13:text.index(")", i)])


def final_line(text):
    """(global step, stopped by signal) from the trainer's result line."""
    for line in reversed(text.splitlines()):
        if line.startswith("global_step "):
            return int(line.split()[1]), "(stopped by signal)" in line
    return None, False


class Soak:
    """One soak: the interrupted run, its uninterrupted twin, the evaluation
    loop, sampled until all three have ended."""

    STOP_TIMEOUT = 300.0  # seconds a SIGTERMed trainer may take to save and exit

    def __init__(self, cfg, data, clones):
        self.cfg, self.data, self.clones = cfg, data, clones
        self.flags = train_flags(cfg, data, clones)
        self.dir = os.path.join(cfg.work, "soak-%dclone" % clones)
        self.rng = random.Random(cfg.seed)
        self.samples, self.segments, self.failures = [], [], []
        self.samples_file = None
        self.tail, self.ref_tail = StepTail(), StepTail()
        self.current = self.reference = self.evaluator = None
        self.finished_at = None
        self.evaluations = None
        self.eval_stopping = False

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def trainer(self, train_dir, name):
        argv = [self.cfg.tool("train_image_classifier"), "--train_dir=" + train_dir,
                "--max_number_of_steps=%d" % self.steps] + self.flags
        return Proc(argv, self.path(name + ".out"), self.path(name + ".log"))

    # -- the run

    def run(self):
        self.steps, self.probe = probe_steps(self.cfg, self.flags, self.clones)
        subprocess.run(["rm", "-rf", self.dir], check=True)
        os.makedirs(self.path("interrupted"))
        self.samples_file = open(self.path("samples.csv"), "w", newline="")
        self.samples_writer = csv.DictWriter(self.samples_file, SAMPLE_COLUMNS,
                                             lineterminator="\n")
        self.samples_writer.writeheader()
        self.t0 = time.monotonic()
        try:
            self.start()
            self.loop()
            self.stop_evaluator()
        except SoakFailure as e:
            self.failures.append(str(e))
            log("FAIL " + str(e))
            self.kill_all()
        self.samples_file.close()
        self.duration = (self.finished_at or time.monotonic()) - self.t0

    def start(self):
        self.reference = self.trainer(self.path("reference"), "reference")
        self.ref_tail.follow(self.reference.err)
        self.start_segment()
        argv = [self.cfg.tool("eval_image_classifier")] + eval_flags(
            self.cfg, self.data, self.path("interrupted"), self.path("eval"), self.flags)
        self.evaluator = Proc(argv, self.path("eval.out"), self.path("eval.log"))
        log("%d clone(s): %d steps; interrupted, reference and evaluation loop started in %s"
            % (self.clones, self.steps, self.dir))

    def start_segment(self):
        k = len(self.segments)
        proc = self.trainer(self.path("interrupted"), "interrupted.%03d" % k)
        self.tail.follow(proc.err)
        wait = self.rng.uniform(self.cfg.interval * (1 - self.cfg.jitter),
                                self.cfg.interval * (1 + self.cfg.jitter))
        self.segments.append({"index": k, "pid": proc.pid, "start_t": proc.started - self.t0,
                              "start_step": self.segments[-1]["end_step"] if k else 0,
                              "term_at": proc.started + wait, "term_sent": None})
        self.current = proc

    def loop(self):
        next_sample = time.monotonic()
        while self.current is not None or self.reference is not None:
            now = time.monotonic()
            if now >= next_sample:
                self.sample(now)
                next_sample += self.cfg.sample_secs
            if self.current is not None:
                self.watch_segment(now)
            if self.reference is not None and not self.reference.alive():
                self.check_reference()
            time.sleep(0.2)

    def watch_segment(self, now):
        seg = self.segments[-1]
        if not self.current.alive():
            self.end_segment(seg)
        elif seg["term_sent"] is None and now >= seg["term_at"]:
            self.current.popen.send_signal(signal.SIGTERM)
            seg["term_sent"] = now - self.t0
        elif seg["term_sent"] is not None and now - self.t0 - seg["term_sent"] > self.STOP_TIMEOUT:
            self.current.popen.kill()
            raise SoakFailure("segment %d: no exit %.0f s after SIGTERM" %
                              (seg["index"], self.STOP_TIMEOUT))

    def end_segment(self, seg):
        proc, rc = self.current, self.current.popen.returncode
        seg["end_t"] = time.monotonic() - self.t0
        seg["rc"] = rc
        step, stopped = final_line(proc.stdout())
        seg["end_step"] = step
        if rc != 0 or step is None:
            raise SoakFailure("segment %d exited with status %s:\n%s" %
                              (seg["index"], rc, proc.stderr_tail()))
        self.check_resumed(seg, proc)
        if step >= self.steps:
            self.finished_at = time.monotonic()
            self.current = None
            log("interrupted run: step %d reached after %d interruptions" %
                (step, self.interruptions()))
            return
        if seg["term_sent"] is None or not stopped:
            raise SoakFailure("segment %d ended at step %d without a stop" % (seg["index"], step))
        log("segment %d: SIGTERM at %.0f s, saved step %d, exit 0; restarting" %
            (seg["index"], seg["term_sent"], step))
        self.start_segment()

    def check_resumed(self, seg, proc):
        """A segment after one that saved must have resumed at that step."""
        k, before = seg["index"], seg["start_step"]
        if before == 0:
            return
        with open(proc.err, errors="replace") as f:
            text = f.read()
        want = "at global step %d" % before
        if "Resuming from" not in text or want not in text:
            raise SoakFailure("segment %d did not resume %s:\n%s" % (k, want, proc.stderr_tail()))

    def check_reference(self):
        rc = self.reference.popen.returncode
        step, _ = final_line(self.reference.stdout())
        if rc != 0 or step != self.steps:
            raise SoakFailure("reference run: status %s at step %s:\n%s" %
                              (rc, step, self.reference.stderr_tail()))
        log("reference run: step %d reached" % step)
        self.reference_done = time.monotonic() - self.t0
        self.sample(time.monotonic())
        self.reference = None

    def interruptions(self):
        return sum(1 for s in self.segments if s.get("term_sent") is not None
                   and s.get("end_step", 0) < self.steps)

    def stop_evaluator(self):
        """Waits (sampling) until the loop has evaluated the final step, then
        stops it with SIGTERM: it must exit 0."""
        wait = max(600.0, 3 * self.cfg.eval_interval)
        deadline = time.monotonic() + wait
        while last_evaluated_step(self.evaluator.stdout()) != self.steps:
            if not self.evaluator.alive() or time.monotonic() > deadline:
                raise SoakFailure("the evaluation loop did not evaluate step %d within %.0f s:\n%s"
                                  % (self.steps, wait, self.evaluator.stderr_tail()))
            self.sample(time.monotonic())
            time.sleep(min(self.cfg.sample_secs, 2.0))
        self.evaluator.popen.send_signal(signal.SIGTERM)
        self.eval_stopping = True
        rc = self.evaluator.popen.wait(timeout=self.STOP_TIMEOUT)
        out = self.evaluator.stdout()
        if rc != 0 or "(stopped by signal)" not in out:
            raise SoakFailure("the evaluation loop's SIGTERM: status %s:\n%s" %
                              (rc, self.evaluator.stderr_tail()))
        line = [l for l in out.splitlines() if l.startswith("Evaluation loop: ")][-1]
        self.evaluations = int(line.split()[2])
        log(line)

    def kill_all(self):
        for proc in (self.current, self.reference, self.evaluator):
            if proc is not None and proc.alive():
                for pid in reversed(process_tree(proc.pid)):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                proc.popen.wait()

    # -- samples

    def phase(self, role, step):
        """start (nothing done yet), work (training, or the evaluation loop
        once it has evaluated), stop (a SIGTERM sent, or the last step
        logged: saving and exiting)."""
        if role == "interrupted":
            seg = self.segments[-1]
            if seg["term_sent"] is not None or (step or 0) >= self.steps:
                return "stop"
            return "work" if step is not None and step > seg["start_step"] else "start"
        if role == "reference":
            return "start" if step is None else "stop" if step >= self.steps else "work"
        return "stop" if self.eval_stopping else "start" if step is None else "work"

    def sample(self, now):
        t = now - self.t0
        roles = (("interrupted", self.current, self.tail),
                 ("reference", self.reference, self.ref_tail),
                 ("eval", self.evaluator, None))
        for role, proc, tail in roles:
            if proc is None:
                continue
            m = measure(proc.pid)
            if m is None:
                continue
            if tail is not None:
                tail.read()
                step = tail.step
            else:
                step = last_evaluated_step(proc.stdout())
            self.samples.append({
                "t_s": round(t, 1), "role": role,
                "segment": len(self.segments) - 1 if role == "interrupted" else 0,
                "phase": self.phase(role, step), "age_s": round(now - proc.started, 1),
                "rss_kib": m[0], "hwm_kib": m[4], "fds": m[1], "threads": m[2],
                "processes": m[3], "step": "" if step is None else step})
            self.samples_writer.writerow(self.samples[-1])
            self.samples_file.flush()


# -------------------------------------------------------------- analysis

def read_safetensors(path):
    """{name: (dtype, bytes)} and the metadata of a safetensors checkpoint."""
    header, body = e2e_checkpoints.read(path)
    tensors = {name: (info["dtype"], body[info["data_offsets"][0]:info["data_offsets"][1]])
               for name, info in header.items() if name != "__metadata__"}
    return tensors, header.get("__metadata__", {})


def compare_checkpoints(a, b):
    """Whole-file equality and, tensor by tensor, the names that differ
    (with the largest |a - b| of a float32 one)."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        equal = fa.read() == fb.read()
    ta, ma = read_safetensors(a)
    tb, mb = read_safetensors(b)
    differ = []
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            differ.append({"name": name, "why": "only in one file"})
        elif ta[name] != tb[name]:
            entry = {"name": name, "dtype": ta[name][0]}
            if ta[name][0] == "F32" and len(ta[name][1]) == len(tb[name][1]):
                n = len(ta[name][1]) // 4
                va = struct.unpack("<%df" % n, ta[name][1])
                vb = struct.unpack("<%df" % n, tb[name][1])
                entry["max_abs_diff"] = max(abs(x - y) for x, y in zip(va, vb))
            differ.append(entry)
    return {"file_equal": equal, "tensors": len(ta), "tensors_differing": differ,
            "metadata_equal": ma == mb}


def quarter_growth(values, pick):
    """pick(last quarter) - pick(first quarter); None below 8 values."""
    if len(values) < 8:
        return None
    q = len(values) // 4
    return pick(values[-q:]) - pick(values[:q])


def slope_per_hour(points):
    n = len(points)
    if n < 2:
        return None
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return None if var == 0 else 3600 * sum((t - mt) * (v - mv) for t, v in points) / var


def long_lived(samples, warmup):
    """Growth after warm-up (WARMUP_SECS from its start, and at work: a step
    logged, an evaluation done; not yet stopping) of a process that lives
    the whole run: RSS peaks (max) of the last quarter against the first;
    fds and threads by their floor (min), which a leak raises and a
    transient open does not."""
    post = [s for s in samples if s["age_s"] >= warmup and s["phase"] == "work"]
    rss = [s["rss_kib"] / MIB for s in post]
    growth = quarter_growth(rss, max)
    hwm = [s["hwm_kib"] / MIB for s in post if s.get("hwm_kib")]
    return {
        "hwm_growth_mib": hwm[-1] - hwm[0] if len(hwm) >= 2 else None,
        "hwm_first_mib": hwm[0] if hwm else None,
        "hwm_last_mib": hwm[-1] if hwm else None,
        "floor_growth_mib": quarter_growth(rss, min),
        "samples_after_warmup": len(post),
        "rss_first_mib": rss[0] if rss else None,
        "rss_last_mib": rss[-1] if rss else None,
        "rss_peak_mib": max(rss) if rss else None,
        "rss_growth_mib": growth,
        "rss_slope_mib_per_h": slope_per_hour([(s["t_s"], s["rss_kib"] / MIB) for s in post]),
        "fd_growth": quarter_growth([s["fds"] for s in post], min),
        "fd_range": [min(s["fds"] for s in post), max(s["fds"] for s in post)] if post else None,
        "thread_growth": quarter_growth([s["threads"] for s in post], min),
    }


def half_growth(values):
    """max(later half) - max(earlier half); None below 2 values."""
    if len(values) < 2:
        return None
    h = len(values) // 2
    return max(values[h:]) - max(values[:h])


def segmented(samples):
    """The interrupted run, a fresh process each segment: per segment its
    RSS peak (start-up, training, the save on SIGTERM) and its fd / thread
    floor while it trains; growth = the later half of the segments against
    the earlier half."""
    per = {}
    for s in samples:
        per.setdefault(s["segment"], []).append(s)
    segs = []
    for k in sorted(per):
        ss = per[k]
        work = [s for s in ss if s["phase"] == "work"]
        segs.append({"segment": k, "samples": len(ss),
                     "rss_peak_mib": max(s["rss_kib"] for s in ss) / MIB,
                     "hwm_mib": max(s.get("hwm_kib") or 0 for s in ss) / MIB,
                     "fd_floor": min(s["fds"] for s in work) if work else None,
                     "thread_floor": min(s["threads"] for s in work) if work else None})
    peaks = [s["rss_peak_mib"] for s in segs]
    floors = lambda key: [s[key] for s in segs if s[key] is not None]
    return {
        "segments": segs,
        "rss_peak_mib": max(peaks) if peaks else None,
        "rss_growth_mib": half_growth(peaks),
        "hwm_growth_mib": half_growth([s["hwm_mib"] for s in segs]),
        "floor_growth_mib": None,
        "fd_growth": half_growth(floors("fd_floor")),
        "thread_growth": half_growth(floors("thread_floor")),
    }


def analyse(soak):
    cfg = soak.cfg
    by_role = {r: [s for s in soak.samples if s["role"] == r] for r in ROLES}
    roles = {"interrupted": segmented(by_role["interrupted"]),
             "reference": long_lived(by_role["reference"], cfg.warmup_secs),
             "eval": long_lived(by_role["eval"], cfg.warmup_secs)}
    checks = list(soak.failures)
    for role, a in roles.items():
        g = a["rss_growth_mib"]
        if g is not None and g > cfg.rss_bound:
            checks.append("%s: RSS grew %.1f MiB after warm-up (bound %.0f)" % (role, g, cfg.rss_bound))
        for what, label in (("hwm", "peak (VmHWM)"), ("floor", "floor")):
            g = a[what + "_growth_mib"]
            if g is not None and g > cfg.flat_bound:
                checks.append("%s: RSS %s grew %.1f MiB after warm-up (bound %g)" %
                              (role, label, g, cfg.flat_bound))
        for what in ("fd", "thread"):
            g = a[what + "_growth"]
            if g is not None and g > 0:
                checks.append("%s: %ss grew by %d" % (role, what, g))
    compare = None
    if not soak.failures:
        name = "model.ckpt-%d.safetensors" % soak.steps
        compare = compare_checkpoints(soak.path("interrupted", name), soak.path("reference", name))
        if not compare["file_equal"]:
            names = ", ".join(d["name"] for d in compare["tensors_differing"])
            checks.append("final checkpoints differ: %s" % (names or "metadata"))
    return roles, compare, checks


# --------------------------------------------------------------- outputs

def fmt(value, digits=1):
    return "" if value is None else ("%.*f" % (digits, value) if isinstance(value, float) else str(value))


def write_outputs(soak, roles, compare, checks):
    cfg = soak.cfg
    stamp = datetime.datetime.now(datetime.timezone.utc)
    name = "%s_%dclone" % (stamp.strftime("%Y-%m-%dT%H%M%SZ"), soak.clones)
    out_dir = os.path.join(results.results_dir(), "soak") if cfg.record else soak.dir
    os.makedirs(out_dir, exist_ok=True)
    samples_path = os.path.join(out_dir, name + "_samples.csv")
    with open(samples_path, "w", newline="") as f:
        w = csv.DictWriter(f, SAMPLE_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(soak.samples)
    result = "PASS" if not checks else "FAIL"
    summary = {
        "date": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": results.machine("soak"),
        "commit": results.commit(), "clones": soak.clones, "steps": soak.steps,
        "duration_s": soak.duration, "interruptions": soak.interruptions(),
        "evaluations": soak.evaluations, "probe": soak.probe,
        "settings": {"interval_s": cfg.interval, "jitter": cfg.jitter, "seed": cfg.seed,
                     "threads": cfg.threads, "sample_secs": cfg.sample_secs,
                     "warmup_secs": cfg.warmup_secs, "rss_bound_mib": cfg.rss_bound,
                     "flat_bound_mib": cfg.flat_bound,
                     "eval_interval_s": cfg.eval_interval, "train_flags": soak.flags},
        "segments": soak.segments, "compare": compare, "roles": roles,
        "result": result, "failures": checks}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    growth = [roles[r]["fd_growth"] for r in ROLES if roles[r]["fd_growth"] is not None]
    threads = [roles[r]["thread_growth"] for r in ROLES if roles[r]["thread_growth"] is not None]
    peak = max(roles[r]["rss_peak_mib"] or 0 for r in ROLES)
    row = {
        "date": summary["date"], "machine": summary["machine"], "commit": summary["commit"],
        "clones": soak.clones, "steps": soak.steps, "duration_s": "%.0f" % soak.duration,
        "interruptions": soak.interruptions(), "evaluations": fmt(soak.evaluations),
        "final_equal": "" if compare is None else ("yes" if compare["file_equal"] else "no"),
        "rss_bound_mib": "%g" % cfg.rss_bound,
        "rss_growth_interrupted_mib": fmt(roles["interrupted"]["rss_growth_mib"]),
        "rss_growth_reference_mib": fmt(roles["reference"]["rss_growth_mib"]),
        "rss_growth_eval_mib": fmt(roles["eval"]["rss_growth_mib"]),
        "rss_peak_mib": "%.0f" % peak, "fd_growth": fmt(max(growth) if growth else None),
        "thread_growth": fmt(max(threads) if threads else None), "result": result,
        # Relative to the checkout that holds the results (BENCH_RESULTS_DIR
        # may be another checkout's bench/results).
        "samples": os.path.relpath(samples_path, os.path.abspath(os.path.join(
            os.path.dirname(samples_path), "..", "..", ".."))) if cfg.record else "",
        "notes": notes(soak), "flat_bound_mib": "%g" % cfg.flat_bound,
        "hwm_growth_interrupted_mib": fmt(roles["interrupted"]["hwm_growth_mib"]),
        "hwm_growth_reference_mib": fmt(roles["reference"]["hwm_growth_mib"]),
        "hwm_growth_eval_mib": fmt(roles["eval"]["hwm_growth_mib"]),
        "floor_growth_reference_mib": fmt(roles["reference"]["floor_growth_mib"]),
        "floor_growth_eval_mib": fmt(roles["eval"]["floor_growth_mib"])}
    append_row(row, cfg.record)
    for c in checks:
        log("check failed: " + c)
    log("%d clone(s): %s; summary %s" % (soak.clones, result, os.path.join(out_dir, name + ".json")))
    return result == "PASS"


def notes(soak):
    cfg = soak.cfg
    return ("CifarNet, batch %d global, %d thread(s) per process; SIGTERM every %g s +-%d%% (seed %d); "
            "eval every %g s on %d test images; samples every %g s, warm-up %g s"
            % (GLOBAL_BATCH, cfg.threads, cfg.interval, round(100 * cfg.jitter), cfg.seed,
               cfg.eval_interval, 100 * cfg.eval_batches, cfg.sample_secs, cfg.warmup_secs))


def append_row(row, record):
    path = os.path.join(results.results_dir(), "soak.csv")
    if not record:
        log("soak.csv (not written, BENCH_RECORD=0): %s" % row)
        return
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        with open(path, newline="") as f:
            old = list(csv.DictReader(f))
        if old and list(old[0].keys()) != SOAK_COLUMNS:
            # Rows of an older column set: rewritten with every column
            # (those they lack left empty).
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, SOAK_COLUMNS, lineterminator="\n")
                w.writeheader()
                w.writerows({k: r.get(k) or "" for k in SOAK_COLUMNS} for r in old)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, SOAK_COLUMNS, lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow(row)


# ------------------------------------------------------------------ docs

BEGIN, END = "<!-- soak:begin -->", "<!-- soak:end -->"


def docs_tables(results_dir):
    path = os.path.join(results_dir, "soak.csv")
    if not os.path.exists(path):
        return ["No soak has been recorded yet."]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = ["| date | commit | clones | steps | duration | SIGTERMs | evaluations | final weights "
           "| RSS growth: interrupted / reference / eval (bound) "
           "| VmHWM growth: interrupted / reference / eval; floor growth: reference / eval (bound) "
           "| peak RSS | fd, thread growth | result |",
           "|---|---|---:|---:|---:|---:|---:|---|---|---|---:|---|---|"]
    for r in rows:
        equal = {"yes": "byte-equal", "no": "**differ**"}.get(r["final_equal"], "not compared")
        growth = " / ".join(r[k] or "–" for k in ("rss_growth_interrupted_mib",
                                                   "rss_growth_reference_mib",
                                                   "rss_growth_eval_mib"))
        if r.get("flat_bound_mib"):
            flat = "%s; %s MiB (%s)" % (
                " / ".join(r[k] or "–" for k in ("hwm_growth_interrupted_mib",
                                                  "hwm_growth_reference_mib",
                                                  "hwm_growth_eval_mib")),
                " / ".join(r[k] or "–" for k in ("floor_growth_reference_mib",
                                                  "floor_growth_eval_mib")),
                r["flat_bound_mib"])
        else:
            flat = "not sampled"
        out.append("| %s | %s | %s | %s | %.1f min | %s | %s | %s | %s MiB (%s) | %s | %s MiB "
                   "| %s, %s | %s |" % (
            r["date"][:10], r["commit"], r["clones"], r["steps"], float(r["duration_s"]) / 60,
            r["interruptions"], r["evaluations"] or "–", equal, growth, r["rss_bound_mib"], flat,
            r["rss_peak_mib"], r["fd_growth"] or "–", r["thread_growth"] or "–", r["result"]))
    out.append("")
    out.append("Machine of every row: " + "; ".join(sorted({r["machine"] for r in rows})) + ".")
    # Per clone count, the longest run with its samples, and the newest
    # when it is another run (rows are in date order).
    longest, newest = {}, {}
    for r in rows:
        if r["samples"] and os.path.exists(os.path.join(ROOT, r["samples"])):
            best = longest.get(r["clones"])
            if best is None or float(r["duration_s"]) >= float(best["duration_s"]):
                longest[r["clones"]] = r
            newest[r["clones"]] = r
    for clones in sorted(longest):
        shown = [longest[clones]]
        if newest[clones] is not longest[clones]:
            shown.append(newest[clones])
        for r in shown:
            out += [""] + rss_over_time(r)
    return out


def rss_over_time(row):
    """RSS (MiB) of each role in tenths of the run, from the row's samples:
    the smallest sample at work and the largest sample of each tenth and,
    where sampled, the VmHWM at its end."""
    with open(os.path.join(ROOT, row["samples"]), newline="") as f:
        samples = list(csv.DictReader(f))
    end = max(float(s["t_s"]) for s in samples)
    hwm = any(s.get("hwm_kib") for s in samples)
    head = "| until | interrupted: step, segment |" + "".join(
        " %s RSS |" % name for name in ("interrupted", "reference", "eval loop"))
    if hwm:
        head += " reference VmHWM |"
    out = ["RSS over time, %s clone(s), %s (`%s`), smallest sample at work – largest sample of each tenth:"
           % (row["clones"], row["date"][:10], row["samples"]),
           "", head, "|---:|---|---:|---:|---:|" + ("---:|" if hwm else "")]
    mib = lambda s, key: int(s[key]) / MIB
    for tenth in range(1, 11):
        lo, hi = end * (tenth - 1) / 10, end * tenth / 10
        window = [s for s in samples if lo < float(s["t_s"]) <= hi or (tenth == 1 and
                                                                       float(s["t_s"]) == 0)]
        cells = []
        for role in ROLES:
            mine = [s for s in window if s["role"] == role]
            work = [s for s in mine if s["phase"] == "work"] or mine
            cells.append("%.0f–%.0f MiB" % (min(mib(s, "rss_kib") for s in work),
                                             max(mib(s, "rss_kib") for s in mine))
                         if mine else "–")
        it = [s for s in window if s["role"] == "interrupted"]
        line = "| %.1f min | %s | %s |" % (
            hi / 60, "%s, %s" % (it[-1]["step"], it[-1]["segment"]) if it else "–",
            " | ".join(cells))
        if hwm:
            ref = [s for s in window if s["role"] == "reference" and s.get("hwm_kib")]
            line += " %s |" % ("%.0f MiB" % mib(ref[-1], "hwm_kib") if ref else "–")
        out.append(line)
    return out


def write_docs(path):
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit("soak: %s lacks the lines %s and %s" % (path, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = ["<!-- generated by bench/soak/soak.py --write-docs from bench/results/soak.csv; "
            "rerun it, do not edit -->", ""] + docs_tables(results.results_dir())
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + "\n".join(body) + "\n" + END + tail)


# ------------------------------------------------------------------ main

def main(argv):
    if argv[:1] == ["--write-docs"] and len(argv) == 2:
        write_docs(argv[1])
        return 0
    if len(argv) > 1 or argv[:1] in (["-h"], ["--help"]):
        sys.exit(__doc__)
    cfg = Config(argv[0] if argv else os.path.join(ROOT, "build"))
    log("soak: work directory %s" % cfg.work)
    data = make_data(cfg)
    ok = True
    for clones in cfg.clones:
        soak = Soak(cfg, data, clones)
        soak.run()
        ok = write_outputs(soak, *analyse(soak)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
