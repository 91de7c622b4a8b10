"""A problem other than GEMM on the GPU (gemmlab/problems/ declares each): its inputs, the launch of a
compiled kernel with the arguments its template lists, the check of every element, then the timing,
beside the problem's cupy reference. The same rules as GEMM's run (gpu/problem.py): the output is
poisoned before each checked launch, the inputs sit between fences (NaN for floats, the largest value
for integers) and are guarded, a kernel is checked on every input set before it is timed, and checked
again after, and a kernel that fails is never timed.

Each row also has the problem's bandwidth: the bytes it must move (its declaration's cost model) over
the median time, GB/s, and that as a percentage of the device-to-device copy bandwidth measured when
the worker started: the roofline of a memory-bound kernel.

    run = ProblemRun(Shape(1, 1 << 28, 1), seed, problems.get("reduce"))
    row = run.run(kernel)          # a kernel.Kernel of a variant whose header says problem = "reduce"
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..errors import GemmlabError
from ..results import check as checking
from ..results.model import Result, Shape
from .device import get_device, measure_copy_bandwidth
from .driver import cuda
from .launch import load
from .problem import FENCE, synchronize, time_then_check

REFERENCE = "cupy"  # the reference row's name, for every problem (its source says which call)


def fenced(xp, x):
    """x in a buffer that holds FENCE elements of a fence value on each side: NaN for floats, the type's
    largest value for integers (a histogram counts it into its last bin)."""
    fill = math.nan if x.dtype.kind == "f" else np.iinfo(x.dtype).max
    buf = xp.empty(x.size + 2 * FENCE, dtype=x.dtype)
    buf[:] = fill
    inner = buf[FENCE:FENCE + x.size].reshape(x.shape)
    inner[...] = x
    return inner


class Inputs:
    """One input set of a problem on the GPU: the arrays, fenced, with pristine copies; what y must be."""

    def __init__(self, xp, decl, shape: Shape, seed: int, kind):
        self.kind = kind
        rng = xp.random.default_rng(seed + kind.seed_offset)
        raw = decl.make(xp, shape, rng, kind.kind)
        self.arrays = {name: fenced(xp, a) for name, a in raw.items()}
        self.ref, self.bound = decl.expect(xp, self.arrays, shape, kind.kind)
        self.pristine = {name: a.copy() for name, a in self.arrays.items()}

    def guard(self, xp) -> list[str]:
        """The inputs a launch wrote into (put back, so that no later verdict depends on it)."""
        found = []
        for name, clean in self.pristine.items():
            what = checking.changed(xp, name, self.arrays[name], clean)
            if what:
                found.append(what)
                self.arrays[name][...] = clean
        return found


class ProblemRun:
    """Inputs for one problem and shape on the GPU (the timed set first), its output y, and the copy
    bandwidth of this GPU. `timed`: the name of the input set to time (default the first)."""

    def __init__(self, shape: Shape, seed: int | None, decl, timed: str | None = None, xp=None):
        self.cupy = xp or cuda()
        self.device = get_device() if xp is None else None
        self.decl, self.shape = decl, shape
        self.seed = seed if seed is not None else int.from_bytes(np.random.bytes(4), "little")
        first = decl.input_set(timed)
        self.sets = (first,) + tuple(s for s in decl.input_sets if s != first)
        self.main = self._inputs(self.sets[0])
        self.y = decl.output(self.cupy, shape)
        self._workspace = None
        self.copy_bandwidth = measure_copy_bandwidth() if self.device is not None else None
        synchronize(self.cupy)

    def _inputs(self, kind) -> Inputs:
        try:
            return Inputs(self.cupy, self.decl, self.shape, self.seed, kind)
        except MemoryError:  # cupy's OutOfMemoryError is one
            raise GemmlabError(f"out of GPU memory making the {kind.name} inputs of {self.decl.name} "
                               f"({self.decl.describe(self.shape)})", hint="choose a smaller --size") from None

    def input_sets(self):
        yield self.main
        for kind in self.sets[1:]:
            yield self._inputs(kind)

    def verify(self, launch_on, sets=None) -> checking.Check:
        """Run `launch_on(inputs)()` on a poisoned y for each input set, and judge every element; stop at
        the first set that fails. Inputs a launch wrote into are named, and restored."""
        xp, verdict = self.cupy, None
        for inputs in sets or self.input_sets():
            self.y.fill(self.decl.poison)
            launch_on(inputs)()
            synchronize(xp)
            got = self.y.astype(xp.float64)
            if self.y.dtype.kind != "f":  # an integer output: the poison left was never written
                got = xp.where(self.y == self.decl.poison, xp.nan, got)
            c = checking.verdict(xp, _rows(got), _rows(inputs.ref), _rows(inputs.bound),
                                 self.decl.check_name or self.decl.reference_name, self.decl.tile, inputs.kind.name)
            c.clobbered = inputs.guard(xp)
            if verdict is None or not c.passed:
                verdict = c
            if not c.passed:
                break
        return verdict

    def workspace(self, nbytes: int):
        if self._workspace is None or self._workspace.nbytes < nbytes:
            self._workspace = None
            self._workspace = self.cupy.empty(nbytes, dtype=self.cupy.uint8)
        return self._workspace

    def _extra(self, r: Result) -> None:
        """The bandwidth numbers of a row (only for a passing, timed one)."""
        moved = self.decl.moved(self.shape)
        r.flops = self.decl.ops(self.shape)
        r.extra = {"problem": self.decl.name, "bytes": moved, "gbs": None, "pct_copy": None,
                   "copy_gbs": self.copy_bandwidth / 1e9 if self.copy_bandwidth else None}
        if r.valid_time:
            gbs = moved / (r.valid_time * 1e-3) / 1e9
            r.extra.update(gbs=gbs, pct_copy=100 * gbs * 1e9 / self.copy_bandwidth if self.copy_bandwidth else None)

    def _timed(self, r: Result, launch, min_reps: int, phase, checked=None) -> None:
        """Time `launch`, then check again (`checked`: the launch that leaves its result in y, where the
        timed one does not): a kernel right only on its first launch, or one that wrote into its inputs
        while timed, is caught."""
        time_then_check(self.cupy, r, launch, self.main,
                        lambda: self.verify(lambda inputs: checked or launch, sets=[self.main]), min_reps, phase)

    def cublas(self, min_reps: int = 10) -> Result:
        """The problem's cupy reference on the same inputs (the request keeps GEMM's name)."""
        decl = self.decl

        def on(inputs):
            call = decl.reference(self.cupy, inputs.arrays, self.y)

            def launch():
                got = call()
                if got is not None and got is not self.y and getattr(got, "shape", None) == self.y.shape:
                    self.y[...] = got  # a reference that returns a new array (bincount): what the check reads
            return launch
        r = Result(REFERENCE, {}, self.shape, source=decl.reference_name)
        r.check = self.verify(on)
        if r.check.passed:
            # timed: the call alone (bincount's new array included), not the copy into y the check needs
            self._timed(r, decl.reference(self.cupy, self.main.arrays, self.y), min_reps, None, on(self.main))
        self._extra(r)
        return r

    def run(self, kernel, min_reps: int = 10, timed: bool = True, phase=None) -> Result:
        """Check the kernel on every input set, then (if it passed and `timed`) time it on the first."""
        cupy, s, v, compiled = self.cupy, self.shape, kernel.variant, kernel.compiled
        if v.problem != self.decl.name:
            raise GemmlabError(f"variant '{v.name}' computes {v.problem}, not {self.decl.name}")
        r = Result(v.name, dict(kernel.params), s, resources=compiled.resources,
                   compile_ms=compiled.compile_ms if not compiled.cached else compiled.lookup_ms,
                   cached=compiled.cached, source=str(v.path), user=not v.builtin, dtype=kernel.dtype)
        t0 = time.perf_counter()
        plan = kernel.plan(s.M, s.N, s.K, self.device.sms)
        r.geometry = plan
        unknown = [a for a in plan.args if a not in self.decl.args]
        if unknown:
            raise GemmlabError(f"variant '{v.name}' takes {', '.join(unknown)}, which {self.decl.name} does not "
                               f"provide; it provides: {', '.join(self.decl.args)}")
        if "workspace" in plan.args and not plan.workspace:
            raise GemmlabError(f"variant '{v.name}' takes a workspace but its launch.workspace is 0 bytes")
        if compiled.resources.smem + plan.smem > self.device.smem_optin:
            raise GemmlabError(f"variant '{v.name}' needs {compiled.resources.smem + plan.smem} bytes of shared "
                               f"memory per block; {self.device.name} allows at most {self.device.smem_optin}")
        first = load(compiled, v.entry)
        second = load(compiled, v.second_entry) if plan.reduce_grid else None
        for f in (first, second):
            if f is not None and plan.smem > self.device.smem_per_block:
                f.max_dynamic_shared_size_bytes = plan.smem
        ws = self.workspace(plan.workspace) if plan.workspace else None
        sizes = {k: np.int32(n) for k, n in self.decl.sizes(s).items()}
        if not compiled.cached:
            r.compile_ms = compiled.lookup_ms + (time.perf_counter() - t0) * 1e3

        def on(inputs):
            provide = {**inputs.arrays, "y": self.y, "workspace": ws, **sizes}
            args = tuple(provide[a] for a in plan.args)

            def launch():
                if plan.zero_output:
                    self.y.fill(0)
                if plan.zero_workspace:
                    ws.fill(0)
                first(plan.grid, plan.block, args, shared_mem=plan.smem)
                if second is not None:
                    second(plan.reduce_grid, plan.reduce_block, args, shared_mem=plan.smem)
            return launch

        try:
            r.blocks_per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                first.kernel.ptr, plan.threads, plan.smem)
        except Exception:
            r.blocks_per_sm = None
        cuda_errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
        try:
            if phase:
                phase(f"check {v.name}")
            r.check = self.verify(on)
            if r.check.passed and timed:
                self._timed(r, on(self.main), min_reps, phase)
        except cuda_errors as e:
            r.check = r.timing = None
            r.fault, r.error = "CRASHED", f"the kernel failed: {e}"
        self._extra(r)
        return r


def _rows(a):
    """A 1-D array as one row (the check's element map is of rows and columns)."""
    return a.reshape(1, -1) if a.ndim == 1 else a
