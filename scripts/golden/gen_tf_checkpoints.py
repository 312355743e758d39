#!/usr/bin/env python3
"""TensorFlow checkpoints written by TensorFlow, and what TensorFlow reads back.

Every file here is written by TensorFlow's own tf.compat.v1.train.Saver in
graph mode, so that slimtorch's checkpoint reader is tested on TensorFlow's
bytes, not on bytes our own writer made.

Checked-in outputs (regenerate from the repository root, needs
/opt/tfenv/bin/python with tensorflow, tf_slim and tf_keras; CI never runs
it):
  python3 scripts/golden/gen_tf_checkpoints.py

  tests/golden/tf_checkpoints/saver_formats.tar.gz, five directories:
    v2/               Saver V2, save(sess, "<dir>/model.ckpt", global_step=7):
                      model.ckpt-7.index, model.ckpt-7.data-00000-of-00001;
    v1/               Saver V1, the same variables: the single file
                      model.ckpt-7; bf (bfloat16) is left out: TensorFlow's
                      V1 writer cannot save it ("Data type not supported").
                      h (float16) IS written, but TensorFlow's own reader
                      cannot read it back; its values below are decoded from
                      the TensorProto TensorFlow wrote (half_val);
    v2_sharded/       Saver(sharded=True) V2 with the variables placed on two
                      logical CPUs (device_count {'CPU': 2}): two data files,
                      .data-00000-of-00002 and .data-00001-of-00002;
    v2_partitioned/,
    v1_partitioned/   scope/part, float32 [7, 4] partitioned by
                      fixed_size_partitioner(3) (rows 3 + 2 + 2; TensorFlow
                      stores three slices of the full name) and other,
                      float32 [3];
    each with its `checkpoint` file (no .meta: write_meta_graph=False).
    Variables of v2/, v1/, v2_sharded/ (names with slashes, every dtype):
    scope/weights f32 [3,3,2,4], scope/biases f32 [4] (-0, FLT_MAX, the
    smallest subnormal), f64 [2,3], i32 [5], i64 [2,2] (beyond 2^32, INT64
    extremes), u8 [6], i8 [4], i16 [3], b bool [5], h f16 [3], bf bf16 [3],
    scalar f32 [], empty f32 [0,3], s string [2], global_step int64 [] = 7.
    Their `checkpoint` files hold TensorFlow's absolute paths under
    WORK (below), which does not exist when the tests run.
  tests/golden/tf_checkpoints/lenet_v1.tar.gz (lenet, V1, 10 classes,
    28x28x1), cifarnet_v2.tar.gz (cifarnet, V2, 10 classes, 32x32x3),
    mobilenet_v1_025_v2.tar.gz (mobilenet_v1_025, V2, 10 classes, 96x96x3,
    with ExponentialMovingAverage(0.9999) shadows of every model variable,
    as train_image_classifier's --moving_average_decay makes them, and
    MomentumOptimizer slots <var>/Momentum of every trainable one): one
    directory <archive stem>/ holding model.ckpt-<step> and `checkpoint`
    (relative paths: save_relative_paths=True). lenet and cifarnet are
    TF-Slim's nets/lenet.py and nets/cifarnet.py as gen_lenet_goldens.py and
    gen_cifarnet_goldens.py define them; tf_slim 1.1's nets package has no
    mobilenet_v1, so mobilenet_v1 below is TF-Slim's nets/mobilenet_v1.py
    written out with tf_slim layers (same scopes, SAME padding, relu6,
    batch norm epsilon 0.001, AvgPool_1a reduced to 3x3 at 96 pixels).
    Every variable holds a low-entropy periodic pattern over TensorFlow's
    flat (row-major, TF layout) index i, so that gzip shrinks it:
      base(i) = ((i * STEP + crc32(name) % PERIOD) % PERIOD - 510) / 1024
    (PERIOD 1021, STEP 389, crc32 = zlib's of the variable's name), and
      gamma, moving_variance:        0.5 + |base|           (in [0.5, 1))
      biases, beta, moving_mean:     base / 8
      <var>/Momentum slots:          base / 64
      weights (rank >= 2):           base * s, s = the power of two at or
          below sqrt(48 / fan_in), fan_in = all dims but the last (a
          depthwise kernel: kh * kw): |w| < s / 2, and s / 2 lies in
          (sqrt(3 / fan_in), sqrt(12 / fan_in)], so that activations keep
          their size through mobilenet's 27 layers (with the bound
          sqrt(24 / fan_in) of He's uniform init, its two images gave the
          same logits to 1e-7)
      <var>/ExponentialMovingAverage: value(var) * 0.75 + 1/64
    all exact in float32 (computed in float64, then rounded, which is
    exact). global_step holds the step.
  tests/golden/tf_saver_checkpoint_goldens.inc: for every directory above,
    its prefix, format, `checkpoint` path, every key TensorFlow's reader
    lists (tf.train.list_variables order: name, DataType enum, shape), the
    raw table keys (formats only), every value (formats) or the element
    count, float64 sum and sum of |.| and first 8 values (nets), and the
    nets' logits in inference mode (and mobilenet's with the shadows
    substituted) for a batch of 2 images given by gen_lenet_goldens.py's
    fill with stream 0, scale 1 (see the .inc for the C++ expression).
    The .inc's comment holds the struct definitions it expects.

Test-time mode (writes nothing into the repository):
  python3 scripts/golden/gen_tf_checkpoints.py --all-nets OUT_DIR \
      [--slim-dir DIR] [net ...]
writes, for every net of gen_net_goldens.py's NETS and lenet, cifarnet,
mobilenet_v1 / _075 / _050 / _025 (or the ones named) at its default image size and
class count, variables filled as gen_net_logits_goldens.py does
(logits_golden_writer.fill_for / value over tf.global_variables() order):
  OUT_DIR/<net>/v2/model.ckpt-1000.{index,data-00000-of-00001}, checkpoint
  OUT_DIR/<net>/v1/model.ckpt-1000, checkpoint
  OUT_DIR/<net>/logits.txt   batch-2 logits (inference mode), "%.9g" a line
  OUT_DIR/<net>/fills.txt    "name stream scale positive d0xd1x..." a line
  OUT_DIR/manifest.txt       "net image_size num_classes channels" a line
and, with the research/slim nets (gen_net_goldens.SLIM_NETS: MobileNet v3 /
EdgeTPU, NASNet, PNASNet, I3D, S3D-G, from the copy at --slim-dir, default
$TFSLIM_DIR else /work/tfslim/research/slim; left out with a note when that
copy is missing and no net is named), the same files, but:
  * the checkpoint is written from the training graph, built as
    train_image_classifier builds it (the global step first, then the net
    with is_training=True), so that it holds what a TF-Slim training run
    saves: NASNet's / PNASNet's aux heads included (their drop-path finds
    the global step instead of making one in their first cell);
  * the logits come from the inference graph with the same values;
  * at the sizes of gen_net_logits_goldens.py's list (nasnet_large and
    pnasnet_large at 96: their aux heads need a 5x5 map; i3d 16 frames of
    112x112, s3dg 8 frames of 96x96), and their manifest lines add the
    frame count: "net image_size num_classes channels frames" (0: images).
"""

import functools
import gzip
import io
import math
import os
import shutil
import struct
import sys
import tarfile
import time
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Plain Eigen kernels, so that regenerating gives the same bits on any CPU.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

# The net table and the tf_keras workaround for slim.batch_norm; this also
# puts TensorFlow in graph mode (tf is tensorflow.compat.v1).
from gen_net_goldens import (NETS, SLIM_NETS, default_slim_dir,  # noqa: E402
                             net_entry, slim, tf)
from gen_lenet_goldens import c_double, c_float, lenet, lenet_arg_scope  # noqa: E402
from gen_cifarnet_goldens import cifarnet, cifarnet_arg_scope  # noqa: E402
from logits_golden_writer import fill_for, value  # noqa: E402
from tensorflow.core.protobuf import tensor_bundle_pb2  # noqa: E402
from tensorflow.core.util import saved_tensor_slice_pb2  # noqa: E402

tf.get_logger().setLevel("ERROR")  # V1's deprecation banner

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "python3 scripts/golden/gen_tf_checkpoints.py"
OUT = os.path.join(REPO, "tests", "golden", "tf_checkpoints")
FORMATS_ARCHIVE = "saver_formats.tar.gz"
INC = os.path.join(REPO, "tests", "golden", "tf_saver_checkpoint_goldens.inc")
# TensorFlow writes absolute paths into `checkpoint`: a fixed directory keeps
# the archives identical from run to run.
WORK = "/tmp/slimtorch_gen_tf_checkpoints"

BATCH = 2
PERIOD = 1021
STEP = 389
FIRST = 8  # values recorded per net tensor

DTYPE_NAMES = {1: "DT_FLOAT", 2: "DT_DOUBLE", 3: "DT_INT32", 4: "DT_UINT8",
               5: "DT_INT16", 6: "DT_INT8", 7: "DT_STRING", 9: "DT_INT64",
               10: "DT_BOOL", 14: "DT_BFLOAT16", 19: "DT_HALF"}


# ---- Checkpoint directories, tarballs ---------------------------------------
def fresh(path):
  if os.path.exists(path):
    shutil.rmtree(path)
  os.makedirs(path)
  return path


def save(sess, var_list, directory, version, step, sharded=False,
         relative=False):
  """Saver.save into `directory`/model.ckpt-`step`; returns the prefix."""
  os.makedirs(directory, exist_ok=True)
  saver = tf.train.Saver(
      var_list, sharded=sharded, save_relative_paths=relative,
      write_version=(tf.train.SaverDef.V1 if version == 1
                     else tf.train.SaverDef.V2))
  return saver.save(sess, os.path.join(directory, "model.ckpt"),
                    global_step=step, write_meta_graph=False)


def tar_dirs(root, names, path):
  """A deterministic .tar.gz of every file under root/<name> for `names`
  (sorted members, mtime 0, uid/gid 0, no owner names, gzip mtime 0)."""
  files = []
  for name in names:
    for base, _, fs in os.walk(os.path.join(root, name)):
      files += [os.path.relpath(os.path.join(base, f), root) for f in fs]
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
    for rel in sorted(files):
      with open(os.path.join(root, rel), "rb") as fh:
        data = fh.read()
      info = tarfile.TarInfo(rel)
      info.size = len(data)
      info.mode = 0o644
      info.mtime = info.uid = info.gid = 0
      info.uname = info.gname = ""
      t.addfile(info, io.BytesIO(data))
  with open(path, "wb") as out:
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="",
                       compresslevel=9) as g:
      g.write(buf.getvalue())
  print("wrote %s: %d bytes (%d uncompressed)" % (
      os.path.relpath(path, REPO), os.path.getsize(path), len(buf.getvalue())))


def checkpoint_path(directory):
  """model_checkpoint_path of `directory`/checkpoint, verbatim."""
  with open(os.path.join(directory, "checkpoint")) as f:
    for line in f:
      if line.startswith("model_checkpoint_path:"):
        return line.split(":", 1)[1].strip().strip('"')
  raise ValueError("no model_checkpoint_path in " + directory)


# ---- Reading the table (LevelDB SSTable) ourselves, for the report ---------
def _varint(b, p):
  r = s = 0
  while True:
    c = b[p]
    p += 1
    r |= (c & 0x7F) << s
    s += 7
    if c < 0x80:
      return r, p


def _block(b, offset, size):
  data, kind = b[offset:offset + size], b[offset + size]
  if kind != 0:
    return [], kind  # snappy: TensorFlow 2.21 never writes it (checked)
  n = struct.unpack("<I", data[-4:])[0]
  end, p, key, out = len(data) - 4 - 4 * n, 0, b"", []
  while p < end:
    shared, p = _varint(data, p)
    unshared, p = _varint(data, p)
    size, p = _varint(data, p)
    key = key[:shared] + data[p:p + unshared]
    p += unshared
    out.append((key, data[p:p + size]))
    p += size
  return out, kind


def read_table(path):
  """(entries [(key, value)], compression type bytes, data blocks)."""
  with open(path, "rb") as f:
    b = f.read()
  footer = b[-48:]
  assert footer[-8:] == bytes.fromhex("57fb808b247547db"), path
  p = 0
  for _ in range(2):  # the meta-index handle
    _, p = _varint(footer, p)
  offset, p = _varint(footer, p)
  size, p = _varint(footer, p)
  index, kind = _block(b, offset, size)
  kinds, entries = {kind}, []
  for _, handle in index:
    offset, q = _varint(handle, 0)
    size, q = _varint(handle, q)
    got, kind = _block(b, offset, size)
    kinds.add(kind)
    entries += got
  return entries, kinds, len(index)


def table_file(prefix, version):
  return prefix + ".index" if version == 2 else prefix


def inspect_table(prefix, version, verbose=True):
  """Prints what TensorFlow put where (each entry, or with verbose False
  a count of each kind of note); returns (the raw keys, block types)."""
  entries, kinds, blocks = read_table(table_file(prefix, version))
  notes = []
  if version == 2:
    for key, val in entries:
      if key == b"":
        h = tensor_bundle_pb2.BundleHeaderProto.FromString(val)
        notes.append("header: num_shards %d, version %d" % (
            h.num_shards, h.version.producer))
      else:
        e = tensor_bundle_pb2.BundleEntryProto.FromString(val)
        notes.append("%r: shard %d offset %d size %d slices %d" % (
            key, e.shard_id, e.offset, e.size, len(e.slices)))
  else:
    for key, val in entries:
      m = saved_tensor_slice_pb2.SavedTensorSlices.FromString(val)
      if key == b"":
        notes.append("meta: %d tensors %s" % (
            len(m.meta.tensor),
            [(t.name, len(t.slice)) for t in m.meta.tensor]))
      else:
        fields = [f.name for f, _ in m.data.data.ListFields()
                  if f.name not in ("dtype", "tensor_shape")]
        notes.append("%r: %s" % (key, ",".join(fields)))
  print("  %s: %d data blocks, block types %s" % (
      os.path.basename(table_file(prefix, version)), blocks, sorted(kinds)))
  if verbose:
    for n in notes:
      print("    " + n)
  else:
    counts = {}
    for n in notes:
      kind = n.split(": ", 1)[1] if version == 1 else "entry"
      kind = "meta" if n.startswith(("meta", "header")) else kind
      counts[kind] = counts.get(kind, 0) + 1
    print("    entries by kind: %s" % counts)
  return [k for k, _ in entries], kinds


def v1_tensor(prefix, name):
  """A V1 tensor assembled from the SavedSlices TensorFlow wrote. Their
  TensorProtos carry neither dtype nor shape (the meta has them); values sit
  in the typed repeated field (half_val: the float16 bits)."""
  entries, _, _ = read_table(prefix)
  meta = saved_tensor_slice_pb2.SavedTensorSlices.FromString(
      dict(entries)[b""]).meta
  info = next(t for t in meta.tensor if t.name == name)
  shape = [d.size for d in info.shape.dim]
  dtype = tf.as_dtype(info.type)
  out = np.zeros(shape, dtype.as_numpy_dtype)
  field = {tf.float32: "float_val", tf.float64: "double_val",
           tf.int64: "int64_val", tf.bool: "bool_val", tf.half: "half_val",
           tf.string: "string_val"}.get(dtype, "int_val")
  for key, val in entries:
    s = saved_tensor_slice_pb2.SavedTensorSlices.FromString(val).data
    if key == b"" or s.name != name:
      continue
    values = np.array(getattr(s.data, field))
    if dtype == tf.half:
      values = values.astype(np.uint16).view(np.float16)
    index = tuple(slice(e.start, e.start + e.length) if e.HasField("length")
                  else slice(None) for e in s.slice.extent) or ...
    out[index] = values.astype(out.dtype).reshape(out[index].shape)
  return out


def restore_full(prefix, name, dtype, shape):
  """`name` as Saver.restore reads it: RestoreV2 of the whole extent (for
  a tensor saved in slices, TensorFlow's BundleReader::LookupSlice or
  TensorSliceReader assembles them)."""
  spec = "%s %s" % (" ".join(str(d) for d in shape),
                    ":".join("0,%d" % d for d in shape))
  with tf.Graph().as_default(), tf.Session() as sess:
    return sess.run(tf.raw_ops.RestoreV2(
        prefix=prefix, tensor_names=[name], shape_and_slices=[spec],
        dtypes=[dtype]))[0]


def describe(prefix, version):
  """[(name, dtype enum, shape, values)] as TensorFlow's reader lists and
  reads them, and {name: why} for those its reader (tf.train.load_checkpoint
  + get_tensor) cannot read: a partitioned tensor then comes from
  RestoreV2 of its full extent, a V1 float16 from our own decoding of the
  TensorProtos TensorFlow wrote."""
  reader = tf.train.load_checkpoint(prefix)
  dtypes = reader.get_variable_to_dtype_map()
  out, unreadable = [], {}
  for name, shape in tf.train.list_variables(prefix):
    try:
      values = reader.get_tensor(name)
    except Exception as e:  # noqa: BLE001
      why = str(e).strip().splitlines()[-1] if str(e).strip() else type(
          e).__name__
      if "Sliced" in why:
        values = restore_full(prefix, name, dtypes[name], shape)
        why += "; values from RestoreV2 of the full extent"
      else:
        assert version == 1, (name, why)
        values = v1_tensor(prefix, name)
        why = (why or "Data type not supported") + \
            "; values decoded from the TensorProto"
      unreadable[name] = why
      print("    TensorFlow's reader cannot read %s: %s" % (name, why))
    values = np.asarray(values)
    assert list(values.shape) == list(shape), (name, values.shape, shape)
    out.append((name, dtypes[name].as_datatype_enum, list(shape), values))
  return out, unreadable


# ---- Formats -----------------------------------------------------------------
def format_values():
  """name -> (numpy value or (tf dtype, list)), in creation order."""
  f32 = np.float32
  weights = ((np.arange(72) * 29 % 72 - 35.5) / 16).astype(f32)
  return [
      ("scope/weights", weights.reshape(3, 3, 2, 4)),
      ("scope/biases", np.array([1.5, -0.0, np.finfo(f32).max,
                                 np.float32(2.0**-149)], f32)),
      ("f64", np.array([[1.0, -2.5, 3e300], [1e-300, -0.0, math.pi]])),
      ("i32", np.array([-1, 0, 2147483647, -2147483648, 123456789],
                       np.int32)),
      ("i64", np.array([[(1 << 40) + 1, -(1 << 50) - 3],
                        [(1 << 63) - 1, -(1 << 63)]], np.int64)),
      ("u8", np.array([0, 1, 127, 128, 254, 255], np.uint8)),
      ("i8", np.array([-128, -1, 0, 127], np.int8)),
      ("i16", np.array([-32768, -2, 32767], np.int16)),
      ("b", np.array([True, False, False, True, True])),
      ("h", np.array([-1.25, 65504.0, 2.0**-24], np.float16)),
      ("bf", (tf.bfloat16, [0.5, -1.25, 2.0**100])),
      ("scalar", np.array(3.25, f32)),
      ("empty", np.zeros((0, 3), f32)),
      ("s", (tf.string, [b"hello/world", b""])),
  ]


def make_format_variables(devices=None):
  """The variables of v2/, v1/, v2_sharded/ (device i % len(devices))."""
  variables = []
  for i, (name, init) in enumerate(format_values() + [("global_step", None)]):
    with tf.device(devices[i % len(devices)] if devices else None):
      if name == "global_step":
        variables.append(tf.train.get_or_create_global_step())
      elif isinstance(init, tuple):
        variables.append(tf.get_variable(
            name, initializer=tf.constant(init[1], dtype=init[0])))
      else:
        variables.append(tf.get_variable(name, initializer=init))
  return variables


def write_formats(root):
  """The five directories of the formats archive; returns their goldens."""
  dirs = []
  with tf.Graph().as_default(), tf.Session() as sess:
    variables = make_format_variables()
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(variables[-1], 7))
    save(sess, variables, os.path.join(root, "v2"), 2, 7)
    v1 = [v for v in variables if v.dtype.base_dtype != tf.bfloat16]
    save(sess, v1, os.path.join(root, "v1"), 1, 7)
  dirs += [("v2", 2), ("v1", 1)]

  with tf.Graph().as_default():
    variables = make_format_variables(["/cpu:0", "/cpu:1"])
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Session(config=config) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.assign(variables[-1], 7))
      save(sess, variables, os.path.join(root, "v2_sharded"), 2, 7,
           sharded=True)
  files = sorted(os.listdir(os.path.join(root, "v2_sharded")))
  print("v2_sharded: TensorFlow wrote", files)
  assert "model.ckpt-7.data-00000-of-00002" in files, files
  assert "model.ckpt-7.data-00001-of-00002" in files, files
  dirs.append(("v2_sharded", 2))

  with tf.Graph().as_default(), tf.Session() as sess:
    part = tf.get_variable("scope/part", shape=[7, 4], dtype=tf.float32,
                           partitioner=tf.fixed_size_partitioner(3))
    tf.get_variable("other", initializer=np.array([0.25, -8.0, 1e-3],
                                                  np.float32))
    sess.run(tf.global_variables_initializer())
    full = ((np.arange(28) * 11 % 28 - 13.5) / 4).astype(np.float32)
    full = full.reshape(7, 4)
    row = 0
    for p in part:
      n = int(p.shape[0])
      p.load(full[row:row + n], sess)
      row += n
    print("partitioned:", [(v.op.name, v.shape.as_list())
                           for v in tf.global_variables()])
    for version in (2, 1):
      save(sess, None, os.path.join(root, "v%d_partitioned" % version),
           version, 7)
      got = restore_full(os.path.join(
          root, "v%d_partitioned" % version, "model.ckpt-7"), "scope/part",
                         tf.float32, [7, 4])
      assert np.array_equal(got, full)
  dirs += [("v2_partitioned", 2), ("v1_partitioned", 1)]

  goldens = []
  for d, version in dirs:
    directory = os.path.join(root, d)
    prefix = os.path.join(directory, "model.ckpt-7")
    print(d)
    raw, kinds = inspect_table(prefix, version)
    tensors, unreadable = describe(prefix, version)
    shards = len([f for f in os.listdir(directory) if ".data-" in f])
    goldens.append(dict(
        archive=FORMATS_ARCHIVE, dir=d, prefix=d + "/model.ckpt-7",
        format=version, shards=shards if version == 2 else 1,
        path=checkpoint_path(directory), tensors=tensors, raw=raw,
        unreadable=unreadable, kinds=kinds, stats=False))
  return goldens


# ---- Nets ------------------------------------------------------------------
# TF-Slim's nets/mobilenet_v1.py: (kind, stride, depth) per layer.
MOBILENET_V1_CONV_DEFS = (
    [("conv", 2, 32), ("sep", 1, 64), ("sep", 2, 128), ("sep", 1, 128),
     ("sep", 2, 256), ("sep", 1, 256), ("sep", 2, 512)] +
    [("sep", 1, 512)] * 5 + [("sep", 2, 1024), ("sep", 1, 1024)])


def mobilenet_v1_arg_scope(is_training=True, weight_decay=0.00004,
                           stddev=0.09, batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001):
  """nets/mobilenet_v1.py mobilenet_v1_arg_scope (regularize_depthwise
  False)."""
  batch_norm_params = {"center": True, "scale": True,
                       "decay": batch_norm_decay,
                       "epsilon": batch_norm_epsilon,
                       "is_training": is_training}
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      weights_initializer=tf.truncated_normal_initializer(
                          stddev=stddev),
                      activation_fn=tf.nn.relu6,
                      normalizer_fn=slim.batch_norm):
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope([slim.conv2d],
                          weights_regularizer=slim.l2_regularizer(
                              weight_decay)):
        with slim.arg_scope([slim.separable_conv2d],
                            weights_regularizer=None) as sc:
          return sc


def mobilenet_v1(images, num_classes=1001, dropout_keep_prob=0.999,
                 is_training=True, min_depth=8, depth_multiplier=1.0,
                 scope="MobilenetV1"):
  """nets/mobilenet_v1.py mobilenet_v1 (+ mobilenet_v1_base), with the
  defaults TF-Slim's nets_factory uses (no global pool, spatial squeeze)."""
  def depth(d):
    return max(int(d * depth_multiplier), min_depth)
  end_points = {}
  with tf.variable_scope(scope, "MobilenetV1", [images]):
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                          padding="SAME"):
        net = images
        for i, (kind, stride, d) in enumerate(MOBILENET_V1_CONV_DEFS):
          if kind == "conv":
            net = slim.conv2d(net, depth(d), [3, 3], stride=stride,
                              scope="Conv2d_%d" % i)
            end_points["Conv2d_%d" % i] = net
          else:
            net = slim.separable_conv2d(
                net, None, [3, 3], depth_multiplier=1, stride=stride,
                rate=1, scope="Conv2d_%d_depthwise" % i)
            end_points["Conv2d_%d_depthwise" % i] = net
            net = slim.conv2d(net, depth(d), [1, 1], stride=1,
                              scope="Conv2d_%d_pointwise" % i)
            end_points["Conv2d_%d_pointwise" % i] = net
      with tf.variable_scope("Logits"):
        shape = net.get_shape().as_list()
        kernel = [min(shape[1], 7), min(shape[2], 7)]
        net = slim.avg_pool2d(net, kernel, padding="VALID",
                              scope="AvgPool_1a")
        end_points["AvgPool_1a"] = net
        net = slim.dropout(net, keep_prob=dropout_keep_prob,
                           scope="Dropout_1b")
        logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                             normalizer_fn=None, scope="Conv2d_1c_1x1")
        logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
      end_points["Logits"] = logits
  return logits, end_points


def mobilenet_v1_025(images, **kwargs):
  return mobilenet_v1(images, depth_multiplier=0.25, **kwargs)


# archive stem: (slimtorch net, net fn, arg scope, image size, channels,
# classes, format, global step, EMA shadows + Momentum slots)
NET_CHECKPOINTS = [
    ("lenet_v1", "lenet", lenet, lenet_arg_scope, 28, 1, 10, 1, 3, False),
    ("cifarnet_v2", "cifarnet", cifarnet, cifarnet_arg_scope, 32, 3, 10, 2,
     5, False),
    ("mobilenet_v1_025_v2", "mobilenet_v1_025", mobilenet_v1_025,
     mobilenet_v1_arg_scope, 96, 3, 10, 2, 11, True),
]

# --all-nets: nets beyond gen_net_goldens.NETS, by name only.
EXTRA_NETS = {
    "lenet": (lenet, lenet_arg_scope, 28, 10, 1),
    "cifarnet": (cifarnet, cifarnet_arg_scope, 32, 10, 3),
    "mobilenet_v1": (mobilenet_v1, mobilenet_v1_arg_scope, 224, 1001, 3),
    "mobilenet_v1_075": (functools.partial(mobilenet_v1, depth_multiplier=0.75),
                         mobilenet_v1_arg_scope, 224, 1001, 3),
    "mobilenet_v1_050": (functools.partial(mobilenet_v1, depth_multiplier=0.5),
                         mobilenet_v1_arg_scope, 224, 1001, 3),
    "mobilenet_v1_025": (mobilenet_v1_025, mobilenet_v1_arg_scope, 224, 1001,
                         3),
}


def periodic(name, shape):
  """The low-entropy fill of the module docstring for variable `name`."""
  n = int(np.prod(shape, dtype=np.int64)) if shape else 1
  h = zlib.crc32(name.encode()) % PERIOD
  base = ((np.arange(n, dtype=np.int64) * STEP + h) % PERIOD - 510) / 1024.0
  leaf = name.split("/")[-1]
  if leaf in ("gamma", "moving_variance"):
    v = 0.5 + np.abs(base)
  elif leaf in ("biases", "beta", "moving_mean"):
    v = base / 8
  elif leaf == "Momentum":
    v = base / 64
  else:
    assert len(shape) >= 2, name
    fan_in = (shape[0] * shape[1] if leaf == "depthwise_weights"
              else int(np.prod(shape[:-1])))
    v = base * 2.0 ** math.floor(math.log2(math.sqrt(48.0 / fan_in)))
  f = v.astype(np.float32)
  assert np.array_equal(f.astype(np.float64), v), name
  return f.reshape(shape)


def shadow_of(values):
  v = values.astype(np.float64) * 0.75 + 1.0 / 64
  f = v.astype(np.float32)
  assert np.array_equal(f.astype(np.float64), v)
  return f


def write_net(root, stem, fn, scope_fn, size, channels, classes, version,
              step, extras):
  """One net checkpoint under root/stem; returns its golden."""
  with tf.Graph().as_default(), tf.Session() as sess:
    images = tf.constant(value([BATCH, size, size, channels], 0, 1.0, False))
    with slim.arg_scope(scope_fn()):
      logits, _ = fn(images, num_classes=classes, is_training=False)
    model = slim.get_model_variables()
    assert len(model) == len(tf.global_variables()), "non-model variables"
    global_step = tf.train.get_or_create_global_step()
    shadows = {}
    if extras:
      # train_image_classifier.py: the averages first (of every model
      # variable, moving statistics included), then the optimizer.
      ema = tf.train.ExponentialMovingAverage(0.9999, global_step)
      ema.apply(model)
      shadows = {v.op.name: ema.average(v) for v in model}
      tf.train.MomentumOptimizer(0.01, 0.9).minimize(
          tf.reduce_sum(logits), var_list=tf.trainable_variables())
    sess.run(tf.global_variables_initializer())
    values = {}
    for v in tf.global_variables():
      name = v.op.name
      if name == "global_step":
        v.load(step, sess)
        continue
      if name.endswith("/ExponentialMovingAverage"):
        continue
      values[name] = periodic(name, v.shape.as_list())
      v.load(values[name], sess)
    for name, s in shadows.items():
      s.load(shadow_of(values[name]), sess)
    out = sess.run(logits)
    directory = os.path.join(root, stem)
    prefix = save(sess, None, directory, version, step, relative=True)
    ema_out = None
    if extras:
      for v in model:
        v.load(shadow_of(values[v.op.name]), sess)
      ema_out = sess.run(logits)
    print("%s: %d variables, logits |max| %.4g std %.4g, images differ by "
          "%.4g%s" % (stem, len(tf.global_variables()), np.abs(out).max(),
                      out.std(), np.abs(out[0] - out[1]).max(),
                      "" if ema_out is None else
                      ", EMA logits |max| %.4g" % np.abs(ema_out).max()))
  tensors, unreadable = describe(prefix, version)
  assert not unreadable
  for name, _, _, got in tensors:
    want = (np.int64(step) if name == "global_step" else
            shadow_of(values[name[:-len("/ExponentialMovingAverage")]])
            if name.endswith("/ExponentialMovingAverage") else values[name])
    assert np.array_equal(got, want), name
  _, kinds = inspect_table(prefix, version, verbose=False)
  return dict(archive=stem + ".tar.gz", dir=stem,
              prefix="%s/%s" % (stem, os.path.basename(prefix)),
              format=version, shards=1, path=checkpoint_path(directory),
              tensors=tensors, raw=None, unreadable={}, kinds=kinds,
              stats=True, logits=out, ema_logits=ema_out, size=size,
              channels=channels, classes=classes, step=step)


# ---- The .inc ----------------------------------------------------------------
STRUCTS = """\
//   // A key as TensorFlow's reader lists it (tf.train.list_variables order:
//   // sorted by name).
//   struct TfCkptKey {
//     const char* name;
//     int dtype;                   // TensorFlow's DataType enum
//     std::vector<int64_t> shape;  // {} for a scalar
//   };
//   // Every value of a tensor, row-major (formats only). Exactly one of the
//   // vectors is filled (unless the tensor is empty): floats for DT_FLOAT,
//   // DT_DOUBLE, DT_HALF, DT_BFLOAT16; ints for the integer dtypes and
//   // DT_BOOL (0 / 1); strings for DT_STRING.
//   struct TfCkptValues {
//     const char* name;
//     std::vector<double> floats;
//     std::vector<int64_t> ints;
//     std::vector<std::string> strings;
//   };
//   // A tensor of a net checkpoint, summarised.
//   struct TfCkptStats {
//     const char* name;
//     int64_t count;               // number of elements
//     double sum;                  // float64 sum of the values
//     double abs_sum;              // float64 sum of |value|
//     std::vector<double> first;   // the first min(8, count), row-major
//   };
//   // A key of the table itself (V2: the .index file, V1: the one file),
//   // in file order; "" is the header (V2) / the meta (V1); slices of a
//   // partitioned tensor have binary keys, NULs included.
//   struct TfCkptRawKey {
//     const char* bytes;
//     int size;
//   };
//   // One checkpoint directory of an archive under tests/golden/
//   // tf_checkpoints/.
//   struct TfCkptGolden {
//     const char* archive;          // e.g. "saver_formats.tar.gz"
//     const char* dir;              // directory inside the archive
//     const char* prefix;           // relative to the archive's root
//     int format;                   // 1 (V1) or 2 (V2)
//     int num_shards;               // .data files (V2); 1 for V1
//     const char* checkpoint_path;  // model_checkpoint_path in dir/checkpoint
//     const TfCkptKey* keys;
//     int num_keys;
//     const TfCkptValues* values;   // formats: one per key, same order
//     int num_values;               //   (nullptr / 0 for nets)
//     const TfCkptStats* stats;     // nets: one per key, same order
//     int num_stats;                //   (nullptr / 0 for formats)
//     const TfCkptRawKey* raw_keys; // formats only (nullptr / 0 for nets)
//     int num_raw_keys;
//   };
//   // A net checkpoint's logits, inference mode (is_training=False).
//   struct TfCkptNetGolden {
//     const char* archive;
//     const char* net;              // slimtorch's net name
//     int image_size;
//     int channels;
//     int num_classes;
//     int64_t global_step;
//     const float* logits;          // [2, num_classes]
//     const float* ema_logits;      // with the moving averages; or nullptr
//   };
"""


def c_string(b):
  """A C string literal of bytes `b` (octal escapes: never greedy)."""
  out = []
  for c in b:
    ch = chr(c)
    if ch in '"\\':
      out.append("\\" + ch)
    elif 32 <= c < 127 and ch != "?":
      out.append(ch)
    else:
      out.append("\\%03o" % c)
  return '"' + "".join(out) + '"'


def c_int64(x):
  x = int(x)
  if x == -(1 << 63):
    return "(-9223372036854775807LL - 1)"
  return "%dLL" % x if abs(x) >= (1 << 31) else "%d" % x


def c_list(items, per_line=4, indent="         "):
  if not items:
    return "{}"
  if len(items) <= per_line:
    return "{" + ", ".join(items) + "}"
  rows = [", ".join(items[i:i + per_line])
          for i in range(0, len(items), per_line)]
  return "{" + (",\n" + indent).join(rows) + "}"


def c_shape(shape):
  return "{" + ", ".join(str(d) for d in shape) + "}"


def ident(golden):
  """kV2Partitioned, kMobilenetV1025V2, ..."""
  return "k" + "".join(p.capitalize() for p in golden["dir"].split("_"))


def inc_checkpoint(g, lines):
  k = ident(g)
  lines.append("const TfCkptKey %sKeys[] = {" % k)
  for name, dtype, shape, _ in g["tensors"]:
    lines.append('    {"%s", %d, %s},  // %s' % (name, dtype, c_shape(shape),
                                                 DTYPE_NAMES[dtype]))
  lines.append("};")
  if g["stats"]:
    lines.append("const TfCkptStats %sStats[] = {" % k)
    for name, _, _, v in g["tensors"]:
      a = v.astype(np.float64).reshape(-1)
      lines.append('    {"%s", %d, %s, %s,\n     %s},' % (
          name, a.size, c_double(a.sum()), c_double(np.abs(a).sum()),
          c_list([c_double(x) for x in a[:FIRST]], 4, "      ")))
    lines.append("};")
  else:
    lines.append("const TfCkptValues %sValues[] = {" % k)
    for name, dtype, _, v in g["tensors"]:
      flat = v.reshape(-1)
      floats, ints, strings = "{}", "{}", "{}"
      if dtype == 7:
        strings = c_list([c_string(x) for x in flat])
      elif dtype in (1, 2, 14, 19):
        floats = c_list([c_double(float(x)) for x in flat])
      else:
        ints = c_list([c_int64(x) for x in flat])
      note = ("  // tf.train.load_checkpoint: " + g["unreadable"][name]
              if name in g["unreadable"] else "")
      lines.append('    {"%s",%s\n     %s,\n     %s,\n     %s},' % (
          name, note, floats, ints, strings))
    lines.append("};")
    lines.append("const TfCkptRawKey %sRawKeys[] = {" % k)
    for key in g["raw"]:
      lines.append("    {%s, %d}," % (c_string(key), len(key)))
    lines.append("};")


def inc_row(g):
  k = ident(g)
  n = len(g["tensors"])
  return ('    {"%s", "%s", "%s", %d, %d,\n     "%s",\n     %sKeys, %d, '
          '%s, %d, %s, %d, %s, %d},' % (
              g["archive"], g["dir"], g["prefix"], g["format"], g["shards"],
              g["path"], k, n,
              ("nullptr" if g["stats"] else k + "Values"),
              0 if g["stats"] else n,
              (k + "Stats" if g["stats"] else "nullptr"),
              n if g["stats"] else 0,
              ("nullptr" if g["stats"] else k + "RawKeys"),
              0 if g["stats"] else len(g["raw"])))


def write_inc(formats, nets):
  lines = [
      "// TensorFlow %s's own checkpoints (tests/golden/tf_checkpoints/) and"
      % tf.__version__,
      "// what its reader returns for them.",
      "// Generated by scripts/golden/gen_tf_checkpoints.py; do not edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "//",
      "// Archives: %s (v2, v1, v2_sharded, v2_partitioned," % FORMATS_ARCHIVE,
      "// v1_partitioned), %s." % ", ".join(
          g["archive"] for g in nets),
      "// Net variables: the periodic fill of the generator's docstring",
      "// (kTfCkptFillPeriod, kTfCkptFillStep). Net inputs: batch 2,",
      "// gen_lenet_goldens.py's fill with stream 0, scale 1, i.e. in C++",
      "// (tests/nets/golden_util.h), NHWC / NCHW:",
      "//   Fill({2, size, size, channels}, GoldenFill{\"images\", 0, 1.0})",
      "//   ActivationFromTf(Fill({2, size, size, channels},",
      "//                         GoldenFill{\"images\", 0, 1.0}))",
      "// What TensorFlow wrote: every table block uncompressed (type 0); V1",
      "// values in the TensorProto's typed fields (float_val, double_val,",
      "// int_val, int64_val, bool_val, half_val, string_val), never in",
      "// tensor_content; V1 cannot save DT_BFLOAT16 (absent from v1/) and",
      "// writes DT_HALF that TensorFlow's own reader then refuses (values",
      "// decoded from half_val). v1_partitioned and v2_partitioned list",
      "// scope/part once, [7, 4], read assembled from 3 slices.",
      "//",
      "// Expects these definitions before the #include (aggregates):",
      STRUCTS.rstrip("\n"),
      "",
      "constexpr int kTfCkptFillPeriod = %d;" % PERIOD,
      "constexpr int kTfCkptFillStep = %d;" % STEP,
      "",
  ]
  for g in formats + nets:
    lines.append("// %s: %s/ (V%d)" % (g["archive"], g["dir"], g["format"]))
    inc_checkpoint(g, lines)
    lines.append("")
  for g in nets:
    k = ident(g)
    for tag, arr in (("Logits", g["logits"]), ("EmaLogits", g["ema_logits"])):
      if arr is None:
        continue
      flat = arr.reshape(-1)
      lines.append("const float %s%s[] = {" % (k, tag))
      for i in range(0, flat.size, 5):
        lines.append("    " + ", ".join(c_float(x) for x in flat[i:i + 5])
                     + ",")
      lines.append("};")
  lines.append("")
  lines.append("const TfCkptGolden kTfCkptGoldens[] = {")
  lines.extend(inc_row(g) for g in formats + nets)
  lines.append("};")
  lines.append("const TfCkptNetGolden kTfCkptNetGoldens[] = {")
  for g in nets:
    k = ident(g)
    lines.append('    {"%s", "%s", %d, %d, %d, %d, %sLogits, %s},' % (
        g["archive"], g["net"], g["size"], g["channels"], g["classes"],
        g["step"], k, k + "EmaLogits" if g["ema_logits"] is not None
        else "nullptr"))
  lines.append("};")
  with open(INC, "w") as f:
    f.write("\n".join(lines) + "\n")
  print("wrote %s: %d bytes" % (os.path.relpath(INC, REPO),
                                os.path.getsize(INC)))


def goldens():
  os.makedirs(OUT, exist_ok=True)
  fresh(WORK)
  try:
    formats = write_formats(os.path.join(WORK, "formats"))
    tar_dirs(os.path.join(WORK, "formats"), [g["dir"] for g in formats],
             os.path.join(OUT, FORMATS_ARCHIVE))
    nets = []
    for stem, net, fn, scope_fn, size, ch, classes, version, step, extras \
        in NET_CHECKPOINTS:
      g = write_net(os.path.join(WORK, "nets"), stem, fn, scope_fn, size, ch,
                    classes, version, step, extras)
      g["net"] = net
      tar_dirs(os.path.join(WORK, "nets"), [stem],
               os.path.join(OUT, g["archive"]))
      nets.append(g)
    write_inc(formats, nets)
  finally:
    shutil.rmtree(WORK, ignore_errors=True)


# ---- --all-nets ----------------------------------------------------------------
# research/slim's nets: (image size, frames) when not the default.
SLIM_CHECKPOINT_SIZES = {"nasnet_large": (96, 0), "pnasnet_large": (96, 0),
                         "i3d": (112, 16), "s3dg": (96, 8)}


def write_slim_net(net_dir, name, slim_dir):
  """A research/slim net's checkpoints (from its training graph) and its
  inference logits; returns (manifest line, number of variables)."""
  fn, scope_fn, size, classes, frames = net_entry(name, slim_dir)
  size, frames = SLIM_CHECKPOINT_SIZES.get(name, (size, frames))
  shape = ([BATCH, frames, size, size, 3] if frames else
           [BATCH, size, size, 3])
  fills, lines = {}, []
  with tf.Graph().as_default(), tf.Session() as sess:
    global_step = tf.train.get_or_create_global_step()
    with slim.arg_scope(scope_fn()):
      fn(tf.placeholder(tf.float32, shape), num_classes=classes,
         is_training=True)
    feeds = {global_step.initializer.inputs[1]: np.int64(1000)}
    for v in tf.global_variables():
      if v.op.name == "global_step":
        continue
      vshape = v.shape.as_list()
      stream, scale, positive = fill_for(len(fills), v.op.name, vshape,
                                         depthwise_window=True)
      fills[v.op.name] = (vshape, stream, scale, positive)
      lines.append("%s %d %s %d %s" % (
          v.op.name, stream, c_double(scale), int(positive),
          "x".join(str(d) for d in vshape) or "-"))
      feeds[v.initializer.inputs[1]] = value(vshape, stream, scale, positive)
    # One run for all (Variable.load's feed): a run per variable prunes
    # NASNet's graph a thousand times.
    sess.run([v.initializer for v in tf.global_variables()], feeds)
    for version in (2, 1):
      save(sess, None, os.path.join(net_dir, "v%d" % version), version,
           1000, relative=True)
  with tf.Graph().as_default(), tf.Session() as sess:
    images = tf.constant(value(shape, 0, 1.0, False))
    with slim.arg_scope(scope_fn()):
      logits, _ = fn(images, num_classes=classes, is_training=False)
    feeds = {}
    for v in tf.global_variables():
      vshape, stream, scale, positive = fills[v.op.name]
      feeds[v.initializer.inputs[1]] = value(vshape, stream, scale, positive)
    sess.run([v.initializer for v in tf.global_variables()], feeds)
    out = sess.run(logits)
  with open(os.path.join(net_dir, "logits.txt"), "w") as f:
    f.write("".join("%.9g\n" % x for x in out.reshape(-1)))
  with open(os.path.join(net_dir, "fills.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
  return "%s %d %d 3 %d" % (name, size, classes, frames), len(fills)


def all_nets(out_dir, names, slim_dir):
  if not names:
    names = list(NETS) + list(EXTRA_NETS)
    if os.path.isdir(slim_dir):
      names += list(SLIM_NETS)
    else:
      print("research/slim's nets left out: no copy at %s (--slim-dir)"
            % slim_dir, flush=True)
  os.makedirs(out_dir, exist_ok=True)
  manifest = []
  for name in names:
    start = time.time()
    if name in SLIM_NETS:
      line, count = write_slim_net(fresh(os.path.join(out_dir, name)), name,
                                   slim_dir)
      manifest.append(line)
      print("%s: %d variables, training graph + checkpoints + inference "
            "logits %.1f s" % (name, count, time.time() - start), flush=True)
      continue
    if name in NETS:
      fn, scope_fn, size, classes = NETS[name]
      channels = 3
    else:
      fn, scope_fn, size, classes, channels = EXTRA_NETS[name]
    net_dir = fresh(os.path.join(out_dir, name))
    with tf.Graph().as_default(), tf.Session() as sess:
      images = tf.constant(value([BATCH, size, size, channels], 0, 1.0,
                                 False))
      with slim.arg_scope(scope_fn()):
        logits, _ = fn(images, num_classes=classes, is_training=False)
      variables = tf.global_variables()
      global_step = tf.train.get_or_create_global_step()
      sess.run(global_step.initializer)
      global_step.load(1000, sess)
      fills = []
      for i, v in enumerate(variables):
        shape = v.shape.as_list()
        stream, scale, positive = fill_for(i, v.op.name, shape,
                                           depthwise_window=True)
        fills.append("%s %d %s %d %s" % (
            v.op.name, stream, c_double(scale), int(positive),
            "x".join(str(d) for d in shape) or "-"))
        v.load(value(shape, stream, scale, positive), sess)
      out = sess.run(logits)
      built = time.time()
      for version in (2, 1):
        save(sess, None, os.path.join(net_dir, "v%d" % version), version,
             1000, relative=True)
    with open(os.path.join(net_dir, "logits.txt"), "w") as f:
      f.write("".join("%.9g\n" % x for x in out.reshape(-1)))
    with open(os.path.join(net_dir, "fills.txt"), "w") as f:
      f.write("\n".join(fills) + "\n")
    manifest.append("%s %d %d %d" % (name, size, classes, channels))
    print("%s: %d variables, graph + fill + logits %.1f s, save V2 + V1 "
          "%.1f s" % (name, len(variables), built - start,
                      time.time() - built), flush=True)
  with open(os.path.join(out_dir, "manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")


def main():
  args = sys.argv[1:]
  slim_dir = default_slim_dir()
  if "--slim-dir" in args:
    i = args.index("--slim-dir")
    if i + 1 >= len(args):
      sys.exit("--slim-dir needs a directory")
    slim_dir = args[i + 1]
    del args[i:i + 2]
  usage = "usage: %s [--all-nets OUT_DIR [--slim-dir DIR] [net ...]]" % COMMAND
  if args and args[0] == "--all-nets":
    if len(args) < 2:
      sys.exit(usage)
    unknown = [n for n in args[2:]
               if n not in NETS and n not in EXTRA_NETS and n not in SLIM_NETS]
    if unknown:
      sys.exit("unknown nets: %s" % " ".join(unknown))
    if any(n in SLIM_NETS for n in args[2:]) and not os.path.isdir(slim_dir):
      print("skipped: research/slim's nets need a copy of TF-Slim's "
            "research/slim at --slim-dir (%s): they are not in tf_slim"
            % slim_dir)
      sys.exit(77)
    all_nets(args[1], args[2:], slim_dir)
  elif args:
    sys.exit(usage)
  else:
    goldens()


if __name__ == "__main__":
  main()
