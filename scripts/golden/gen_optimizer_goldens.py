#!/usr/bin/env python3
"""Optimizer and learning-rate goldens computed by TensorFlow itself.

Runs TF1 optimizers (tf.compat.v1.train.*Optimizer, graph mode, ref
variables, float32) built exactly as TF-Slim's
train_image_classifier._configure_optimizer builds them, for three steps on
two small variables with fixed per-step gradients and learning rates, and
records every variable, slot and non-slot variable after each step. Also
evaluates tf.compat.v1.train.exponential_decay(staircase=True) and
polynomial_decay(power=1.0, cycle=False) at chosen steps, with decay_steps
computed as _configure_learning_rate computes it, in a Session with the
default graph optimizations (grappler turns step / decay_steps into
step * (1 / decay_steps), which moves some staircase boundaries by a step).

Regenerate from the repository root (needs tensorflow-cpu; CI never runs it):
  /opt/tfenv/bin/python scripts/golden/gen_optimizer_goldens.py
Writes tests/golden/optimizer_goldens.inc and
tests/golden/learning_rate_goldens.inc.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/opt/tfenv/bin/python scripts/golden/gen_optimizer_goldens.py"

# train_image_classifier.py flag defaults (optimization section).
DEFAULT_FLAGS = dict(
    adadelta_rho=0.95,
    adagrad_initial_accumulator_value=0.1,
    adam_beta1=0.9,
    adam_beta2=0.999,
    opt_epsilon=1.0,
    ftrl_learning_rate_power=-0.5,
    ftrl_initial_accumulator_value=0.1,
    ftrl_l1=0.0,
    ftrl_l2=0.0,
    momentum=0.9,
    rmsprop_momentum=0.9,
    rmsprop_decay=0.9,
)


def configure_optimizer(name, learning_rate, f):
  """train_image_classifier._configure_optimizer with flags in `f`."""
  if name == "adadelta":
    return tf1.train.AdadeltaOptimizer(
        learning_rate, rho=f["adadelta_rho"], epsilon=f["opt_epsilon"])
  if name == "adagrad":
    return tf1.train.AdagradOptimizer(
        learning_rate,
        initial_accumulator_value=f["adagrad_initial_accumulator_value"])
  if name == "adam":
    return tf1.train.AdamOptimizer(
        learning_rate, beta1=f["adam_beta1"], beta2=f["adam_beta2"],
        epsilon=f["opt_epsilon"])
  if name == "ftrl":
    return tf1.train.FtrlOptimizer(
        learning_rate,
        learning_rate_power=f["ftrl_learning_rate_power"],
        initial_accumulator_value=f["ftrl_initial_accumulator_value"],
        l1_regularization_strength=f["ftrl_l1"],
        l2_regularization_strength=f["ftrl_l2"])
  if name == "momentum":
    return tf1.train.MomentumOptimizer(
        learning_rate, momentum=f["momentum"], name="Momentum")
  if name == "rmsprop":
    return tf1.train.RMSPropOptimizer(
        learning_rate, decay=f["rmsprop_decay"], momentum=f["rmsprop_momentum"],
        epsilon=f["opt_epsilon"])
  if name == "sgd":
    return tf1.train.GradientDescentOptimizer(learning_rate)
  raise ValueError("Optimizer [%s] was not recognized" % name)


# (label, optimizer, non-default flags). One default and at least one
# non-default set per optimizer.
OPTIMIZER_CASES = [
    ("adadelta_default", "adadelta", {}),
    ("adadelta_custom", "adadelta", dict(adadelta_rho=0.8, opt_epsilon=1e-6)),
    ("adagrad_default", "adagrad", {}),
    ("adagrad_custom", "adagrad", dict(adagrad_initial_accumulator_value=0.5)),
    ("adam_default", "adam", {}),
    ("adam_custom", "adam",
     dict(adam_beta1=0.8, adam_beta2=0.99, opt_epsilon=1e-8)),
    ("ftrl_default", "ftrl", {}),
    ("ftrl_l1_l2", "ftrl",
     dict(ftrl_l1=0.05, ftrl_l2=0.1, ftrl_initial_accumulator_value=0.2)),
    ("ftrl_power_0_7", "ftrl",
     dict(ftrl_learning_rate_power=-0.7, ftrl_l1=0.05, ftrl_l2=0.1)),
    ("ftrl_power_0_7_no_reg", "ftrl", dict(ftrl_learning_rate_power=-0.7)),
    ("momentum_default", "momentum", {}),
    ("momentum_custom", "momentum", dict(momentum=0.5)),
    ("rmsprop_default", "rmsprop", {}),
    ("rmsprop_custom", "rmsprop",
     dict(rmsprop_decay=0.8, rmsprop_momentum=0.0, opt_epsilon=1e-3)),
    ("sgd_default", "sgd", {}),
]

VARIABLES = [
    ("LeNet/fc3/weights", np.array([[0.5, -1.0, 1.5], [-2.0, 0.25, 0.0]])),
    ("LeNet/fc3/biases", np.array([0.1, -0.2, 0.3])),
]
# Per step: (learning rate, gradient per variable in VARIABLES order).
STEPS = [
    (0.1, [np.array([[0.1, -0.2, 0.3], [0.0, 0.5, -1.0]]),
           np.array([0.05, 0.0, -0.4])]),
    (0.05, [np.array([[-0.3, 0.1, 0.2], [0.4, -0.5, 0.6]]),
            np.array([0.2, -0.1, 0.0])]),
    (0.025, [np.array([[0.7, 0.0, -0.1], [0.2, 0.3, -0.8]]),
             np.array([-0.3, 0.25, 0.1])]),
]


def f32(a):
  return np.asarray(a, dtype=np.float32)


def run_optimizer_case(optimizer, flags):
  """Returns (initial, steps); state entries are (name, array) sorted by name."""
  graph = tf.Graph()
  with graph.as_default():
    tf1.disable_resource_variables()
    variables = []
    for name, value in VARIABLES:
      scope, leaf = name.rsplit("/", 1)
      with tf1.variable_scope(scope):
        variables.append(tf1.get_variable(leaf, initializer=f32(value)))
    lr = tf1.placeholder(tf.float32, [], name="learning_rate")
    grads = [tf1.placeholder(tf.float32, v.shape) for v in variables]
    opt = configure_optimizer(optimizer, lr, flags)
    train_op = opt.apply_gradients(list(zip(grads, variables)))
    state = {v.op.name: v for v in variables}
    for v in opt.variables():
      state[v.op.name] = v
    for v in variables:
      for slot in opt.get_slot_names():
        assert opt.get_slot(v, slot).op.name in state
    names = sorted(state)
    with tf1.Session(graph=graph) as sess:
      sess.run(tf1.global_variables_initializer())
      initial = list(zip(names, sess.run([state[n] for n in names])))
      steps = []
      for step_lr, step_grads in STEPS:
        feed = {lr: step_lr}
        feed.update({p: f32(g) for p, g in zip(grads, step_grads)})
        sess.run(train_op, feed_dict=feed)
        steps.append(list(zip(names, sess.run([state[n] for n in names]))))
  return initial, steps


def c_float(x):
  s = "%.9g" % float(np.float32(x))
  if "e" not in s and "." not in s and "n" not in s:
    s += ".0"
  return s + "f"


def c_tensor(name, array, indent):
  array = f32(array)
  shape = ", ".join(str(d) for d in array.shape)
  values = ", ".join(c_float(x) for x in array.reshape(-1))
  return '%s{"%s", {%s}, {%s}}' % (" " * indent, name, shape, values)


def c_tensor_list(entries, indent):
  return "{\n" + ",\n".join(c_tensor(n, a, indent + 2) for n, a in entries) + "}"


def header(what):
  return "\n".join([
      "// %s computed by TensorFlow %s (tf.compat.v1, graph mode, float32)." %
      (what, tf.__version__),
      "// Generated by scripts/golden/gen_optimizer_goldens.py; do not edit.",
      "// Regenerate from the repository root:",
      "//   " + COMMAND,
      "",
  ])


def write_optimizer_goldens(path):
  out = [header("TF1 optimizer steps"),
         "// Included by tests/train/optimizer_test.cc after the definitions of",
         "// GoldenTensor, GoldenStep and GoldenCase. `options` lists the",
         "// optimizer parameters (named as the train_image_classifier flags)",
         "// that differ from the defaults; `state` holds every variable, slot and",
         "// non-slot variable after the step, by TensorFlow name.",
         "",
         "const std::vector<GoldenCase>& OptimizerGoldens() {",
         "  static const auto* const kCases = new std::vector<GoldenCase>{"]
  for label, optimizer, overrides in OPTIMIZER_CASES:
    flags = dict(DEFAULT_FLAGS)
    for k in overrides:
      assert k in flags, k
    flags.update(overrides)
    initial, steps = run_optimizer_case(optimizer, flags)
    opts = ", ".join('{"%s", %r}' % (k, v) for k, v in sorted(overrides.items()))
    out.append('      {"%s", "%s",' % (label, optimizer))
    out.append("       /*options=*/{%s}," % opts)
    out.append("       /*initial=*/" + c_tensor_list(initial, 7) + ",")
    out.append("       /*steps=*/{")
    step_lines = []
    for (step_lr, step_grads), state in zip(STEPS, steps):
      grads = [(name, g) for (name, _), g in zip(VARIABLES, step_grads)]
      step_lines.append(
          "           {/*lr=*/%r,\n           /*grads=*/%s,\n"
          "           /*state=*/%s}" %
          (step_lr, c_tensor_list(grads, 12), c_tensor_list(state, 12)))
    out.append(",\n".join(step_lines) + "}},")
  out += ["  };", "  return *kCases;", "}", ""]
  with open(path, "w") as f:
    f.write("\n".join(out))


# (label, decay_type, num_samples_per_epoch, batch_size, num_epochs_per_decay,
#  sync_replicas, replicas_to_aggregate, learning_rate, decay_factor,
#  end_learning_rate, steps)
LR_CASES = [
    ("flowers_exponential", "exponential", 3320, 32, 2.0, False, 1,
     0.01, 0.94, 0.0001,
     [0, 1, 206, 207, 208, 413, 414, 415, 1000, 20700, 100000, 1000000]),
    ("flowers_polynomial", "polynomial", 3320, 32, 2.0, False, 1,
     0.01, 0.94, 0.0001, [0, 1, 100, 103, 206, 207, 208, 5000]),
    ("sync_exponential", "exponential", 3320, 32, 2.0, True, 2,
     0.01, 0.94, 0.0001, [0, 103, 104, 206, 207, 208, 310, 311]),
    ("sync_polynomial", "polynomial", 3320, 32, 2.0, True, 2,
     0.01, 0.94, 0.0001, [0, 1, 51, 103, 104, 200]),
    ("cifar_exponential", "exponential", 50000, 128, 350.0, False, 1,
     0.1, 0.1, 0.0001, [0, 136718, 136719, 273437, 273438, 500000]),
    ("imagenet_polynomial", "polynomial", 1281167, 64, 0.5, False, 1,
     0.045, 0.94, 0.00001, [0, 1, 5003, 5004, 5005, 10008, 10009, 20000]),
    # decay_steps 41: step 41 * float32(1/41) < 1, so TF decays one step late.
    ("reciprocal_exponential", "exponential", 1312, 32, 1.0, False, 1,
     0.01, 0.94, 0.0001, [40, 41, 42, 81, 82, 83, 84]),
    ("reciprocal_polynomial", "polynomial", 1312, 32, 1.0, False, 1,
     0.01, 0.94, 0.0001, [0, 1, 17, 39, 40, 41, 42]),
    ("fixed", "fixed", 3320, 32, 2.0, False, 1,
     0.0123, 0.94, 0.0001, [0, 1, 207, 1000000]),
]


def decay_steps_as_tf_slim(num_samples, batch_size, epochs, sync, replicas):
  """train_image_classifier._configure_learning_rate's decay_steps."""
  decay_steps = int(num_samples * epochs / batch_size)
  if sync:
    decay_steps /= replicas
  return decay_steps


def learning_rate_as_tf_slim(decay_type, lr, step, decay_steps, factor, end):
  if decay_type == "exponential":
    return tf1.train.exponential_decay(
        lr, step, decay_steps, factor, staircase=True,
        name="exponential_decay_learning_rate")
  if decay_type == "fixed":
    return tf.constant(lr, name="fixed_learning_rate")
  if decay_type == "polynomial":
    return tf1.train.polynomial_decay(
        lr, step, decay_steps, end, power=1.0, cycle=False,
        name="polynomial_decay_learning_rate")
  raise ValueError(
      "learning_rate_decay_type [%s] was not recognized" % decay_type)


def write_learning_rate_goldens(path):
  out = [header("TF-Slim learning-rate schedules"),
         "// Included by tests/train/learning_rate_test.cc after the definition",
         "// of LearningRateGolden.",
         "",
         "const std::vector<LearningRateGolden>& LearningRateGoldens() {",
         "  static const auto* const kGoldens = new std::vector<LearningRateGolden>{"]
  for (label, decay_type, num_samples, batch, epochs, sync, replicas, lr,
       factor, end, steps) in LR_CASES:
    decay_steps = decay_steps_as_tf_slim(num_samples, batch, epochs, sync,
                                         replicas)
    graph = tf.Graph()
    with graph.as_default():
      global_step = tf1.placeholder(tf.int64, [], name="global_step")
      rate = learning_rate_as_tf_slim(decay_type, lr, global_step, decay_steps,
                                      factor, end)
      assert rate.dtype == tf.float32
      with tf1.Session(graph=graph) as sess:
        for step in steps:
          value = sess.run(rate, feed_dict={global_step: step})
          out.append(
              '      {"%s", "%s", %d, %d, %r, %s, %d, %r, %r, %r, %r, %d, %s},' %
              (label, decay_type, num_samples, batch, epochs,
               "true" if sync else "false", replicas, lr, factor, end,
               float(decay_steps), step, c_float(value)))
  out += ["  };", "  return *kGoldens;", "}", ""]
  with open(path, "w") as f:
    f.write("\n".join(out))


def main():
  tf1.disable_eager_execution()
  golden_dir = os.path.join(REPO, "tests", "golden")
  write_optimizer_goldens(os.path.join(golden_dir, "optimizer_goldens.inc"))
  write_learning_rate_goldens(
      os.path.join(golden_dir, "learning_rate_goldens.inc"))
  return 0


if __name__ == "__main__":
  sys.exit(main())
