"""TF-Slim's research/slim nets on TensorFlow 2.21 (graph mode), for the
golden generators.

The tf_slim pip package ships only alexnet, inception v1-v3, overfeat,
resnet and vgg. The rest of nets_factory (MobileNet v3 / EdgeTPU, NASNet,
PNASNet, I3D, S3D-G) lives in tensorflow/models research/slim, which the
generators import from a local copy (--slim-dir; /work/tfslim/README says
which files and versions). Its mobilenet/ and nasnet/ files are the TF 1.15
ones: `import tensorflow as tf` for the 1.x API and tensorflow.contrib for
slim. load() imports them unedited through a shim:
  * while they import, `tensorflow` is tf.compat.v1 (tf.variable_scope,
    tf.nn.avg_pool, tf.truncated_normal_initializer, ... keep their 1.x
    meaning), and tf.compat.v1.contrib exists;
  * tensorflow.contrib.slim / .framework / .layers are tf_slim (arg_scope,
    add_arg_scope, l2_regularizer, variance_scaling_initializer, flatten are
    the same functions there);
  * tensorflow.contrib.training.HParams is a small stand-in (attributes,
    set_hparam, values);
  * numpy's removed np.int alias is int again (mobilenet_v3.py evaluates it
    at import for its detection conv defs).
Nothing in the copied files is changed.
"""

import importlib
import os
import sys
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402
# TF 2.21 looks for slim.batch_norm's Keras layer at tf_keras.legacy_tf_layers;
# tf_keras 2.21 keeps it under tf_keras.src.
import tf_keras.src.legacy_tf_layers as _legacy  # noqa: E402
import tf_keras.src.legacy_tf_layers.normalization as _legacy_bn  # noqa: E402
sys.modules.setdefault("tf_keras.legacy_tf_layers", _legacy)
sys.modules.setdefault("tf_keras.legacy_tf_layers.normalization", _legacy_bn)
import tf_slim as slim  # noqa: E402

DEFAULT_SLIM_DIR = "/work/tfslim/research/slim"

# The files each family needs, relative to the slim dir.
FILES = {
    "mobilenet": ["nets/mobilenet/mobilenet_v3.py", "nets/mobilenet/mobilenet.py",
                  "nets/mobilenet/conv_blocks.py"],
    "nasnet": ["nets/nasnet/nasnet.py", "nets/nasnet/pnasnet.py",
               "nets/nasnet/nasnet_utils.py"],
    "video": ["nets/i3d.py", "nets/i3d_utils.py", "nets/s3dg.py"],
}


class HParams(object):
  """tf.contrib.training.HParams, as far as nasnet.py / pnasnet.py use it."""

  def __init__(self, **kwargs):
    for k, v in kwargs.items():
      setattr(self, k, v)

  def set_hparam(self, name, value):
    if not hasattr(self, name):
      raise ValueError("unknown hparam " + name)
    setattr(self, name, value)

  def values(self):
    return dict(self.__dict__)


def _module(name, **attrs):
  m = types.ModuleType(name)
  for k, v in attrs.items():
    setattr(m, k, v)
  return m


def _install_contrib():
  framework = _module("tensorflow.contrib.framework",
                      arg_scope=slim.arg_scope,
                      add_arg_scope=slim.add_arg_scope)
  layers = _module("tensorflow.contrib.layers",
                   l2_regularizer=slim.l2_regularizer,
                   variance_scaling_initializer=slim.variance_scaling_initializer,
                   flatten=slim.flatten)
  training = _module("tensorflow.contrib.training", HParams=HParams)
  contrib = _module("tensorflow.contrib", slim=slim, framework=framework,
                    layers=layers, training=training)
  sys.modules["tensorflow.contrib"] = contrib
  sys.modules["tensorflow.contrib.slim"] = slim
  sys.modules["tensorflow.contrib.framework"] = framework
  sys.modules["tensorflow.contrib.layers"] = layers
  sys.modules["tensorflow.contrib.training"] = training
  tf.contrib = contrib
  # The real package, so that `import tensorflow.contrib` sees a parent.
  import tensorflow as real_tf
  real_tf.contrib = contrib


def check_slim_dir(slim_dir, families):
  """Exits with a clear message when the copy of research/slim lacks a file."""
  missing = [os.path.join(slim_dir, f) for fam in families for f in FILES[fam]
             if not os.path.isfile(os.path.join(slim_dir, f))]
  if missing:
    sys.exit(
        "error: TF-Slim's research/slim is not at --slim-dir %s (missing %s).\n"
        "The MobileNet v3 / EdgeTPU, NASNet, PNASNet, I3D and S3D-G nets are not\n"
        "in the tf_slim pip package: put tensorflow/models' research/slim/nets\n"
        "files there (see /work/tfslim/README) or pass --slim-dir / set\n"
        "TFSLIM_DIR." % (slim_dir, ", ".join(missing)))


_loaded = {}


def load(slim_dir, families=("mobilenet", "nasnet", "video")):
  """Imports the research/slim modules; returns {short name: module}."""
  check_slim_dir(slim_dir, families)
  if _loaded:
    return _loaded
  if not hasattr(np, "int"):
    np.int = int
  _install_contrib()
  if slim_dir not in sys.path:
    sys.path.insert(0, slim_dir)
  real_tf = sys.modules["tensorflow"]
  sys.modules["tensorflow"] = tf  # the 1.x API for `import tensorflow as tf`
  try:
    for short, module in (("mobilenet_v3", "nets.mobilenet.mobilenet_v3"),
                          ("nasnet", "nets.nasnet.nasnet"),
                          ("pnasnet", "nets.nasnet.pnasnet")):
      _loaded[short] = importlib.import_module(module)
  finally:
    sys.modules["tensorflow"] = real_tf
  _loaded["i3d"] = importlib.import_module("nets.i3d")
  _loaded["s3dg"] = importlib.import_module("nets.s3dg")
  return _loaded
