"""worker.GpuJobs, the handler that runs in the worker process on a GPU, with its GPU parts replaced by
recorders (no cupy): each request reaches its call with what the request carried, the progress it
reports is said, and a fault marks the worker poisoned (test_worker: then it is replaced)."""

from types import SimpleNamespace

import pytest

import gemmlab.gpu.device
import gemmlab.gpu.occupancy
import gemmlab.gpu.problem
from gemmlab.worker import GpuJobs


class RecordingProblem:
    made = []

    def __init__(self, *args, **kwargs):
        RecordingProblem.made.append((args, kwargs))
        self.seed, self.device, self.calls = args[1], "recorded device", []

    def cublas(self, *args, **kwargs):
        self.calls.append(("cublas", args, kwargs))
        return "cuBLAS result"

    def run(self, *args, **kwargs):
        self.calls.append(("run", args, kwargs))
        kernel = next(a for a in args if isinstance(a, SimpleNamespace))
        return SimpleNamespace(fault="CRASHED" if kernel.name == "oob" else None)


@pytest.fixture
def jobs(monkeypatch):
    RecordingProblem.made = []
    monkeypatch.setattr(gemmlab.gpu.problem, "Problem", RecordingProblem)
    phases = []
    jobs = GpuJobs("shape", 7, True, "bf16", phase=lambda text, expect_s=0.0: phases.append(text))
    jobs.phases = phases
    return jobs


def kernel(name):
    """What the parent sends: a compiled kernel (read for its rendered variant and parameters)."""
    k = SimpleNamespace(name=name)
    k.rendered = k.compiled = SimpleNamespace(variant=SimpleNamespace(name=name), params={"TILE": 8}, rendered=None)
    k.compiled.rendered = k.rendered
    return k


def test_the_inputs_are_made_as_the_parent_asked(jobs):
    assert RecordingProblem.made == [(("shape", 7), {"fp64_check": True, "dtype": "bf16", "out_dtype": "fp32"})]
    assert jobs.phases == ["make the inputs and the reference"]
    assert jobs.info() == {"device": "recorded device", "seed": 7} and jobs.poisoned is False
    GpuJobs("other", 8, False)  # no phase given: it runs silently, in fp32 by default
    assert RecordingProblem.made[1] == (("other", 8), {"fp64_check": False, "dtype": "fp32", "out_dtype": "fp32"})
    GpuJobs("third", 9, False, "fp16", None, "fp16")  # the setup of a run with --out-dtype fp16 (jobs.setup)
    assert RecordingProblem.made[2] == (("third", 9), {"fp64_check": False, "dtype": "fp16", "out_dtype": "fp16"})


def test_each_request_reaches_its_call(jobs, monkeypatch):
    monkeypatch.setattr(gemmlab.gpu.occupancy, "measure", lambda phase: ("occupancy", phase))
    monkeypatch.setattr(gemmlab.gpu.device, "measure_copy_bandwidth", lambda: 3.0e12)
    assert jobs.handle(("occupancy",)) == ("occupancy", jobs.phase)
    assert jobs.handle(("bandwidth",)) == 3.0e12 and jobs.phases[-1] == "measure the copy bandwidth"
    assert jobs.handle(("cublas", 25)) == "cuBLAS result" and jobs.phases[-1] == "cuBLAS"
    assert jobs.problem.calls == [("cublas", (25,), {})]
    k = kernel("tiled")
    jobs.handle(("run", k, 40, False))
    what, args, kwargs = jobs.problem.calls[-1]
    assert what == "run" and k in args and 40 in args and None not in args  # the kernel as sent (or its parts)
    assert kwargs == {"timed": False, "phase": jobs.phase}
    jobs.handle(("run", k, 10, True))
    assert jobs.problem.calls[-1][2]["timed"] is True


def test_a_fault_poisons_the_worker_and_only_a_fault(jobs):
    assert jobs.handle(("run", kernel("tiled"), 1, True)).fault is None and jobs.poisoned is False
    assert jobs.handle(("run", kernel("oob"), 1, True)).fault == "CRASHED" and jobs.poisoned is True
