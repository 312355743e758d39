#!/usr/bin/env python3
"""Makes the photo input benchmark's data set from real photographs.

Crops and resizes the photographs of Debian's desktop-background packages
(unpacked by bench/input/make_photo_set.sh into SOURCE_ROOT) to ImageNet-like sizes
and writes them twice, with the same JPEG bytes:

  OUT/files/<class>/<name>.jpg          for the Python peers (ImageFolder)
  OUT/tfrecord/photos-NNNNN-of-00004.tfrecord
                                        tf.train.Example records with TF-Slim's
                                        keys (image/encoded = the file's bytes,
                                        image/format b'jpg', image/class/label,
                                        image/height, image/width)
  OUT/labels.txt                        "<label>:<class>" lines
  OUT/README                            what the set is and where it came from

Deterministic: a fixed random.Random(SEED) draws every crop, PIL encodes at
quality 90 with 4:2:0 chroma subsampling. Run with TensorFlow's Python
(/opt/tfenv/bin/python): it writes the TFRecords with tf.io.TFRecordWriter.
Everything is written into OUT.tmp and renamed to OUT at the end, so OUT is
either absent or complete; bench/input/make_photo_set.sh skips a complete OUT.

  /opt/tfenv/bin/python bench/input/make_photo_set.py --source_root=DIR \
      --sources_note='pkg=version ...' --out=DIR [--count=640]
"""

import argparse
import io
import os
import random
import shutil
import sys

from PIL import Image

# The photographs (paths under SOURCE_ROOT), grouped into pseudo-classes.
# Chosen by eye from the packages' pictures: real photographs only, no
# renders or illustrations. A class's photos are cropped in turn.
PHOTOS = {
    'flowers': [
        'mate-backgrounds/usr/share/backgrounds/mate/nature/FreshFlower.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/Garden.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/YellowFlower.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/TwoWings.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/LadyBird.jpg',
    ],
    'leaves': [
        'mate-backgrounds/usr/share/backgrounds/mate/nature/Blinds.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/GreenMeadow.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/RainDrops.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/FallenLeaf/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/OneStandsOut/'
        'contents/images/2560x1600.jpg',
    ],
    'water': [
        'mate-backgrounds/usr/share/backgrounds/mate/nature/Aqua.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/BytheWater/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/DarkestHour/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/EveningGlow/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/summer_1am/'
        'contents/images/2560x1600.jpg',
    ],
    'landscape': [
        'mate-backgrounds/usr/share/backgrounds/mate/nature/Dune.jpg',
        'mate-backgrounds/usr/share/backgrounds/mate/nature/Storm.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/Kite/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/Path/'
        'contents/images/2560x1600.jpg',
    ],
    'objects': [
        'mate-backgrounds/usr/share/backgrounds/mate/nature/Wood.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/ColdRipple/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/ColorfulCups/'
        'contents/images/2560x1600.jpg',
        'plasma-workspace-wallpapers/usr/share/wallpapers/Grey/'
        'contents/images/2560x1600.jpg',
    ],
}

# Output sizes (width, height), drawn with these weights: ImageNet's common
# 500x375 and 500x333 landscapes, their portraits, and a few others.
SIZES = [((500, 375), 6), ((500, 333), 3), ((375, 500), 3), ((333, 500), 2),
         ((500, 500), 1), ((500, 400), 1), ((400, 300), 1), ((640, 480), 1)]
NUM_SHARDS = 4
SEED = 20260409
QUALITY = 90


def crop_box(rng, src_w, src_h, out_w, out_h):
  """A crop of the source with the output's aspect ratio, 30-100% wide."""
  aspect = out_w / out_h
  max_w = min(src_w, int(src_h * aspect))
  w = max(out_w // 2, int(max_w * rng.uniform(0.3, 1.0)))
  w = min(w, max_w)
  h = min(src_h, int(round(w / aspect)))
  x = rng.randint(0, src_w - w)
  y = rng.randint(0, src_h - h)
  return (x, y, x + w, y + h)


def make_jpeg(src, rng):
  """One JPEG (bytes, width, height) cropped from the PIL image src."""
  sizes = [s for s, wgt in SIZES for _ in range(wgt)]
  out_w, out_h = rng.choice(sizes)
  box = crop_box(rng, src.width, src.height, out_w, out_h)
  img = src.crop(box).resize((out_w, out_h), Image.BICUBIC)
  buf = io.BytesIO()
  img.save(buf, format='JPEG', quality=QUALITY, subsampling=2,
           optimize=False, progressive=False)
  return buf.getvalue(), out_w, out_h


def make_images(source_root, count):
  """[(class, name, jpeg bytes, width, height)] for count crops."""
  rng = random.Random(SEED)
  classes = sorted(PHOTOS)
  sources = {}
  for cls in classes:
    for rel in PHOTOS[cls]:
      path = os.path.join(source_root, rel)
      if not os.path.isfile(path):
        sys.exit('make_photo_set: missing source photo %s' % path)
      sources[rel] = Image.open(path).convert('RGB')
  images = []
  for i in range(count):
    cls = classes[i % len(classes)]
    photos = PHOTOS[cls]
    rel = photos[(i // len(classes)) % len(photos)]
    data, w, h = make_jpeg(sources[rel], rng)
    # Plasma's photos are <Name>/contents/images/<size>.jpg: use <Name>.
    parts = rel.split('/')
    stem = parts[4] if '/wallpapers/' in rel else os.path.splitext(parts[-1])[0]
    name = '%s_%04d.jpg' % (stem, i)
    images.append((cls, name, data, w, h))
  return images


def write_tfrecords(images, labels, out_dir):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def feature(values, kind):
    if kind == 'bytes':
      return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  order = list(range(len(images)))
  random.Random(SEED + 1).shuffle(order)
  os.makedirs(out_dir)
  per_shard = (len(order) + NUM_SHARDS - 1) // NUM_SHARDS
  for shard in range(NUM_SHARDS):
    path = os.path.join(out_dir, 'photos-%05d-of-%05d.tfrecord' %
                        (shard, NUM_SHARDS))
    with tf.io.TFRecordWriter(path) as writer:
      for idx in order[shard * per_shard:(shard + 1) * per_shard]:
        cls, _, data, w, h = images[idx]
        example = tf.train.Example(features=tf.train.Features(feature={
            'image/encoded': feature([data], 'bytes'),
            'image/format': feature([b'jpg'], 'bytes'),
            'image/class/label': feature([labels[cls]], 'int64'),
            'image/height': feature([h], 'int64'),
            'image/width': feature([w], 'int64'),
        }))
        writer.write(example.SerializeToString(deterministic=True))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--source_root', required=True)
  parser.add_argument('--sources_note', default='')
  parser.add_argument('--out', required=True)
  parser.add_argument('--count', type=int, default=640)
  args = parser.parse_args()

  tmp = args.out.rstrip('/') + '.tmp'
  shutil.rmtree(tmp, ignore_errors=True)
  images = make_images(args.source_root, args.count)
  labels = {cls: i for i, cls in enumerate(sorted(PHOTOS))}
  for cls, name, data, _, _ in images:
    os.makedirs(os.path.join(tmp, 'files', cls), exist_ok=True)
    with open(os.path.join(tmp, 'files', cls, name), 'wb') as f:
      f.write(data)
  write_tfrecords(images, labels, os.path.join(tmp, 'tfrecord'))
  with open(os.path.join(tmp, 'labels.txt'), 'w') as f:
    for cls in sorted(labels):
      f.write('%d:%s\n' % (labels[cls], cls))
  total = sum(len(d) for _, _, d, _, _ in images)
  with open(os.path.join(tmp, 'README'), 'w') as f:
    f.write('photo input benchmark set: %d JPEGs (quality %d, 4:2:0, %.1f MB, '
            'mean %d bytes), %d classes, %d TFRecord shards, seed %d\n' %
            (len(images), QUALITY, total / 1e6, total // len(images),
             len(labels), NUM_SHARDS, SEED))
    f.write('crops of photographs from Debian packages: %s\n' %
            args.sources_note)
  os.rename(tmp, args.out)
  print('make_photo_set: wrote %d images to %s' % (len(images), args.out))


if __name__ == '__main__':
  main()
