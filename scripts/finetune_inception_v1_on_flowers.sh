#!/usr/bin/env bash
# TF-Slim's scripts/finetune_inception_v1_on_flowers.sh: Inception v1 from
# TF-Slim's ImageNet checkpoint (inception_v1_2016_08_28, TensorFlow V1) to
# the 5 flower classes; stage 1 the logits (3000 steps, lr 0.01), stage 2
# all layers (1000 steps, lr 0.001), rmsprop, evaluation after each. See
# scripts/finetune_on_flowers.sh for the settings it takes.
#   scripts/finetune_inception_v1_on_flowers.sh [extra train flags...]
export MODEL_NAME=inception_v1
export CHECKPOINT_URL=${CHECKPOINT_URL:-http://download.tensorflow.org/models/inception_v1_2016_08_28.tar.gz}
export EXCLUDE_SCOPES=InceptionV1/Logits
export STEPS_1=${STEPS_1:-3000} LR_1=${LR_1:-0.01}
export STEPS_2=${STEPS_2:-1000} LR_2=${LR_2:-0.001}
exec "$(dirname "$0")/finetune_on_flowers.sh" "$@"
