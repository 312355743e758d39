"""What the logits-golden generators share: the weight fill of every
variable and the C++ rows of one net's golden (net_logits_test.cc's
LogitsFill / LogitsSums / NetLogitsGolden)."""

import math

import numpy as np

from gen_lenet_goldens import c_double, c_float, fill


def fill_for(index, name, shape, depthwise_window=False):
  """(stream, scale, positive) of variable `index` named `name`, TF shape.

  gamma / moving_variance: 0.5 + |fill| (scale 1/2); weights (rank >= 2):
  the power of two at or below sqrt(6 / fan_in), fan_in = all dimensions but
  the last (with depthwise_window, a depthwise kernel's kh * kw); the rest
  scale 1/16.
  """
  leaf = name.split("/")[-1]
  if leaf in ("gamma", "moving_variance"):
    return index + 1, 0.5, True
  if len(shape) >= 2:
    if depthwise_window and leaf == "depthwise_weights":
      fan_in = shape[0] * shape[1]
    else:
      fan_in = int(np.prod(shape[:-1]))
    scale = 2.0 ** math.floor(math.log2(math.sqrt(6.0 / fan_in)))
    return index + 1, scale, False
  return index + 1, 1.0 / 16, False


def value(shape, stream, scale, positive):
  """The fill of one variable (float32, TF layout)."""
  v = fill(shape, stream, scale)
  if positive:
    v = (np.float32(0.5) + np.abs(v)).astype(np.float32)
  return v


def net_rows(ident, name, size, classes, fills, logits, end_points,
             global_pool=-1, frames=None):
  """Returns (definition lines, the NetLogitsGolden table row).

  fills: (tf name, stream, scale, positive, tf shape) per variable;
  logits: [batch, classes] array; end_points: key → array (sums recorded);
  global_pool: the net's global_pool argument (-1: its default);
  frames: when given, appended to the row (the clip's frame count, 0 for
  images: the research/slim nets' rows carry it, the older rows do not).
  """
  lines = ["const LogitsFill %s_fills[] = {" % ident]
  for vname, stream, scale, positive, shape in fills:
    lines.append('    {"%s", %d, %s, %s, {%s}},' % (
        vname, stream, c_double(scale), "true" if positive else "false",
        ", ".join(str(d) for d in shape)))
  lines.append("};")
  flat = logits.reshape(-1)
  lines.append("const float %s_logits[] = {" % ident)
  for i in range(0, flat.size, 6):
    lines.append("    " + ", ".join(c_float(x) for x in flat[i:i + 6]) + ",")
  lines.append("};")
  lines.append("const LogitsSums %s_sums[] = {" % ident)
  for key, a in end_points.items():
    a64 = a.astype(np.float64)
    lines.append('    {"%s", %s, %s},' % (key, c_double(a64.sum()),
                                          c_double(np.abs(a64).sum())))
  lines.append("};")
  row = ('    {"%s", %d, %d, %s_fills, %d, %s_logits, %d, %s_sums, %d, %d'
         % (name, size, classes, ident, len(fills), ident, flat.size, ident,
            len(end_points), global_pool))
  if frames is not None:
    row += ", %d" % frames
  return lines, row + "},"
