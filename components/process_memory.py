"""What a finished component leaves in memory, handed back before the next one runs.

`rankpipe run` (TFX's LocalDagRunner) runs every component in one Python process, one after
the other; on Kubeflow each runs in its own pod, where this changes nothing. A component's
models (Keras layers, their tf.functions and traces, tf.data pipelines) sit in reference cycles
that Python frees only at a full collection of its generational collector, which large objects
alone do not trigger: each Trainer of `rankpipe run cranfield` left 0.4 to 1.1 GB behind it,
so the process grew from 4.5 GB in the first of its six Trainers to 7.6 GB in the last
(docs/speed.md "Memory"). And glibc's malloc keeps memory a component freed in its heap and
arenas rather than returning it to the system.

`released_after` wraps an executor's `Do`: when it returns or fails, a full collection, then
glibc's `malloc_trim(0)` (through ctypes: no library exposes it; on another C library the
collection alone). Both run on what the component no longer references, so its outputs and
the process's own state are untouched.

A full collection traverses every object the collector tracks, and after TensorFlow, Beam and
TFX are imported that is about 0.9 million objects that are never garbage: about 0.5 s per
collection on 2 cores, before a component adds its own. `frozen_heap` (around the local DAG
run) moves what is alive before the run into the permanent generation (`gc.freeze`), which no
collection traverses, and back when the run ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

_log = logging.getLogger(__name__)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, None elsewhere (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release() -> int:
    """A full collection, then the freed heap handed back to the system; returns the number
    of unreachable objects the collection found."""
    found = gc.collect()
    if _TRIM is not None:
        _TRIM(0)
    return found


def released_after(do: F) -> F:
    """`do` (an executor's Do) followed by `release()`, whether it returns or raises."""

    @functools.wraps(do)
    def wrapped(*args: object, **kwargs: object) -> object:
        try:
            return do(*args, **kwargs)
        finally:
            found = release()
            _log.debug("released %d unreachable objects after %s", found, do.__qualname__)

    return wrapped  # type: ignore[return-value]


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """While the block runs, the objects alive when it starts (after a full collection, so no
    garbage among them) are out of every collection's reach (gc.freeze); afterwards they are
    collectable again (gc.unfreeze), so a process that runs several pipelines (the tests) does
    not keep what an earlier one dropped. What the block creates is collected as before."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
