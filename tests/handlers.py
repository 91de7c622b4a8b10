"""Worker handlers for test_worker: each request kind misbehaves in one way a kernel can."""

import os
import time

from gemmlab.errors import GemmlabError


class Echo:
    def __init__(self, tag, phase=None):
        if tag == "refuse":
            raise GemmlabError("no GPU here", "a hint")
        self.tag, self.phase, self.poisoned = tag, phase, False

    def info(self):
        return {"pid": os.getpid(), "tag": self.tag}

    def handle(self, request):
        kind = request[0]
        if kind == "echo":
            return request[1]
        if kind == "die":      # gone without a word, as after a segfault
            os._exit(3)
        if kind == "hang":     # a kernel that never ends
            time.sleep(3600)
        if kind == "ticks":    # slow, but it keeps saying so
            for _ in range(request[1]):
                self.phase("tick")
                time.sleep(0.2)
            return "done"
        if kind == "expect":   # announces a long step, then takes it
            self.phase("long step", request[1])
            time.sleep(request[1])
            return "done"
        if kind == "overrun":  # announces a long step, then takes longer (seconds: announced, taken)
            self.phase("long step", request[1])
            time.sleep(request[2])
            return "done"
        if kind == "refuse":
            raise GemmlabError("bad input", "fix it")
        if kind == "bug":
            raise ValueError("boom")
        if kind == "poison":   # a sticky CUDA error: answer, then a fresh process
            self.poisoned = True
            return "poisoned"
        raise AssertionError(kind)


def passing_check():
    """A Check that passed, whichever fields runner.Check has (its rewrite renames them)."""
    import dataclasses
    from gemmlab.results.check import Check
    values = dict(rel_err=1e-7, max_abs_err=1e-6, tol=1e-5, reference="cupy.matmul")
    return Check(**{f.name: values[f.name] for f in dataclasses.fields(Check) if f.name in values})


class FakeGpu:
    """Stands in for worker.GpuJobs on a CPU: a made-up H100; variants named oob crash, named hang
    hang, named slow take 2 ms, named drift 1 ms + 0.1 ms per request this worker has had, named swept
    64 / TILE ms, others 1 ms (cuBLAS 0.5 ms; the references of --refs: cuBLASLt 0.4 ms, Triton 0.6 ms, or
    skipped, as a missing package is, where $FAKEGPU_MISSING names them). As runner.Problem does, it refuses
    a kernel built for another input type than the worker's. A problem other than GEMM (gemmlab/problems/)
    has its cupy reference in cuBLAS's place, at 0.5 ms, and its rows' bandwidth against a copy of 3 TB/s;
    as gpu.problems.ProblemRun does, it refuses a kernel of another problem. With $FAKEGPU_LOG set, each
    request's name is appended to that file.
    Selected for the whole CLI with $GEMMLAB_GPU_JOBS=handlers:FakeGpu (the `fake_gpu` fixture)."""

    COPY_GBS = 3000.0

    def __init__(self, shape, seed, fp64_check, dtype="fp32", problem=None, out_dtype="fp32", phase=None):
        self.shape, self.seed, self.dtype, self.poisoned, self.requests = shape, seed, dtype, False, 0
        self.problem = problem and problem["name"]

    def info(self):
        from gemmlab.gpu.device import DeviceInfo
        dev = DeviceInfo(0, "Fake H100", (9, 0), 132, 1980000, 2619000, 5120, 50 << 20, 80 << 30, 48 << 10,
                         227 << 10, 228 << 10, 65536, 2048, "13.0", "13.0")
        return {"device": dev, "seed": self.seed}

    def handle(self, request):
        from gemmlab.results.model import Result, Timing
        self.requests += 1
        if request[0] == "bandwidth":
            return 3.0e12
        if os.environ.get("FAKEGPU_LOG"):
            with open(os.environ["FAKEGPU_LOG"], "a") as log:
                log.write((("cupy" if self.problem else "cuBLAS") if request[0] == "cublas"
                           else request[1] if request[0] == "ref"
                           else request[1].compiled.rendered.variant.name) + "\n")
        if request[0] == "ref":
            from gemmlab.gpu.references import Skipped
            name = request[1]
            if name in os.environ.get("FAKEGPU_MISSING", "").split(","):
                return Skipped(name, f"the package behind {name} is not installed")
            ms = {"cuBLASLt": 0.4, "Triton": 0.6}[name]
            return Result(name, {}, self.shape, dtype=self.dtype, check=passing_check(), timing=Timing(ms, ms, ms, 10),
                          compile_ms=1234.0)
        if request[0] == "cublas":
            name, params, ms = "cupy" if self.problem else "cuBLAS", {}, 0.5
        else:
            rendered = request[1].compiled.rendered  # a kernel.Kernel
            name, params = rendered.variant.name, rendered.params
            if self.problem and rendered.variant.problem != self.problem:  # as gpu.problems.ProblemRun.run
                raise GemmlabError(f"variant '{name}' computes {rendered.variant.problem}, not {self.problem}")
            if rendered.variant.dtype(params) != self.dtype:  # as gpu.problem.Problem.run
                raise GemmlabError(f"variant '{name}' with DTYPE={rendered.variant.dtype(params)} cannot run on "
                                   f"{self.dtype} inputs")
            if name == "hang":
                time.sleep(3600)
            if name == "oob":
                self.poisoned = True
                return Result(name, params, self.shape, dtype=self.dtype, fault="CRASHED",
                              error="the kernel failed: illegal address")
            if name == "wrong":  # a real verdict of the check on a C with one 16 x 16 tile of zeros
                import numpy as np
                from gemmlab.results import check
                ref = np.ones((64, 64), np.float32)
                C = ref.copy()
                C[32:48, 16:32] = 0
                return Result(name, dict(params), self.shape, dtype=self.dtype,
                              check=check.verdict(np, C, ref, np.full_like(ref, 1e-3), "cupy.matmul", (16, 16)))
            ms = 2.0 if name == "slow" else 1.0 + 0.1 * (self.requests - 1) if name == "drift" else 1.0
            if name == "swept":  # faster with a larger TILE
                ms = 64.0 / params["TILE"]
        result = Result(name, dict(params), self.shape, dtype=self.dtype, check=passing_check(),
                        timing=Timing(ms, ms, ms, 10))
        if self.problem:  # the bandwidth numbers of gpu.problems.ProblemRun's rows
            from gemmlab import problems
            moved = problems.get(self.problem).moved(self.shape)
            gbs = moved / (ms * 1e-3) / 1e9
            result.flops = problems.get(self.problem).ops(self.shape)
            result.extra = {"problem": self.problem, "bytes": moved, "gbs": gbs, "pct_copy": 100 * gbs / self.COPY_GBS,
                            "copy_gbs": self.COPY_GBS}
        return result


class StubProblem:
    """gpu.problem.Problem without cupy: a kernel named oob faults (as an illegal address does), others pass."""

    def __init__(self, shape, seed=None, fp64_check=False, dtype="fp32", out_dtype="fp32"):
        self.shape, self.seed, self.dtype, self.device = shape, seed, dtype, "stub device"

    def run(self, kernel, reps, timed=True, phase=None):
        from gemmlab.results.model import Result, Timing
        variant, params = kernel.variant, kernel.params
        if variant.name == "oob":
            return Result(variant.name, dict(params), self.shape, fault="CRASHED",
                          error="the kernel failed: an illegal memory access was encountered")
        return Result(variant.name, dict(params), self.shape, check=passing_check(), timing=Timing(1.0, 1.0, 1.0, reps))


class StubbedGpuJobs:
    """worker.GpuJobs itself, the real handler, on StubProblem: what it does after a job, in a worker."""

    def __new__(cls, *args, **kwargs):
        import gemmlab.gpu.problem
        from gemmlab.worker import GpuJobs
        gemmlab.gpu.problem.Problem = StubProblem  # GpuJobs imports it when it is made: in this worker process only
        return GpuJobs(*args, **kwargs)
