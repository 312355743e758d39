#pragma once
// Slim-like layers: TF-Slim's variable names, TensorFlow's 'SAME'/'VALID'
// padding and initializers, on LibTorch's NCHW layout.
//
// Variable names and layouts (checkpoint keys; do not change):
//   Conv2d:          "weights" [out, in, kh, kw] (TF: [kh, kw, in, out]),
//                    "biases"  [out]
//   FullyConnected:  "weights" [out, in] (TF: [in, out]), "biases" [out]
// A layer's module name is its TF-Slim scope ("conv1"), so the net's
// variables come out as "<NetScope>/conv1/weights".

// One header per layer family; this one includes them all (what a net
// includes).

#include "slimtorch/nets/batch_norm.h"
#include "slimtorch/nets/convolution.h"
#include "slimtorch/nets/fully_connected.h"
#include "slimtorch/nets/initializers.h"
#include "slimtorch/nets/layer_common.h"
#include "slimtorch/nets/layer_cost.h"
#include "slimtorch/nets/lrn.h"
#include "slimtorch/nets/pooling.h"
