"""worker.Isolated's life cycle (no GPU): a worker left normally is told to go and exits cleanly, one
left by an error is killed, the messages of a crash and a hang say what happened, and killing or
closing what is already gone is harmless."""

import pytest

from gemmlab.worker import Fault, Isolated


def test_a_worker_left_normally_exits_by_itself():
    with Isolated("handlers:Echo", ("t",), timeout=10) as w:
        w.start()
        proc = w.proc
        assert proc.daemon is True  # never outlives the CLI
    assert proc.exitcode == 0 and w.proc is None  # asked to go (None), not killed


def test_a_worker_left_by_an_error_is_killed_at_once():
    with pytest.raises(KeyboardInterrupt):
        with Isolated("handlers:Echo", ("t",), timeout=10) as w:
            w.start()
            proc = w.proc
            raise KeyboardInterrupt
    assert proc.exitcode == -9 and w.proc is None


def test_the_messages_of_a_crash_and_a_hang():
    with Isolated("handlers:Echo", ("t",), timeout=1) as w:
        with pytest.raises(Fault) as e:
            w.call(("die",))
        assert (e.value.kind, e.value.message) == ("CRASHED", "the worker process died during the job (exit code 3)")
        assert str(e.value) == "CRASHED: the worker process died during the job (exit code 3)"
        with pytest.raises(Fault) as e:
            w.call(("hang",))
        assert (e.value.kind, e.value.message) == (
            "TIMEOUT", "the job made no progress for 1 s; the worker was killed (raise the limit with --timeout)")
        with pytest.raises(Fault, match="the job made no progress for 0.5 s"):
            w.call(("hang",), timeout=0.5)  # a limit for this call only


def test_killing_or_closing_a_worker_that_is_gone_is_harmless():
    w = Isolated("handlers:Echo", ("t",), timeout=5)
    w.kill()
    w.close()  # none was started
    with pytest.raises(Fault):
        w.call(("die",))
    assert w.proc is None
    w.kill()
    w.close()
    assert w.call(("echo", 1)) == 1  # and a new one starts
    w.close()


class SlowStart:
    """A handler whose set-up never ends (a GPU whose context never comes up)."""

    def __init__(self, *setup, phase=None):
        import time
        time.sleep(3600)


def test_progress_and_a_worker_that_never_starts(monkeypatch):
    import gemmlab.worker
    seen = []
    with Isolated("handlers:Echo", ("t",), timeout=5, on_phase=seen.append) as w:
        w.call(("ticks", 1))
    assert seen == ["start a worker process", "tick"]
    monkeypatch.setattr(gemmlab.worker, "SETUP_TIMEOUT_S", 1.0)  # the least limit for a start: 120 s
    with Isolated("test_isolated:SlowStart", (), timeout=0.5) as w:
        with pytest.raises(Fault) as e:
            w.start()
    assert (e.value.kind, e.value.message) == (
        "TIMEOUT", "starting the worker made no progress for 1 s; the worker was killed (raise the limit with --timeout)")


def test_a_crash_without_an_exit_code_names_none():
    """A pipe that ends with no process behind it (none to reap): no "(exit code ...)" to give."""
    import multiprocessing
    mine, theirs = multiprocessing.Pipe()
    theirs.close()
    w = Isolated("handlers:Echo", ("t",), timeout=1)
    w.conn = mine
    with pytest.raises(Fault) as e:
        w._wait("the job", 1)
    assert (e.value.kind, e.value.message) == ("CRASHED", "the worker process died during the job")


def test_an_announced_step_gets_twice_its_time_and_no_more():
    """1 s announced with a limit of 0.5 s: 0.5 + 2 x 1 = 2.5 s without a word, so 3 s is too long."""
    with Isolated("handlers:Echo", ("t",), timeout=0.5) as w:
        with pytest.raises(Fault, match="the job made no progress for 0.5 s"):
            w.call(("overrun", 1.0, 3.0))


def test_defaults_and_a_worker_that_will_not_exit():
    w = Isolated("handlers:Echo", ("t",))
    assert (w.timeout, w.info, w.proc, w.conn) == (60.0, None, None, None)

    class Stuck:  # a worker process that does not end when asked: waited for 10 s, then killed
        def __init__(self):
            self.joins, self.killed, self.exitcode = [], False, None

        def join(self, timeout=None):
            self.joins.append(timeout)
            if self.killed:
                self.exitcode = -9

        def is_alive(self):
            return not self.killed

        def kill(self):
            self.killed = True
    w.proc = stuck = Stuck()
    assert w._reap() == -9 and stuck.joins == [10, None] and w.proc is None
