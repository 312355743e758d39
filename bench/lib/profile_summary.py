#!/usr/bin/env python3
"""Sums a Chrome trace of LibTorch's autograd profiler (bench/step_profile
--profile_file) by op: calls, self time (the op's own, without the ops it
called) and total time, per step, largest self time first.

  python3 bench/lib/profile_summary.py /tmp/inception_v1.trace --steps 3 --top 25
"""
import argparse
import collections
import json
import re


def load(path):
  text = open(path).read()
  try:
    return json.loads(text)
  except json.JSONDecodeError:  # a trailing comma before the closing bracket
    return json.loads(re.sub(r",\s*\]\s*$", "]", text))


def main():
  p = argparse.ArgumentParser()
  p.add_argument("trace")
  p.add_argument("--steps", type=int, default=1, help="steps in the trace")
  p.add_argument("--top", type=int, default=25)
  args = p.parse_args()
  events = [e for e in load(args.trace) if e.get("ph") == "X"]
  by_thread = collections.defaultdict(list)
  for e in events:
    by_thread[e.get("tid")].append(e)
  self_us = collections.Counter()
  total_us = collections.Counter()
  calls = collections.Counter()
  for evs in by_thread.values():
    evs.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []  # [end, name, children's time]
    def close(frame):
      end, name, dur, child = frame
      self_us[name] += dur - child
    for e in evs:
      start, dur = e["ts"], e["dur"]
      while stack and stack[-1][0] <= start:
        close(stack.pop())
      if stack:
        stack[-1][3] += dur
      stack.append([start + dur, e["name"], dur, 0.0])
      total_us[e["name"]] += dur
      calls[e["name"]] += 1
    while stack:
      close(stack.pop())
  all_self = sum(self_us.values())
  print("%-58s %7s %10s %10s %6s" % ("op", "calls", "self ms", "total ms", "self%"))
  for name, us in self_us.most_common(args.top):
    print("%-58s %7.0f %10.2f %10.2f %5.1f%%" % (
        name[:58], calls[name] / args.steps, us / 1e3 / args.steps,
        total_us[name] / 1e3 / args.steps, 100 * us / all_self))
  print("%-58s %7s %10.2f" % ("(all ops, self)", "", all_self / 1e3 / args.steps))


if __name__ == "__main__":
  main()
