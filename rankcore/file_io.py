"""Whole-file writes that a reader never sees half done.

In rankcore because components and pipelines both write artifacts and reports this way.
"""

from __future__ import annotations

import os
import uuid

import tensorflow as tf


def write_text_atomic(path: str, text: str) -> None:
    """Writes `text` to `path` (local or any tf.io.gfile filesystem) through a temporary file in
    the same directory and a rename, creating the directory if needed: a crash leaves the old
    file or none, never a truncated one."""
    tf.io.gfile.makedirs(os.path.dirname(path) or ".")
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write(text)
        tf.io.gfile.rename(tmp, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
