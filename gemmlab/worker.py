"""Run the GPU side in a child process, so that a kernel that crashes or hangs cannot take the session,
or the results measured so far, with it.

Why a process: a CUDA fault such as an illegal address is sticky. It poisons the process's CUDA
context, and every later CUDA call in that process fails. A kernel that never ends cannot be stopped
from inside the process that launched it either. So the parent (the CLI) never touches the GPU. It
starts one worker, which makes the inputs once and then runs jobs one by one. When a kernel faults, the
worker sends the result marked CRASHED and exits; when a job makes no progress for `timeout` seconds,
the parent kills the worker and marks the job TIMEOUT. The next job gets a fresh worker with the same
seed, so the same inputs.

The protocol is generic (a handler class named by its import path), so it is tested on a CPU with
handlers that crash and hang on purpose; `GpuJobs` is the real one.

    with Isolated("gemmlab.worker:GpuJobs", (shape, seed, fp64_check, dtype), timeout=60) as w:
        info = w.start()                     # {"device": DeviceInfo, "seed": ...}
        result = w.call(("run", configure(variant, params, "sm_90"), 10, True))
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass

from .errors import GemmlabError
from .procs import adopt, context

# CUDA does not survive fork: the child is forked from a forkserver that never touched CUDA (procs.py).
_ctx = context()
SETUP_TIMEOUT_S = 120.0  # the least limit for starting a worker and for cuBLAS (library loading)
GPU_JOBS = "gemmlab.worker:GpuJobs"
# Tests set this to a stand-in for GpuJobs (tests/handlers.py:FakeGpu): then `run`, `compare`, `sweep`
# and `suite` go through the whole of their flow, worker process included, on a machine without a GPU.
GPU_JOBS_ENV = "GEMMLAB_GPU_JOBS"


@dataclass
class Fault(Exception):
    """A job that took its worker down: kind is CRASHED or TIMEOUT."""
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


# ---------------------------------------------------------------------------- the child

def _leave() -> None:
    """End the worker without the interpreter's teardown: after a CUDA fault, cupy's destructors would
    fail on the dead context and print tracebacks into the user's terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def visible_device(gpu: int, env=None) -> str:
    """What CUDA_VISIBLE_DEVICES is for a worker on the `gpu`-th GPU this process sees: that entry of the
    parent's own list where it has one, else the index."""
    env = os.environ if env is None else env
    seen = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not seen:
        return str(gpu)
    if gpu >= len(seen):
        raise GemmlabError(f"GPU {gpu} is not one of the {len(seen)} that CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} shows")
    return seen[gpu]


def _child(conn, handler_path: str, setup: tuple, environ: dict, visible: str | None = None) -> None:
    # Ctrl-C is the parent's to handle: it stops the run and kills this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    adopt(environ)
    if visible is not None:  # this worker's GPU is the only one it sees (set before CUDA starts here)
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    try:
        _serve(conn, handler_path, setup)
    finally:
        _leave()


def _serve(conn, handler_path: str, setup: tuple) -> None:
    def phase(text: str, expect_s: float = 0.0):
        conn.send(("phase", text, expect_s))

    try:
        module, name = handler_path.split(":")
        handler = getattr(importlib.import_module(module), name)(*setup, phase=phase)
        conn.send(("done", handler.info(), False))
    except GemmlabError as e:
        conn.send(("error", e.message, e.hint))
        return
    except BaseException:
        conn.send(("fault", f"the worker failed to start:\n{traceback.format_exc()}"))
        return
    while True:
        request = conn.recv()
        if request is None:
            return
        try:
            value = handler.handle(request)
        except GemmlabError as e:
            conn.send(("error", e.message, e.hint))
            continue
        except BaseException:
            conn.send(("fault", traceback.format_exc()))
            return
        poisoned = bool(getattr(handler, "poisoned", False))
        conn.send(("done", value, poisoned))
        if poisoned:  # the handler says its CUDA context is gone: a fresh process for the next job
            return


# ---------------------------------------------------------------------------- the parent

class Isolated:
    """One worker process at a time, restarted after a fault. `on_phase(text)` sees the worker's
    progress ("compile", "check", "time 40 reps")."""

    def __init__(self, handler_path: str, setup: tuple, timeout: float = 60.0, on_phase=None, gpu: int | None = None):
        """`gpu`: the worker runs on that GPU of this host alone (default: the current one)."""
        if not timeout > 0:
            raise GemmlabError(f"the time limit must be positive, not {timeout}")
        if handler_path == GPU_JOBS:
            handler_path = os.environ.get(GPU_JOBS_ENV) or handler_path
        self.handler_path, self.setup, self.timeout = handler_path, setup, float(timeout)
        self.on_phase = on_phase or (lambda text: None)
        self.gpu, self.visible = gpu, visible_device(gpu) if gpu is not None else None
        self.proc = None
        self.conn = None
        self.info = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:  # an error or Ctrl-C here: do not wait for the job in flight
            self.kill()

    def start(self):
        """Start a worker if none runs; return what its handler's info() said."""
        if self.proc is not None and self.proc.is_alive():
            return self.info
        self._reap()
        parent, child = _ctx.Pipe()
        self.proc = _ctx.Process(target=_child, daemon=True,
                                 args=(child, self.handler_path, self.setup, dict(os.environ), self.visible))
        self.proc.start()
        child.close()  # so that the worker's death reads as EOF here
        self.conn = parent
        self.on_phase("start a worker process")
        # Importing cupy and creating a context on a cold machine can take a while: not the user's limit.
        self.info = self._wait("starting the worker", max(self.timeout, SETUP_TIMEOUT_S))
        return self.info

    def call(self, request, timeout: float | None = None):
        """The handler's answer to `request`; GemmlabError as the handler raised it; Fault when the
        worker crashed or made no progress for `timeout` seconds (default: the worker's limit). The
        worker is gone after a Fault, and the next call starts another."""
        self.start()
        self.conn.send(request)
        return self._wait("the job", timeout or self.timeout)

    def _wait(self, what: str, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.conn.poll(left):
                self.kill()
                raise Fault("TIMEOUT", f"{what} made no progress for {timeout:g} s; the worker was "
                                       "killed (raise the limit with --timeout)")
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                code = self._reap()
                raise Fault("CRASHED", f"the worker process died during {what}"
                                       + (f" (exit code {code})" if code is not None else "")) from None
            kind = msg[0]
            if kind == "phase":  # progress: the clock starts again, with room for what the worker expects
                self.on_phase(msg[1])
                deadline = time.monotonic() + timeout + 2 * msg[2]
            elif kind == "done":
                if msg[2]:
                    self._reap()
                return msg[1]
            elif kind == "error":
                if self.proc is not None and not self.proc.is_alive():
                    self._reap()
                raise GemmlabError(msg[1], msg[2])
            else:  # "fault": the worker reported why, and exits
                self._reap()
                raise Fault("CRASHED", msg[1])

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        self._reap()

    def _reap(self) -> int | None:
        """Wait for the worker to be gone (its GPU context with it) and forget it."""
        code = None
        if self.proc is not None:
            self.proc.join(10)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
            code = self.proc.exitcode
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None
        return code

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
        self._reap()


# ---------------------------------------------------------------------------- the GPU handler

class GpuJobs:
    """Runs in the worker: one set of inputs (Problem), then cuBLAS or a variant per request.

    Requests: ("bandwidth",), ("occupancy",), ("pcie", sizes, reps), ("cublas", reps), ("ref", name, reps) and ("run", kernel, reps, timed),
    where `kernel` is a kernel.Kernel: the parent renders and compiles (no GPU needed), the worker
    loads the cubin."""

    def __init__(self, shape, seed, fp64_check, dtype="fp32", problem=None, out_dtype="fp32", phase=None):
        """`problem`: None for GEMM, else {"name": a problem of gemmlab/problems/, "inputs": the input set
        to time (None: its first)}. `out_dtype`: GEMM's C type."""
        self.phase = phase or (lambda text, expect_s=0.0: None)
        self.phase("make the inputs and the reference")
        if problem:
            from . import problems
            from .gpu.problems import ProblemRun
            self.problem = ProblemRun(shape, seed, problems.get(problem["name"]), problem.get("inputs"))
        else:
            from .gpu.problem import Problem
            self.problem = Problem(shape, seed, fp64_check=fp64_check, dtype=dtype, out_dtype=out_dtype)
        self.poisoned = False

    def info(self) -> dict:
        return {"device": self.problem.device, "seed": self.problem.seed}

    def handle(self, request):
        if request[0] == "occupancy":  # bandwidth against forced warps per SM
            from .gpu.occupancy import measure
            return measure(self.phase)
        if request[0] == "pcie":  # host <-> device copies: ("pcie", sizes, reps) -> (rows, NVML's link)
            from .gpu import pcie
            rows = pcie.measure(request[1], request[2], phase=self.phase)
            return rows, pcie.link()  # read just after the copies: an idle link may sit at a lower generation
        if request[0] == "bandwidth":  # for the roofline: device-to-device copy, bytes/s
            from .gpu.device import measure_copy_bandwidth
            self.phase("measure the copy bandwidth")
            return measure_copy_bandwidth()
        if request[0] == "cublas":
            self.phase("cuBLAS")
            return self.problem.cublas(request[1])
        if request[0] == "ref":  # ("ref", name, reps): a reference row beside cuBLAS's, or why there is none
            from .gpu import references
            if not hasattr(self.problem, "verify"):
                raise GemmlabError("--refs adds GEMM references: this problem has none")
            return references.measure(self.problem, request[1], request[2], self.phase)
        _, kernel, reps, timed = request
        result = self.problem.run(kernel, reps, timed=timed, phase=self.phase)
        self.poisoned = result.fault is not None
        return result
