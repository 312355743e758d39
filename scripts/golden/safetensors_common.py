# The tensors and metadata shared by make_safetensors_golden.py and
# check_safetensors.py, and mirrored by tests/io/safetensors_test.cc
# (ExpectedGoldenTensors). Keep the three in sync.
import numpy as np

METADATA = {
    "global_step": "1234",
    "model_name": "lenet",
    "note": 'quote " backslash \\ newline \n tab \t unicode \u00e9\u4e2d \U0001f600',
}


def golden_tensors():
    return {
        "a/f64": (np.arange(6, dtype=np.float64) * 0.5 - 1.0).reshape(2, 3),
        "a/f32": (np.arange(6, dtype=np.float32) * 0.25 - 0.75).reshape(3, 2),
        "f16": np.array([0.5, -1.5, 65504.0, 2.0 ** -14], dtype=np.float16),
        "i64": np.array([[-(2 ** 40), -1], [0, 2 ** 40 + 3]], dtype=np.int64),
        "i32": np.array([-7, 0, 2 ** 31 - 1], dtype=np.int32),
        "i16": np.array([-32768, 32767], dtype=np.int16),
        "i8": np.array([-128, 127], dtype=np.int8),
        "u8": np.array([[0, 1], [254, 255]], dtype=np.uint8),
        "bool": np.array([True, False, True], dtype=np.bool_),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
