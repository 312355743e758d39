#!/usr/bin/env python3
"""Issue 34's demonstration: a net trained on Fashion-MNIST (the real data
the project ships with) with TF-Slim's recipe and with the modern recipe, at
the same number of epochs, over several seeds; every run reported.

  python3 bench/recipes/fashion_mnist_recipes.py [BUILD_DIR]
  python3 bench/recipes/fashion_mnist_recipes.py --write-docs docs/training_recipes.md

Recipes (both: the net's TF-Slim preprocessing, inception's, at SIZE; batch
BATCH; momentum 0.9; TF-Slim's weight decay 4e-5; the same LR):
  tfslim   TF-Slim's defaults otherwise: exponential decay x0.94 every 2
           epochs, no label smoothing, no moving averages
  modern   1 epoch of linear warm-up from LR / 10, then cosine to 0; label
           smoothing 0.1; TrivialAugmentWide; random erasing 0.25; Mixup 0.2
           and CutMix 1.0 (half each); moving averages 0.9995 with timm's
           warm-up, evaluated with them
  modern-noaug  the modern recipe without its augmentation (no
           TrivialAugment, erasing, Mixup or CutMix): warm-up and cosine,
           label smoothing, moving averages; an ablation
Each (recipe, seed) trains EPOCHS epochs of the 60 000 training images and is
evaluated on the 10 000 test images (top-1, recall@5). JOBS runs at once,
THREADS intra-op threads each.

Settings (environment): NET (mobilenet_v3_small_minimalistic), SIZE (28),
EPOCHS (10), BATCH (64), LR (0.05), SEEDS ("0 1 2"), RECIPES ("tfslim
modern"), JOBS (2), THREADS (1), WORK (/tmp/slimtorch-recipes; a finished
run there is not rerun), DATA ($WORK/data), STEPS (overrides the steps,
for a smoke run; the schedules keep EPOCHS), BENCH_RECORD=0 (print, write
nothing). Rows go to bench/results/recipes.csv:
  date,machine,commit,net,recipe,epochs,seed,top1,recall5,train_secs,notes
"""
import csv
import datetime
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import results  # noqa: E402  (machine, commit)

CSV = os.path.join(ROOT, "bench", "results", "recipes.csv")
COLUMNS = ["date", "machine", "commit", "net", "recipe", "epochs", "seed",
           "top1", "recall5", "train_secs", "notes"]
TRAIN_EXAMPLES = 60000


def env(name, default):
    return os.environ.get(name, default)


def recipe_flags(recipe, epochs, lr):
    if recipe == "tfslim":
        return ["--learning_rate_decay_type=exponential",
                "--learning_rate_decay_factor=0.94", "--num_epochs_per_decay=2"]
    if recipe not in ("modern", "modern-noaug"):
        sys.exit("unknown recipe %r (tfslim, modern, modern-noaug)" % recipe)
    flags = ["--learning_rate_decay_type=cosine", "--end_learning_rate=0",
             "--warmup_epochs=1", "--warmup_learning_rate=%g" % (lr / 10),
             "--num_epochs_per_decay=%g" % (epochs - 1), "--label_smoothing=0.1",
             "--moving_average_decay=0.9995", "--moving_average_warmup=timm"]
    if recipe == "modern":
        flags += ["--auto_augment=trivialaugment_wide", "--random_erase=0.25",
                  "--mixup_alpha=0.2", "--cutmix_alpha=1.0"]
    return flags


class Run:
    def __init__(self, cfg, recipe, seed):
        self.cfg, self.recipe, self.seed = cfg, recipe, seed
        self.dir = os.path.join(cfg["work"], "%s-%s-seed%d" % (cfg["net"], recipe, seed))

    def tool(self, name):
        return os.path.join(self.cfg["build"], name)

    def common(self):
        c = self.cfg
        return ["--dataset_name=fashion_mnist", "--dataset_dir=" + c["data"],
                "--model_name=" + c["net"], "--num_intra_op_threads=%d" % c["threads"]]

    def train(self):
        c = self.cfg
        steps = c["steps"] or c["epochs"] * TRAIN_EXAMPLES // c["batch"]
        argv = [self.tool("train_image_classifier")] + self.common() + [
            "--train_dir=" + os.path.join(self.dir, "train"),
            "--train_image_size=%d" % c["size"], "--batch_size=%d" % c["batch"],
            "--max_number_of_steps=%d" % steps, "--seed=%d" % self.seed,
            "--optimizer=momentum", "--momentum=0.9", "--learning_rate=%g" % c["lr"],
            "--weight_decay=0.00004", "--log_every_n_steps=500",
            "--save_summaries_secs=0", "--save_interval_secs=1800", "--progress=off",
        ] + recipe_flags(self.recipe, c["epochs"], c["lr"])
        return self.step("train", argv)

    def evaluate(self):
        argv = [self.tool("eval_image_classifier")] + self.common() + [
            "--checkpoint_path=" + os.path.join(self.dir, "train"),
            "--eval_dir=" + os.path.join(self.dir, "eval"),
            "--dataset_split_name=test", "--eval_image_size=%d" % self.cfg["size"],
            "--batch_size=100"]
        if self.recipe != "tfslim":
            argv.append("--moving_average_decay=0.9995")
        self.step("eval", argv)
        with open(os.path.join(self.dir, "eval.out")) as f:
            out = f.read()
        top1 = float(re.search(r"eval/Accuracy\[([0-9.]+)\]", out).group(1))
        recall5 = float(re.search(r"eval/Recall_5\[([0-9.]+)\]", out).group(1))
        return 100 * top1, 100 * recall5

    def step(self, name, argv):
        """Runs argv once (its wall time kept in NAME.time); the time."""
        done = os.path.join(self.dir, name + ".time")
        if os.path.exists(done):
            with open(done) as f:
                return float(f.read())
        os.makedirs(self.dir, exist_ok=True)
        start = time.monotonic()
        with open(os.path.join(self.dir, name + ".out"), "w") as o, \
                open(os.path.join(self.dir, name + ".log"), "w") as e:
            rc = subprocess.call(argv, stdout=o, stderr=e)
        if rc != 0:
            with open(os.path.join(self.dir, name + ".log")) as e:
                tail = e.read()[-2000:]
            raise RuntimeError("%s failed (%d): %s\n%s" % (name, rc, " ".join(argv), tail))
        secs = time.monotonic() - start
        with open(done, "w") as f:
            f.write("%.1f" % secs)
        return secs

    def __call__(self):
        secs = self.train()
        top1, recall5 = self.evaluate()
        return self.recipe, self.seed, top1, recall5, secs


def convert(cfg):
    if os.path.exists(os.path.join(cfg["data"], "labels.txt")):
        return
    subprocess.check_call([os.path.join(cfg["build"], "download_and_convert_data"),
                           "--dataset_name=fashion_mnist", "--dataset_dir=" + cfg["data"],
                           "--source_url=file:///usr/share/datasets/fashion-mnist/"])


def main(build):
    work = env("WORK", "/tmp/slimtorch-recipes")
    cfg = dict(build=os.path.abspath(build), work=work, data=env("DATA", os.path.join(work, "data")),
               net=env("NET", "mobilenet_v3_small_minimalistic"), size=int(env("SIZE", "28")),
               epochs=int(env("EPOCHS", "10")), batch=int(env("BATCH", "64")),
               lr=float(env("LR", "0.05")), threads=int(env("THREADS", "1")),
               steps=int(env("STEPS", "0")))
    seeds = [int(s) for s in env("SEEDS", "0 1 2").split()]
    recipes = env("RECIPES", "tfslim modern").split()
    convert(cfg)
    runs = [Run(cfg, r, s) for s in seeds for r in recipes]
    machine, commit = results.cpu_machine(), results.commit()
    notes = ("%s %dx%d, inception preprocessing, batch %d, momentum 0.9 lr %g, "
             "%d thread(s) x %s runs at once" %
             (cfg["net"], cfg["size"], cfg["size"], cfg["batch"], cfg["lr"],
              cfg["threads"], env("JOBS", "2")))
    with ThreadPoolExecutor(int(env("JOBS", "2"))) as pool:
        for recipe, seed, top1, recall5, secs in pool.map(lambda r: r(), runs):
            row = [datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), machine,
                   commit, cfg["net"], recipe, cfg["epochs"], seed, "%.2f" % top1,
                   "%.2f" % recall5, "%.0f" % secs, notes]
            print(",".join(str(x) for x in row), flush=True)
            if env("BENCH_RECORD", "1") != "0":
                new = not os.path.exists(CSV)
                with open(CSV, "a", newline="") as f:
                    w = csv.writer(f)
                    if new:
                        w.writerow(COLUMNS)
                    w.writerow(row)


BEGIN, END = "<!-- recipes:begin -->", "<!-- recipes:end -->"


def write_docs(path):
    """The table of the newest rows for each (net, recipe, epochs, seed)
    between the markers of `path`."""
    with open(CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    newest = {}
    for r in rows:
        newest[(r["net"], r["epochs"], r["recipe"], r["seed"])] = r
    groups = {}
    for (net, epochs, recipe, seed), r in sorted(newest.items()):
        groups.setdefault((net, epochs, recipe), []).append(r)
    lines = [BEGIN, "",
             "| net, epochs | recipe | top-1 by seed (%) | top-1 mean ± sd | recall@5 mean | train time / run |",
             "|---|---|---|---|---|---|"]
    for (net, epochs, recipe), rs in sorted(groups.items()):
        top1 = [float(r["top1"]) for r in rs]
        sd = statistics.stdev(top1) if len(top1) > 1 else 0.0
        lines.append("| %s, %s | %s | %s | %.2f ± %.2f | %.2f | %.0f s |" % (
            net, epochs, recipe,
            ", ".join("%s: %s" % (r["seed"], r["top1"]) for r in rs),
            statistics.mean(top1), sd,
            statistics.mean(float(r["recall5"]) for r in rs),
            statistics.mean(float(r["train_secs"]) for r in rs)))
    machine = sorted({r["machine"] for r in newest.values()})
    dates = sorted({r["date"][:10] for r in newest.values()})
    lines += ["", "Machine: %s; %s; notes: %s." % (", ".join(machine), ", ".join(dates),
                                                   rs[-1]["notes"]), "", END]
    with open(path) as f:
        text = f.read()
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + "\n".join(lines) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-docs":
        write_docs(sys.argv[2])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
