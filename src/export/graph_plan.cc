#include "graph_plan.h"

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// Every input of a node is the graph input or the output of an earlier node,
// each value is produced once, and the input and outputs exist.
void CheckGraph(const InferenceGraph& g, const char* what, GraphPlan& p) {
  const int num_values = static_cast<int>(g.values.size());
  auto valid = [&](int v) { return v >= 0 && v < num_values; };
  SLIM_CHECK(valid(g.input), what, " of ", g.scope,
             ": the graph has no input value (id ", g.input, ")");
  SLIM_CHECK(valid(g.logits) && valid(g.predictions), what, " of ", g.scope,
             ": the graph needs both logits and predictions (ids ", g.logits,
             ", ", g.predictions, ")");
  SLIM_CHECK(g.values[g.input].shape.size() == 4 ||
                 g.values[g.input].shape.size() == 5,
             what, " of ", g.scope,
             ": expected NCHW images (NCDHW clips) as the input, got shape ",
             ShapeString(g.values[g.input].shape));
  p.producer.assign(num_values, -1);
  p.consumers.assign(num_values, {});
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    for (int v : n.inputs) {
      SLIM_CHECK(valid(v) && (v == g.input || p.producer[v] >= 0), what,
                 ": node '", n.name, "' (", GraphOpName(n.op), ") reads value ",
                 v,
                 ", which is neither the input nor an earlier node's output");
      p.consumers[v].push_back(static_cast<int>(i));
    }
    SLIM_CHECK(
        valid(n.output) && n.output != g.input && p.producer[n.output] < 0,
        what, ": node '", n.name, "' (", GraphOpName(n.op), ") writes value ",
        n.output,
        ", which is the input, another node's output or out of range");
    p.producer[n.output] = static_cast<int>(i);
  }
  for (int v : {g.logits, g.predictions}) {
    SLIM_CHECK(p.producer[v] >= 0, what, " of ", g.scope, ": output value ", v,
               " is not produced by any node");
  }
  SLIM_CHECK(g.logits != g.predictions, what, " of ", g.scope,
             ": logits and predictions are the same value");
}

// Nodes whose outputs feed neither output (e.g. auxiliary heads) are left
// out: a runtime would hold their weights and compute them for nothing.
void MarkLive(const InferenceGraph& g, GraphPlan& p) {
  std::vector<bool> needed(g.values.size(), false);
  needed[g.logits] = needed[g.predictions] = true;
  p.live.assign(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const GraphNode& n = g.nodes[i];
    if (!needed[n.output]) continue;
    p.live[i] = true;
    for (int v : n.inputs) needed[v] = true;
  }
}

// A batch norm folds into the conv before it only when the conv's output is
// read by that batch norm alone: otherwise the unnormalized value is still
// needed elsewhere. Nor into a conv whose weights are fake-quantized: those
// are quantized as they are, the batch norm applies after (a quantized net's
// recorded convs have theirs folded in already).
void PlanFolds(const InferenceGraph& g, bool fold, GraphPlan& p) {
  p.fold.assign(g.nodes.size(), -1);
  p.folded.assign(g.nodes.size(), false);
  if (!fold) return;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (!p.live[i] || (n.op != GraphOp::kConv && n.op != GraphOp::kConv3d) ||
        n.weights_quant.defined()) {
      continue;
    }
    const std::vector<int>& readers = p.consumers[n.output];
    if (readers.size() != 1 || n.output == g.logits ||
        n.output == g.predictions) {
      continue;
    }
    const GraphNode& next = g.nodes[readers[0]];
    if (next.op != GraphOp::kBatchNorm || next.inputs.size() != 1) continue;
    p.fold[i] = readers[0];
    p.folded[readers[0]] = true;
  }
}

}  // namespace

GraphPlan PlanGraph(const InferenceGraph& g, bool fold_batch_norm,
                    const char* what) {
  GraphPlan p;
  CheckGraph(g, what, p);
  MarkLive(g, p);
  PlanFolds(g, fold_batch_norm, p);
  return p;
}

void CheckInputCount(const char* what, const GraphNode& n) {
  const bool binary = n.op == GraphOp::kAdd || n.op == GraphOp::kMul;
  const size_t want_inputs = n.op == GraphOp::kConcat ? 0 : (binary ? 2 : 1);
  SLIM_CHECK(
      want_inputs == 0 ? !n.inputs.empty() : n.inputs.size() == want_inputs,
      what, ": node '", n.name, "' (", GraphOpName(n.op), ") has ",
      n.inputs.size(), " inputs");
}

void ExpectRank(const char* what, const GraphNode& n,
                const std::vector<int64_t>& shape, size_t rank) {
  SLIM_CHECK(shape.size() == rank, what, ": node '", n.name, "' (",
             GraphOpName(n.op), ") expects a ", rank, "-D input, got shape ",
             ShapeString(shape));
}

ConvShape CheckConvWeights(const char* what, const GraphNode& n,
                           const std::vector<int64_t>& shape) {
  ExpectRank(what, n, shape, 4);
  ConvShape c;
  c.in_channels = shape[1];
  SLIM_CHECK(n.weights.defined() && n.weights.dim() == 4 &&
                 n.weights.size(1) > 0 &&
                 c.in_channels % n.weights.size(1) == 0,
             what, ": node '", n.name,
             "' (Conv) expects weights [out, in / group, kh, kw] with in = ",
             c.in_channels, ", got ",
             n.weights.defined() ? ShapeString(n.weights.sizes().vec())
                                 : std::string("none"));
  c.group = c.in_channels / n.weights.size(1);
  c.out_channels = n.weights.size(0);
  return c;
}

void FoldBatchNorm(const char* what, const GraphNode& n, const GraphNode& bn,
                   torch::Tensor* w, torch::Tensor* b) {
  const int64_t out_channels = w->size(0);
  for (const torch::Tensor* t :
       {&bn.scale, &bn.offset, &bn.mean, &bn.variance}) {
    SLIM_CHECK(t->defined() && t->numel() == out_channels, what,
               ": batch norm '", bn.name, "' after conv '", n.name,
               "': expected ", out_channels, " values per parameter");
  }
  auto d = [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
  };
  const torch::Tensor k = d(bn.scale) / (d(bn.variance) + bn.epsilon).sqrt();
  const torch::Tensor b0 =
      b->defined() ? d(*b) : torch::zeros({out_channels}, torch::kDouble);
  std::vector<int64_t> per_output(w->dim(), 1);
  per_output[0] = -1;
  *w = (d(*w).reshape(w->sizes()) * k.view(per_output)).to(torch::kFloat);
  *b = ((b0 - d(bn.mean)) * k + d(bn.offset)).to(torch::kFloat);
}

void CheckConv3dWeights(const char* what, const GraphNode& n,
                        const std::vector<int64_t>& shape) {
  ExpectRank(what, n, shape, 5);
  SLIM_CHECK(n.weights.defined() && n.weights.dim() == 5 &&
                 n.weights.size(1) == shape[1],
             what, ": node '", n.name,
             "' (Conv3D) expects weights [out, in, kt, kh, kw] with in = ",
             shape[1], ", got ",
             n.weights.defined() ? ShapeString(n.weights.sizes().vec())
                                 : std::string("none"));
  SLIM_CHECK(!n.bias.defined() || n.bias.numel() == n.weights.size(0), what,
             ": node '", n.name, "' (Conv3D): expected ", n.weights.size(0),
             " biases, got ", n.bias.numel());
}

}  // namespace slimtorch
