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
        if kind == "refuse":
            raise GemmlabError("bad input", "fix it")
        if kind == "bug":
            raise ValueError("boom")
        if kind == "poison":   # a sticky CUDA error: answer, then a fresh process
            self.poisoned = True
            return "poisoned"
        raise AssertionError(kind)


class FakeGpu:
    """Stands in for worker.GpuJobs on a CPU: a made-up H100; variants named oob crash, named hang
    hang, named slow take 2 ms, named drift 1 ms + 0.1 ms per request this worker has had, others 1 ms.
    With $FAKEGPU_LOG set, each request's name is appended to that file."""

    def __init__(self, shape, seed, fp64_check, dtype="fp32", phase=None):
        self.shape, self.seed, self.poisoned, self.requests = shape, seed, False, 0

    def info(self):
        from gemmlab.device import DeviceInfo
        dev = DeviceInfo(0, "Fake H100", (9, 0), 132, 1980000, 2619000, 5120, 50 << 20, 80 << 30, 48 << 10,
                         227 << 10, 228 << 10, 65536, 2048, "13.0", "13.0")
        return {"device": dev, "seed": self.seed}

    def handle(self, request):
        from gemmlab.runner import Check, Result, Timing
        self.requests += 1
        if os.environ.get("FAKEGPU_LOG"):
            with open(os.environ["FAKEGPU_LOG"], "a") as log:
                log.write(("cuBLAS" if request[0] == "cublas" else request[1].rendered.variant.name) + "\n")
        if request[0] == "cublas":
            name, params, ms = "cuBLAS", {}, 0.5
        else:
            rendered = request[1].rendered  # a compile.Compiled
            name, params = rendered.variant.name, rendered.params
            if name == "hang":
                time.sleep(3600)
            if name == "oob":
                self.poisoned = True
                return Result(name, params, self.shape, fault="CRASHED", error="the kernel failed: illegal address")
            ms = 2.0 if name == "slow" else 1.0 + 0.1 * (self.requests - 1) if name == "drift" else 1.0
        return Result(name, dict(params), self.shape, check=Check(1e-7, 1e-6, 1e-5, "cupy.matmul"),
                      timing=Timing(ms, ms, ms, 10))
