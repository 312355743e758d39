#!/usr/bin/env python3
# Reads an event file written by slimtorch's EventWriter with TensorFlow's
# tf.compat.v1.train.summary_iterator and TensorBoard's EventAccumulator, and
# checks what the EventWriterTest WritesFileForPythonCheck test writes
# (into <build>/golden_out/events/): file_version "brain.Event:2" first, then
# scalars "loss" = 1.5 / (step + 1) and "eval/accuracy" = 0.25 * step for
# steps 0, 10, 20; histogram "weights" of float32(k / 50 - 1), k < 101, at step 20
# equal to the HistogramProto TensorFlow's own summary op makes of those values.
#
# Run (from the repository root, after ./build/tests/slimtorch_tests):
#   /opt/tfenv/bin/python scripts/golden/check_events.py build/golden_out/events
import glob
import os
import sys

import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

logdir = sys.argv[1]
files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
assert len(files) == 1, files
path = files[0]
print("file:", os.path.basename(path))

expected = {}
for step in (0, 10, 20):
  expected[("loss", step)] = np.float32(1.5 / (step + 1))
  expected[("eval/accuracy", step)] = np.float32(0.25 * step)

ok = True
events = list(tf.compat.v1.train.summary_iterator(path))
print("summary_iterator: first event file_version =", repr(events[0].file_version),
      "wall_time =", events[0].wall_time)
ok &= events[0].file_version == "brain.Event:2" and events[0].wall_time > 1.5e9
seen = {}
histos = {}
for e in events[1:]:
  for v in e.summary.value:
    if v.HasField("histo"):
      histos[(v.tag, e.step)] = v.histo
      continue
    seen[(v.tag, e.step)] = np.float32(v.simple_value)
    print(f"  step {e.step:3d} {v.tag:14s} {v.simple_value!r}")
ok &= seen == expected

acc = event_accumulator.EventAccumulator(path)
acc.Reload()
tags = sorted(acc.Tags()["scalars"])
print("EventAccumulator scalar tags:", tags)
for tag in tags:
  for s in acc.Scalars(tag):
    ok &= expected.get((tag, s.step)) == np.float32(s.value)
ok &= tags == ["eval/accuracy", "loss"]

# The histogram: TensorFlow's summary op on the same values, field for field.
with tf.Graph().as_default():
  values = (np.arange(101, dtype=np.float64) / 50 - 1).astype(np.float32)
  op = tf.compat.v1.summary.histogram("weights", tf.constant(values))
  with tf.compat.v1.Session() as sess:
    want = tf.compat.v1.Summary.FromString(sess.run(op)).value[0].histo
got = histos.get(("weights", 20))
print("histogram weights: buckets", None if got is None else len(got.bucket),
      "TensorFlow's", len(want.bucket))
ok &= got is not None and got == want
hist = acc.Histograms("weights")
ok &= len(hist) == 1 and hist[0].step == 20 and hist[0].histogram_value.num == 101

print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
