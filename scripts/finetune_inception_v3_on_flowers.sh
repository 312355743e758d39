#!/usr/bin/env bash
# TF-Slim's scripts/finetune_inception_v3_on_flowers.sh: Inception v3 from
# TF-Slim's ImageNet checkpoint (inception_v3_2016_08_28, TensorFlow V1);
# stage 1 the logits and auxiliary logits (1000 steps, lr 0.01 fixed),
# stage 2 all layers (500 steps, lr 0.0001 fixed, a log line every 10
# steps), rmsprop, evaluation after each. See scripts/finetune_on_flowers.sh.
#   scripts/finetune_inception_v3_on_flowers.sh [extra train flags...]
export MODEL_NAME=inception_v3
export CHECKPOINT_URL=${CHECKPOINT_URL:-http://download.tensorflow.org/models/inception_v3_2016_08_28.tar.gz}
export EXCLUDE_SCOPES=InceptionV3/Logits,InceptionV3/AuxLogits
export STEPS_1=${STEPS_1:-1000} LR_1=${LR_1:-0.01} DECAY_1=${DECAY_1:-fixed}
export STEPS_2=${STEPS_2:-500} LR_2=${LR_2:-0.0001} DECAY_2=${DECAY_2:-fixed}
export LOG_2=${LOG_2:-10}
exec "$(dirname "$0")/finetune_on_flowers.sh" "$@"
