"""The C++ rows of one net's logits golden (net_logits_test.cc's
LogitsFill / LogitsSums / NetLogitsGolden), shared by the generators."""

import numpy as np

from gen_lenet_goldens import c_double, c_float


def net_rows(ident, name, size, classes, fills, logits, end_points,
             global_pool=-1):
  """Returns (definition lines, the NetLogitsGolden table row).

  fills: (tf name, stream, scale, positive, tf shape) per variable;
  logits: [batch, classes] array; end_points: key → array (sums recorded);
  global_pool: the net's global_pool argument (-1: its default).
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
  row = ('    {"%s", %d, %d, %s_fills, %d, %s_logits, %d, %s_sums, %d, %d},'
         % (name, size, classes, ident, len(fills), ident, flat.size, ident,
            len(end_points), global_pool))
  return lines, row
