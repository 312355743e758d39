#!/usr/bin/env bash
# TF-Slim's scripts/finetune_resnet_v1_50_on_flowers.sh: ResNet v1 50 from
# TF-Slim's ImageNet checkpoint (resnet_v1_50_2016_08_28, 1000 classes,
# TensorFlow V1); stage 1 the logits (3000 steps, lr 0.01), stage 2 all
# layers (1000 steps, lr 0.001), rmsprop, evaluation after each. See
# scripts/finetune_on_flowers.sh.
#   scripts/finetune_resnet_v1_50_on_flowers.sh [extra train flags...]
export MODEL_NAME=resnet_v1_50
export CHECKPOINT_URL=${CHECKPOINT_URL:-http://download.tensorflow.org/models/resnet_v1_50_2016_08_28.tar.gz}
export EXCLUDE_SCOPES=resnet_v1_50/logits
export STEPS_1=${STEPS_1:-3000} LR_1=${LR_1:-0.01}
export STEPS_2=${STEPS_2:-1000} LR_2=${LR_2:-0.001}
exec "$(dirname "$0")/finetune_on_flowers.sh" "$@"
