#!/usr/bin/env python3
"""Imports a frozen GraphDef into TensorFlow and runs it.

What a TensorFlow user does with a graph from slimtorch's GraphDef writer:
tf.compat.v1.import_graph_def into a fresh graph (which checks every node
against its op's registered definition and the graph's versions), then a
session run of the outputs TF-Slim users fetch, "<scope>/Logits" and
"<scope>/Predictions/Reshape_1". Run by tests/export/graphdef_writer_test.cc:

  /opt/tfenv/bin/python scripts/golden/check_graphdef.py GRAPH.pb INPUT.raw \
      SHAPE OUTPUT.txt [--text]

--text reads GRAPH as protobuf text format (a .pbtxt). INPUT.raw holds the
placeholder "input" as float32 little-endian, row-major, of shape SHAPE
("2x8x7x3", NHWC; a video net's clips "2x8x64x64x3", NDHWC). The scope is
the prefix of the one node named "<scope>/Predictions/Reshape_1".
OUTPUT.txt gets one line per output, logits first:  <name> <d0xd1x...> <values as %.9g ...>
Exits non-zero with TensorFlow's message on failure.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402

PREDICTIONS = "/Predictions/Reshape_1"


def load_graph_def(path, text):
  graph_def = tf.compat.v1.GraphDef()
  with open(path, "rb") as f:
    data = f.read()
  if text:
    text_format.Parse(data.decode("utf-8"), graph_def)
  else:
    graph_def.ParseFromString(data)
  return graph_def


def main(graph_path, input_path, shape, output_path, *flags):
  if any(f != "--text" for f in flags):
    sys.exit(__doc__)
  graph_def = load_graph_def(graph_path, "--text" in flags)
  # NASNet / PNASNet have no scope: "Predictions/Reshape_1", "Logits".
  scopes = [n.name[:-len(PREDICTIONS)] for n in graph_def.node
            if n.name.endswith(PREDICTIONS) or
            n.name == PREDICTIONS.lstrip("/")]
  if len(scopes) != 1:
    sys.exit("expected one node named <scope>%s, found %d" %
             (PREDICTIONS, len(scopes)))
  prefix = scopes[0] + "/" if scopes[0] else ""
  names = [prefix + "Logits", prefix + PREDICTIONS.lstrip("/")]
  dims = [int(d) for d in shape.split("x")]
  x = np.fromfile(input_path, dtype="<f4").reshape(dims)
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.import_graph_def(graph_def, name="")
  config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                    inter_op_parallelism_threads=1)
  with tf.compat.v1.Session(graph=graph, config=config) as session:
    outputs = session.run([n + ":0" for n in names], {"input:0": x})
  with open(output_path, "w") as f:
    for name, y in zip(names, outputs):
      y = np.asarray(y, dtype=np.float32)
      f.write(" ".join([name, "x".join(map(str, y.shape)) or "-"] +
                       ["%.9g" % v for v in y.reshape(-1)]) + "\n")


if __name__ == "__main__":
  if len(sys.argv) not in (5, 6):
    sys.exit(__doc__)
  main(*sys.argv[1:])
