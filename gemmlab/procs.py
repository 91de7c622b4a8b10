"""Worker processes (the compile pools of grid.py, the GPU worker of worker.py), forked from a forkserver.

A forkserver is a fresh process that imports gemmlab's heavy modules once (numpy, NVRTC's binding and
with it cupy); each worker is forked from it and starts in a few milliseconds, where a spawned interpreter
spent 0.2-0.5 s of CPU importing them first (a sweep starts a pool, and every `run` a GPU worker). The
forkserver has no CUDA context (importing cupy makes none) and none of the parent's threads, so for CUDA
a worker forked from it is as fresh as a spawned one. multiprocessing hands each worker the parent's
sys.path and working directory as they are when it starts, but not its environment: the worker has the
forkserver's, from when that started. So each worker is given `os.environ` as it is now and `adopt`s it
first (a notebook or a test may have changed GEMMLAB_CACHE_DIR since). Where there is no forkserver
(Windows), workers are spawned.
"""

from __future__ import annotations

import multiprocessing
import os

PRELOAD = ["numpy", "cupy_backends.cuda.libs.nvrtc", "gemmlab.compile", "gemmlab.worker"]


def context():
    """The multiprocessing context that workers start from."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    forkserver = multiprocessing.get_context("forkserver")
    forkserver.set_forkserver_preload(PRELOAD)  # (a module that fails to import is skipped)
    return forkserver


def adopt(environ: dict) -> None:
    """In a worker: the parent's environment, as it was when the worker was started."""
    os.environ.clear()
    os.environ.update(environ)
