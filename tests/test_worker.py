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


def test_the_time_limit_must_be_positive():
    with pytest.raises(GemmlabError):
        Isolated("handlers:Echo", ("t",), timeout=0)
