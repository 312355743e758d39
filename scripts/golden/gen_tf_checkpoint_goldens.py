#!/usr/bin/env python3
"""TensorFlow-written checkpoints for tests/io/tf_checkpoint_golden_test.cc.

Writes, with TensorFlow's own tf.compat.v1.train.Saver (graph mode):
  tests/golden/tf_checkpoints/formats.tar.gz: v2/ and v1/ (Saver V2 / V1,
    global_step 7) of variables of every dtype slimtorch reads, a string
    variable (to be skipped) and a variable partitioned in 3 ([7, 4] ->
    3 + 2 + 2 rows), each directory with its `checkpoint` file;
  tests/golden/tf_checkpoints/inception_v1_v1.tar.gz: tf_slim's inception_v1
    (10 classes) as a V1 checkpoint, every variable filled with a periodic
    low-entropy pattern (so that gzip makes it small);
  tests/golden/tf_checkpoint_goldens.inc: what the tests expect: TF's
    inception_v1 logits (inference mode) for a batch of 2 images given by
    x[n, h, w, c] = ((n * 131 + h * 31 + w * 17 + c * 7) % 23) / 11 - 1.

Regenerate from the repository root (needs tensorflow-cpu, tf-slim and
tf_keras; CI never runs it):
  python3 scripts/golden/gen_tf_checkpoint_goldens.py
"""

import gzip
import io
import os
import sys
import tarfile
import tempfile
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from gen_net_goldens import NETS, slim, tf  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "golden", "tf_checkpoints")


def tar_dir(src, path):
  """A deterministic .tar.gz of every file under `src` (sorted, mtime 0)."""
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w") as t:
    for root, _, files in sorted(os.walk(src)):
      for f in sorted(files):
        full = os.path.join(root, f)
        info = t.gettarinfo(full, os.path.relpath(full, src))
        info.mtime = info.uid = info.gid = 0
        info.uname = info.gname = ""
        with open(full, "rb") as fh:
          t.addfile(info, fh)
  with open(path, "wb") as out:
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as g:
      g.write(buf.getvalue())
  print("wrote", path, os.path.getsize(path), "bytes")


def save_both(sess, variables, root):
  """V2 and V1; TensorFlow's V1 writer cannot save bfloat16."""
  for name, version in (("v2", tf.train.SaverDef.V2),
                        ("v1", tf.train.SaverDef.V1)):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    saved = variables if name == "v2" else [
        v for v in variables if v.dtype.base_dtype != tf.bfloat16]
    tf.train.Saver(saved, write_version=version).save(
        sess, os.path.join(root, name, "model.ckpt"), global_step=7,
        write_meta_graph=False)


def formats():
  with tf.Graph().as_default(), tf.Session() as sess, \
      tempfile.TemporaryDirectory() as tmp:
    v = []
    def var(name, value, dtype):
      v.append(tf.get_variable(name, initializer=np.array(value, dtype=dtype)))
    var("scope/weights", np.arange(72).reshape(3, 3, 2, 4) / 8, np.float32)
    var("scope/biases", [1.5, -2.0, 0.0, 1e-30], np.float32)
    var("f64", [[1.0, -2.5, 3e300], [0.0, -0.0, 1e-300]], np.float64)
    var("i32", [-1, 0, 2147483647, -2147483648, 5], np.int32)
    var("i64", [1 << 40, -(1 << 50)], np.int64)
    var("u8", [0, 1, 254, 255], np.uint8)
    var("i8", [-128, -1, 0, 127], np.int8)
    var("i16", [-32768, 7, 32767], np.int16)
    var("b", [True, False, True], np.bool_)
    var("h", [0.5, -1.25, 65504.0], np.float16)
    v.append(tf.get_variable("bf", initializer=tf.constant(
        [0.5, -1.25, 3.0], dtype=tf.bfloat16)))
    var("scalar", 3.25, np.float32)
    var("empty", np.zeros((0, 3)), np.float32)
    v.append(tf.get_variable("s", initializer=tf.constant([b"ab", b""])))
    part = tf.get_variable("part", shape=[7, 4], dtype=tf.float32,
                           partitioner=tf.fixed_size_partitioner(3))
    v.append(tf.train.get_or_create_global_step())
    sess.run(tf.global_variables_initializer())
    full = np.arange(28, dtype=np.float32).reshape(7, 4) * 0.5
    row = 0
    for p in part:
      n = int(p.shape[0])
      sess.run(p.assign(full[row:row + n]))
      row += n
    sess.run(tf.assign(v[-1], 7))
    save_both(sess, v + list(part), tmp)
    tar_dir(tmp, os.path.join(OUT, "formats.tar.gz"))


def periodic(shape, name, kind):
  n = int(np.prod(shape)) if shape else 1
  h = zlib.crc32(name.encode()) % 61
  base = ((np.arange(n) * 7 + h) % 61 - 30) / 64.0  # [-0.47, 0.47]
  if kind == "positive":
    values = 0.5 + np.abs(base)
  elif kind == "small":
    values = base / 8
  else:
    fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    values = base * 2.0 ** np.floor(np.log2(np.sqrt(6.0 / fan_in)))
  return values.reshape(shape).astype(np.float32)


def kind_of(name):
  if name.endswith(("gamma", "moving_variance")):
    return "positive"
  if name.endswith(("biases", "beta", "moving_mean")):
    return "small"
  return "weights"


def images(n, size):
  idx = np.indices((n, size, size, 3))
  return ((idx[0] * 131 + idx[1] * 31 + idx[2] * 17 + idx[3] * 7) % 23
          / 11.0 - 1.0).astype(np.float32)


def inception_v1():
  fn, scope_fn, size, _ = NETS["inception_v1"]
  with tf.Graph().as_default(), tf.Session() as sess, \
      tempfile.TemporaryDirectory() as tmp:
    x = tf.constant(images(2, size))
    with slim.arg_scope(scope_fn()):
      logits, _ = fn(x, num_classes=10, is_training=False)
    variables = slim.get_model_variables()
    step = tf.train.get_or_create_global_step()
    sess.run(tf.global_variables_initializer())
    for v in variables:
      name = v.op.name
      sess.run(v.assign(periodic(v.shape.as_list(), name, kind_of(name))))
    sess.run(tf.assign(step, 7))
    out = sess.run(logits)
    os.makedirs(os.path.join(tmp, "v1"))
    tf.train.Saver(variables + [step], write_version=tf.train.SaverDef.V1).save(
        sess, os.path.join(tmp, "v1", "inception_v1.ckpt"),
        write_meta_graph=False)
    os.remove(os.path.join(tmp, "v1", "checkpoint"))
    tar_dir(os.path.join(tmp, "v1"), os.path.join(OUT, "inception_v1_v1.tar.gz"))
  return out, size, len(variables)


def main():
  os.makedirs(OUT, exist_ok=True)
  formats()
  logits, size, nvars = inception_v1()
  lines = [
      "// TensorFlow %s's answers for tests/golden/tf_checkpoints/*.tar.gz." %
      tf.__version__,
      "// Generated by scripts/golden/gen_tf_checkpoint_goldens.py; do not edit.",
      "// Included by tests/io/tf_checkpoint_golden_test.cc.",
      "",
      "constexpr int kInceptionV1ImageSize = %d;" % size,
      "constexpr int kInceptionV1Variables = %d;" % nvars,
      "// Logits [2, 10] of tf_slim's inception_v1 (inference mode).",
      "const float kInceptionV1Logits[] = {",
  ]
  flat = logits.reshape(-1)
  for i in range(0, flat.size, 5):
    lines.append("    " + ", ".join("%.9gf" % v for v in flat[i:i + 5]) + ",")
  lines.append("};")
  path = os.path.join(REPO, "tests", "golden", "tf_checkpoint_goldens.inc")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print("wrote", path)


if __name__ == "__main__":
  main()
