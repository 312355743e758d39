#!/usr/bin/env python3
"""tf.data peer of build/input_bench: TFRecords -> TF-Slim decode -> TF-Slim's
own inception/vgg preprocessing -> batches, timed.

  /opt/tfenv/bin/python bench/input/photo_input_tf.py \
      --file_pattern='DIR/tfrecord/photos-*' --preprocessing_name=inception \
      --is_training=true --num_preprocessing_threads=2 --warmup_batches=5 \
      --batches=40
prints as its last line images_per_sec=<float>.

The pipeline is what TF-Slim's train_image_classifier/eval_image_classifier
build, on tf.data instead of queue runners:
  TFRecordDataset (num_readers parallel reads when > 1), repeated
  -> tf_slim.data.tfexample_decoder.TFExampleDecoder with TF-Slim's
     keys_to_features and items_to_handlers (the Image handler decodes by
     image/format, 3 channels, uint8), as datasets/flowers.py declares them
  -> preprocessing/<name>_preprocessing.preprocess_image(image, size, size,
     is_training), TF-Slim's own module (image summaries off)
  -> map(num_parallel_calls=threads) -> batch(batch_size, drop_remainder)
  -> prefetch(2).
Fairness: tf.data gets a private thread pool of `threads` threads and TF's
intra/inter-op pools are `threads` threads too.

TF-Slim's preprocessing modules are not in the tf_slim pip package (it ships
the library only; they live in tensorflow/models, research/slim/preprocessing,
which is not on PyPI). This script does not carry a copy: it imports
<slim_dir>/preprocessing/{inception,vgg}_preprocessing.py from --slim_dir
(default $TF_SLIM_DIR, else /opt/benchenv/tf_slim_research, which
bench/lib/setup_python_peers.sh fills) and runs them unmodified: they are TF1
code, so while they are imported `tensorflow` names tf.compat.v1 with
tf.contrib.slim = tf_slim. tf_slim 1.1's decoder needs two aliases under TF 2.x
(control_flow_ops.case and .cond = tf.compat.v1's).
"""

import argparse
import glob
import importlib.util
import inspect
import os
import sys
import time
import types

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tf_slim  # pylint: disable=g-import-not-at-top
from tf_slim.data import tfexample_decoder as slim_decoder  # pylint: disable=g-import-not-at-top
from tensorflow.python.ops import control_flow_ops  # pylint: disable=g-import-not-at-top

# tf_slim 1.1's Image handler calls control_flow_ops.case and .cond, which
# TF 2.x moved out of that module; give them back under their old names.
for _name in ('case', 'cond'):
  if not hasattr(control_flow_ops, _name):
    setattr(control_flow_ops, _name, getattr(tf.compat.v1, _name))


def parse_bool(text):
  if text.lower() in ('true', '1', 'yes'):
    return True
  if text.lower() in ('false', '0', 'no'):
    return False
  raise argparse.ArgumentTypeError('expected true or false, got %r' % text)


def parse_args(argv):
  p = argparse.ArgumentParser(description='tf.data photo input benchmark')
  p.add_argument('--file_pattern', required=True)
  p.add_argument('--preprocessing_name', choices=['inception', 'vgg'],
                 default='inception')
  p.add_argument('--is_training', type=parse_bool, default=True)
  p.add_argument('--image_size', type=int, default=224)
  p.add_argument('--batch_size', type=int, default=32)
  p.add_argument('--num_preprocessing_threads', type=int, default=1)
  p.add_argument('--num_readers', type=int, default=1)
  p.add_argument('--warmup_batches', type=int, default=5)
  p.add_argument('--batches', type=int, default=40)
  p.add_argument('--slim_dir', default=os.environ.get(
      'TF_SLIM_DIR', '/opt/benchenv/tf_slim_research'))
  # argparse accepts --flag=value, as gflags does.
  return p.parse_args(argv)


class _TF1Namespace(types.ModuleType):
  """tf.compat.v1 under the name `tensorflow`, with tf.contrib.slim = tf_slim:
  what TF-Slim's TF1 modules expect of `import tensorflow as tf`."""

  def __init__(self):
    super().__init__('tensorflow')
    self.contrib = types.SimpleNamespace(slim=tf_slim)

  def __getattr__(self, name):
    return getattr(tf.compat.v1, name)


def load_slim_preprocessing(slim_dir, name):
  """TF-Slim's <name>_preprocessing module, run unmodified on tf.compat.v1."""
  path = os.path.join(slim_dir, 'preprocessing', name + '_preprocessing.py')
  if not os.path.isfile(path):
    sys.exit('photo_input_tf: %s not found; point --slim_dir or TF_SLIM_DIR '
             'at a tensorflow/models research/slim folder, or run '
             'bench/lib/setup_python_peers.sh' % path)
  spec = importlib.util.spec_from_file_location(name + '_preprocessing', path)
  module = importlib.util.module_from_spec(spec)
  real_tf = sys.modules['tensorflow']
  sys.modules['tensorflow'] = _TF1Namespace()
  try:
    spec.loader.exec_module(module)
  finally:
    sys.modules['tensorflow'] = real_tf
  return module


def slim_decoder_for_photos():
  """TF-Slim's decoder with the keys datasets/flowers.py declares."""
  keys_to_features = {
      'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.io.FixedLenFeature((), tf.string,
                                            default_value='png'),
      'image/class/label': tf.io.FixedLenFeature(
          [], tf.int64, default_value=tf.zeros([], dtype=tf.int64)),
  }
  items_to_handlers = {
      'image': slim_decoder.Image(),
      'label': slim_decoder.Tensor('image/class/label'),
  }
  return slim_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)


def make_dataset(args, preprocessing):
  files = sorted(glob.glob(args.file_pattern))
  if not files:
    sys.exit('photo_input_tf: no file matches %s' % args.file_pattern)
  decoder = slim_decoder_for_photos()
  kwargs = {}
  if (args.preprocessing_name == 'inception' and 'add_image_summaries' in
      inspect.signature(preprocessing.preprocess_image).parameters):
    kwargs['add_image_summaries'] = False

  def parse_and_preprocess(serialized):
    image, label = decoder.decode(serialized, ['image', 'label'])
    image = preprocessing.preprocess_image(
        image, args.image_size, args.image_size, is_training=args.is_training,
        **kwargs)
    return image, label

  readers = args.num_readers if args.num_readers > 1 else None
  ds = tf.data.TFRecordDataset(files, num_parallel_reads=readers).repeat()
  ds = ds.map(parse_and_preprocess,
              num_parallel_calls=args.num_preprocessing_threads)
  ds = ds.batch(args.batch_size, drop_remainder=True).prefetch(2)
  options = tf.data.Options()
  options.threading.private_threadpool_size = args.num_preprocessing_threads
  return ds.with_options(options)


def main(argv):
  args = parse_args(argv)
  threads = args.num_preprocessing_threads
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  preprocessing = load_slim_preprocessing(args.slim_dir,
                                          args.preprocessing_name)
  iterator = iter(make_dataset(args, preprocessing))
  for _ in range(args.warmup_batches):
    images, _ = next(iterator)
  expected = (args.batch_size, args.image_size, args.image_size, 3)
  start, cpu_start = time.perf_counter(), time.process_time()
  for _ in range(args.batches):
    images, _ = next(iterator)
  seconds = time.perf_counter() - start
  cpu_seconds = time.process_time() - cpu_start
  if tuple(images.shape) != expected:
    sys.exit('photo_input_tf: batch shape %s, expected %s' %
             (tuple(images.shape), expected))
  # CPU seconds / wall seconds: how many cores the pipeline kept busy.
  print('tf.data %s is_training=%s threads=%d: %d batches of %d in %.3f s, '
        'cores busy %.2f' % (args.preprocessing_name, args.is_training,
                             threads, args.batches, args.batch_size, seconds,
                             cpu_seconds / seconds))
  print('images_per_sec=%.2f' % (args.batches * args.batch_size / seconds))


if __name__ == '__main__':
  main(sys.argv[1:])
