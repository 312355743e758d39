#!/usr/bin/env python3
"""Learning-rate goldens of the schedules slimtorch takes from PyTorch and
timm: cosine, step and multistep, each with and without the linear warm-up.

Each case steps PyTorch's scheduler (torch.optim.lr_scheduler) once per
training step, as a per-step recipe does, and records the rate of every
step (param_groups[0]['lr'] before the step's scheduler.step()), and timm's
scheduler (step_update(t), t_in_epochs=False, warmup_prefix=True) for the
same steps; the two must agree with each other before anything is written.
Where they differ by design (PyTorch's cosine goes back up after T_max;
timm holds lr_min) the case uses the one whose meaning slimtorch takes.
The options are slimtorch's: 1000 examples an epoch, batches of 10, so an
epoch is 100 steps.

Regenerate from the repository root (needs torch and timm from PyPI; CI
never runs it):
  /opt/tvenv/bin/python scripts/golden/gen_schedule_goldens.py
Writes tests/golden/schedule_goldens.inc.
"""

import os

import timm
import timm.scheduler
import torch
from torch.optim import lr_scheduler as sched

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/opt/tvenv/bin/python scripts/golden/gen_schedule_goldens.py"
STEPS_PER_EPOCH = 100
NUM_STEPS = 420


def optimizer(lr):
  return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def torch_rates(make, lr, steps=NUM_STEPS):
  opt = optimizer(lr)
  s = make(opt)
  rates = []
  for _ in range(steps):
    rates.append(opt.param_groups[0]["lr"])
    opt.step()
    s.step()
  return rates


def timm_rates(make, lr, steps=NUM_STEPS):
  opt = optimizer(lr)
  s = make(opt)
  rates = []
  for t in range(steps):
    s.step_update(t)
    rates.append(opt.param_groups[0]["lr"])
  return rates


def agree(a, b, upto, label):
  for t in range(upto):
    if abs(a[t] - b[t]) > 1e-12 + 1e-9 * abs(b[t]):
      raise SystemExit("%s: torch and timm differ at step %d: %r %r" %
                       (label, t, a[t], b[t]))


def cases():
  out = []
  # cosine: lr 0.1 to 0.001 over 3 epochs (300 steps), then held (timm).
  lr, end, T = 0.1, 0.001, 300
  a = torch_rates(lambda o: sched.CosineAnnealingLR(o, T_max=T, eta_min=end), lr)
  b = timm_rates(lambda o: timm.scheduler.CosineLRScheduler(
      o, t_initial=T, lr_min=end, t_in_epochs=False), lr)
  agree(a, b, T + 1, "cosine")
  out.append(dict(label="cosine", decay_type="cosine", lr=lr, end=end,
                  factor=0.94, epochs_per_decay=3.0, warmup_epochs=0.0,
                  warmup_lr=0.0, boundaries=[], values=[], rates=b))
  # cosine after a warm-up of half an epoch (50 steps) from 0.001.
  W, start = 50, 0.001
  a = torch_rates(lambda o: sched.SequentialLR(o, [
      sched.LinearLR(o, start_factor=start / lr, end_factor=1.0, total_iters=W),
      sched.CosineAnnealingLR(o, T_max=T, eta_min=end)], milestones=[W]), lr)
  b = timm_rates(lambda o: timm.scheduler.CosineLRScheduler(
      o, t_initial=T, lr_min=end, warmup_t=W, warmup_lr_init=start,
      warmup_prefix=True, t_in_epochs=False), lr)
  agree(a, b, W + T + 1, "cosine_warmup")
  out.append(dict(label="cosine_warmup", decay_type="cosine", lr=lr, end=end,
                  factor=0.94, epochs_per_decay=3.0, warmup_epochs=0.5,
                  warmup_lr=start, boundaries=[], values=[], rates=b))
  # step: x0.5 every 0.3 epochs (30 steps).
  a = torch_rates(lambda o: sched.StepLR(o, step_size=30, gamma=0.5), lr)
  b = timm_rates(lambda o: timm.scheduler.StepLRScheduler(
      o, decay_t=30, decay_rate=0.5, t_in_epochs=False), lr)
  agree(a, b, NUM_STEPS, "step")
  out.append(dict(label="step", decay_type="step", lr=lr, end=0.0001,
                  factor=0.5, epochs_per_decay=0.3, warmup_epochs=0.0,
                  warmup_lr=0.0, boundaries=[], values=[], rates=a))
  # step after a warm-up of 0.25 epochs (25 steps) from 0.
  W = 25
  a = torch_rates(lambda o: sched.SequentialLR(o, [
      sched.LinearLR(o, start_factor=1e-30, end_factor=1.0, total_iters=W),
      sched.StepLR(o, step_size=30, gamma=0.5)], milestones=[W]), lr)
  b = timm_rates(lambda o: timm.scheduler.StepLRScheduler(
      o, decay_t=30, decay_rate=0.5, warmup_t=W, warmup_lr_init=0.0,
      warmup_prefix=True, t_in_epochs=False), lr)
  agree(a[1:], b[1:], NUM_STEPS - 1, "step_warmup")
  out.append(dict(label="step_warmup", decay_type="step", lr=lr, end=0.0001,
                  factor=0.5, epochs_per_decay=0.3, warmup_epochs=0.25,
                  warmup_lr=0.0, boundaries=[], values=[], rates=b))
  # multistep: x0.1 at epochs 1 and 2.5 (steps 100 and 250). PyTorch's
  # MultiStepLR only: timm's MultiStepLRScheduler applies milestone m at
  # step m - 1 (its "historical convention", said in its source), one step
  # before PyTorch's, which slimtorch follows; checked here as a shift.
  a = torch_rates(lambda o: sched.MultiStepLR(o, milestones=[100, 250],
                                              gamma=0.1), lr)
  b = timm_rates(lambda o: timm.scheduler.MultiStepLRScheduler(
      o, decay_t=[101, 251], decay_rate=0.1, t_in_epochs=False), lr)
  agree(a, b, NUM_STEPS, "multistep (timm one milestone later)")
  out.append(dict(label="multistep", decay_type="multistep", lr=lr,
                  end=0.0001, factor=0.1, epochs_per_decay=2.0,
                  warmup_epochs=0.0, warmup_lr=0.0, boundaries=[1.0, 2.5],
                  values=[], rates=a))
  # multistep after 1 epoch of warm-up from 0.01 (torchvision's ResNet
  # recipe's shape: LinearLR then MultiStepLR, milestones counted after).
  W = 100
  a = torch_rates(lambda o: sched.SequentialLR(o, [
      sched.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=W),
      sched.MultiStepLR(o, milestones=[100, 250], gamma=0.1)],
      milestones=[W]), lr)
  b = timm_rates(lambda o: timm.scheduler.MultiStepLRScheduler(
      o, decay_t=[101, 251], decay_rate=0.1, warmup_t=W, warmup_lr_init=0.01,
      warmup_prefix=True, t_in_epochs=False), lr)
  agree(a, b, NUM_STEPS, "multistep_warmup (timm one milestone later)")
  out.append(dict(label="multistep_warmup", decay_type="multistep", lr=lr,
                  end=0.0001, factor=0.1, epochs_per_decay=2.0,
                  warmup_epochs=1.0, warmup_lr=0.01, boundaries=[1.0, 2.5],
                  values=[], rates=a))
  # fixed after a warm-up of 0.4 epochs from 0.02: LinearLR alone.
  W = 40
  a = torch_rates(lambda o: sched.LinearLR(o, start_factor=0.2,
                                           end_factor=1.0, total_iters=W), lr)
  out.append(dict(label="fixed_warmup", decay_type="fixed", lr=lr,
                  end=0.0001, factor=0.94, epochs_per_decay=2.0,
                  warmup_epochs=0.4, warmup_lr=0.02, boundaries=[], values=[],
                  rates=a))
  return out


def cpp_list(xs):
  return "{" + ", ".join(repr(float(x)) for x in xs) + "}"


def main():
  lines = [
      "// Learning rates of PyTorch %s's and timm %s's schedulers, stepped once per"
      % (torch.__version__, timm.__version__),
      "// training step (1000 examples an epoch, batches of 10).",
      "// Generated by scripts/golden/gen_schedule_goldens.py; do not edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "",
      "// Included by tests/train/learning_rate_test.cc after the definition",
      "// of ScheduleGolden.",
      "",
      "const std::vector<ScheduleGolden>& ScheduleGoldens() {",
      "  static const auto* const kGoldens = new std::vector<ScheduleGolden>{",
  ]
  for c in cases():
    lines.append('      {"%s", "%s", %r, %r, %r, %r, %r, %r, %s, %s,' %
                 (c["label"], c["decay_type"], c["lr"], c["end"], c["factor"],
                  c["epochs_per_decay"], c["warmup_epochs"], c["warmup_lr"],
                  cpp_list(c["boundaries"]), cpp_list(c["values"])))
    lines.append("       %s}," % cpp_list(c["rates"]))
  lines += ["  };", "  return *kGoldens;", "}", ""]
  path = os.path.join(REPO, "tests", "golden", "schedule_goldens.inc")
  with open(path, "w") as f:
    f.write("\n".join(lines))
  print("wrote", path)


if __name__ == "__main__":
  main()
