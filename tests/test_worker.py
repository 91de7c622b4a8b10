"""The worker process (no GPU needed): whatever a job does (dies, hangs, raises, poisons its process),
the parent gets a clear answer and the next job runs in a working process."""

import os
import time

import pytest

from gemmlab.errors import GemmlabError
from gemmlab.worker import Fault, Isolated


@pytest.fixture
def worker():
    with Isolated("handlers:Echo", ("t",), timeout=1.5) as w:
        yield w


def pid(w):
    return w.start()["pid"]


def test_answers_and_keeps_its_process(worker):
    first = pid(worker)
    assert worker.call(("echo", {"a": [1, 2]})) == {"a": [1, 2]}
    assert worker.call(("echo", 7)) == 7
    assert pid(worker) == first != os.getpid()


def test_a_dying_job_is_crashed_and_the_next_runs(worker):
    first = pid(worker)
    with pytest.raises(Fault) as e:
        worker.call(("die",))
    assert e.value.kind == "CRASHED" and "exit code 3" in e.value.message
    assert worker.call(("echo", "again")) == "again"
    assert pid(worker) != first


def test_a_hanging_job_times_out_and_is_killed(worker):
    first = pid(worker)
    t0 = time.monotonic()
    with pytest.raises(Fault) as e:
        worker.call(("hang",))
    assert e.value.kind == "TIMEOUT" and "1.5 s" in e.value.message
    assert time.monotonic() - t0 < 10
    assert worker.call(("echo", 1)) == 1 and pid(worker) != first


def test_progress_keeps_a_slow_job_alive(worker):
    assert worker.call(("ticks", 12)) == "done"  # 2.4 s in all, never 1.5 s without a word
    assert worker.call(("expect", 2.0)) == "done"  # announced as 2 s: allowed


def test_user_errors_pass_through_and_the_worker_stays(worker):
    first = pid(worker)
    with pytest.raises(GemmlabError) as e:
        worker.call(("refuse",))
    assert e.value.message == "bad input" and e.value.hint == "fix it"
    assert pid(worker) == first


def test_a_bug_in_the_job_is_crashed_with_its_traceback(worker):
    with pytest.raises(Fault) as e:
        worker.call(("bug",))
    assert e.value.kind == "CRASHED" and "ValueError: boom" in e.value.message
    assert worker.call(("echo", 2)) == 2


def test_a_poisoned_worker_answers_then_is_replaced(worker):
    first = pid(worker)
    assert worker.call(("poison",)) == "poisoned"
    assert pid(worker) != first


def test_a_worker_that_cannot_start_says_why():
    with Isolated("handlers:Echo", ("refuse",), timeout=5) as w:
        with pytest.raises(GemmlabError, match="no GPU here"):
            w.start()


def test_phases_reach_the_parent():
    seen = []
    with Isolated("handlers:Echo", ("t",), timeout=5, on_phase=seen.append) as w:
        w.call(("ticks", 2))
    assert seen.count("tick") == 2


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_the_time_limit_must_be_positive(timeout):
    with pytest.raises(GemmlabError, match="the time limit must be positive, not"):
        Isolated("handlers:Echo", ("t",), timeout=timeout)


# ---------------------------------------------------------------------------- GpuJobs, the real handler

def _job(name):
    """A request for GpuJobs: its kernel is read for .variant and .params only."""
    from types import SimpleNamespace
    return ("run", SimpleNamespace(variant=SimpleNamespace(name=name), params={"TILE": 8}), 1, True)


def test_gpu_jobs_marks_itself_poisoned_after_a_fault_and_only_then(monkeypatch):
    import gemmlab.gpu.problem
    from gemmlab.results.model import Shape
    from gemmlab.worker import GpuJobs
    from handlers import StubProblem
    monkeypatch.setattr(gemmlab.gpu.problem, "Problem", StubProblem)
    jobs = GpuJobs(Shape(8, 8, 8), 1, False)
    assert jobs.poisoned is False and jobs.info() == {"device": "stub device", "seed": 1}
    assert jobs.handle(_job("tiled")).status == "PASS" and jobs.poisoned is False
    crashed = jobs.handle(_job("oob"))
    assert crashed.status == "CRASHED" and jobs.poisoned is True  # its CUDA context is gone: a new process


def test_the_real_handler_is_replaced_after_a_fault_and_kept_after_a_pass():
    with Isolated("handlers:StubbedGpuJobs", (None, 1, False), timeout=30) as w:
        w.start()
        first = w.proc.pid
        assert w.call(_job("tiled")).status == "PASS"
        assert w.proc is not None and w.proc.pid == first  # a passing job keeps its worker
        assert w.call(_job("oob")).status == "CRASHED"
        assert w.proc is None  # the poisoned worker was reaped at once
        assert w.call(_job("tiled")).status == "PASS" and w.proc.pid != first


def test_the_gpu_handler_can_be_replaced_for_tests(monkeypatch):
    from gemmlab.worker import GPU_JOBS, GPU_JOBS_ENV
    monkeypatch.setenv(GPU_JOBS_ENV, "handlers:Echo")
    assert Isolated(GPU_JOBS, ("t",)).handler_path == "handlers:Echo"
    assert Isolated("handlers:FakeGpu", ("t",)).handler_path == "handlers:FakeGpu"  # only GpuJobs is replaced
    monkeypatch.delenv(GPU_JOBS_ENV)
    assert Isolated(GPU_JOBS, ("t",)).handler_path == "gemmlab.worker:GpuJobs"
