"""Stand-ins for NCCL and CUDA streams, so that every schedule runs on a CPU: one thread per rank, numpy
arrays, and streams as queues that run only when the host synchronises, in the most hostile order their
events allow. `policy="compute"` runs the compute stream as far ahead as it may (a GEMM that does not
wait for its block reads the old one), `policy="comm"` the comm stream (a transfer that does not wait
for the GEMM before it overwrites that GEMM's block): a missing event makes C wrong."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque

import numpy as np

from gemmlab.gpu.problem import from_bf16


class World:
    """What the ranks of one job share: a barrier for collectives, a slot per rank, mailboxes per pair."""

    def __init__(self, ranks: int):
        self.ranks = ranks
        self.barrier = threading.Barrier(ranks, timeout=20)
        self.slots = [None] * ranks
        self.mail = {(a, b): queue.Queue() for a in range(ranks) for b in range(ranks)}
        self.log = []  # (rank, op, bytes sent)
        self.windows = [[] for _ in range(ranks)]  # each rank's symmetric buffers, in the order allocated
        self.signals = {(a, b): 0 for a in range(ranks) for b in range(ranks)}  # (from, to): signals sent
        self.signalled = threading.Condition()


class Event:
    def __init__(self, timing=False):
        self.done, self.timing, self.at = False, timing, None  # at: the runtime's clock when it ran


class FakeRuntime:
    def __init__(self, policy: str = "compute"):
        self.xp = np
        self.compute, self.comm = "compute", "comm"
        self.queues = {"compute": deque(), "comm": deque()}
        self.current = "compute"
        self.order = ["compute", "comm"] if policy == "compute" else ["comm", "compute"]
        self.clock = 0.0  # one "millisecond" per piece of work the streams run: events read it
        self.events = []  # every event recorded, in order

    @contextlib.contextmanager
    def on(self, stream):
        before, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = before

    def enqueue(self, stream, fn) -> None:
        self.queues[stream].append(("run", fn))

    def record(self, stream, timing=False):
        e = Event(timing)
        self.events.append(e)
        self.queues[stream].append(("record", e))
        return e

    def elapsed(self, a, b):
        assert a.timing and b.timing and a.done and b.done, "elapsed() of an event without timing, or not done"
        return b.at - a.at

    def wait(self, stream, event) -> None:
        self.queues[stream].append(("wait", event))

    def until(self, stream, predicate) -> None:
        """The stream goes no further until predicate() holds (a kernel polling memory)."""
        self.queues[stream].append(("until", predicate))

    def write_value(self, stream, flags, index, value) -> None:
        assert flags.dtype == np.uint32 and 0 <= index < flags.size
        self.enqueue(stream, lambda: flags.__setitem__(index, value & 0xFFFFFFFF))

    def fill(self, x, value) -> None:
        self.enqueue(self.current, lambda: x.fill(value))

    def add(self, dst, src) -> None:
        self.enqueue(self.current, lambda: np.add(dst, src, out=dst))

    def evict(self, buf) -> None:
        # reads every byte, as the real flush does; summed as bytes, so no value of the buffer overflows
        self.enqueue(self.current, lambda: buf.view(np.uint8).sum(dtype=np.uint64))

    def synchronize(self) -> None:
        while any(self.queues.values()):
            ready = [s for s in self.order if self.queues[s] and self._can_run(self.queues[s][0])]
            if not ready:
                raise AssertionError("the streams wait on each other: an event is waited for and never recorded")
            kind, x = self.queues[ready[0]].popleft()
            if kind == "run":
                x()
                self.clock += 1.0
            elif kind == "record":
                x.done, x.at = True, self.clock

    @staticmethod
    def _can_run(head) -> bool:
        kind, x = head
        return x.done if kind == "wait" else x() if kind == "until" else True

    def spin(self, stream, ns) -> None:
        pass

    def hog(self, stream, ns) -> None:
        pass

    @contextlib.contextmanager
    def timed(self, stream, out: list):
        yield
        self.synchronize()
        out.append(1.0)


class FakeComm:
    """NCCL's semantics on numpy: collectives meet at a barrier; sends and receives of a pair keep order."""

    def __init__(self, world: World, rank: int, rt: FakeRuntime):
        self.world, self.rank, self.rt = world, rank, rt
        self.waited = {p: 0 for p in range(world.ranks)}  # signals from each rank waited for so far

    def _log(self, op, nbytes):
        self.world.log.append((self.rank, op, nbytes))

    def symmetric(self, shape, dtype):
        """Where NCCL would register a symmetric window: the same allocation on every rank, in order."""
        self.world.log.append((self.rank, "symmetric", 0))
        x = np.zeros(shape, dtype=dtype)
        self.world.windows[self.rank].append(x)
        return x

    def _peers(self):
        return [p for p in range(self.world.ranks) if p != self.rank]

    def _signal(self, peer):
        with self.world.signalled:
            self.world.signals[(self.rank, peer)] += 1
            self.world.signalled.notify_all()

    def _wait_signals(self):
        """ncclWaitSignal for one more signal from every other rank: the stream blocks until they come."""
        for p in self._peers():
            self.waited[p] += 1
        with self.world.signalled:
            assert self.world.signalled.wait_for(
                lambda: all(self.world.signals[(p, self.rank)] >= self.waited[p] for p in self._peers()), 20)

    def barrier(self, stream):
        self._log("barrier", 0)

        def run():
            for p in self._peers():
                self._signal(p)
            self._wait_signals()
        self.rt.enqueue(stream, run)

    def _place(self, x):
        """(the index of the window holding x among this rank's, x's offset in it in bytes): where NCCL finds
        the same place on another rank (the same buffer, allocated in the same order)."""
        mine = self.world.windows[self.rank]
        i = next(i for i, w in enumerate(mine) if np.shares_memory(w, x))
        assert x.flags.c_contiguous
        return i, x.__array_interface__["data"][0] - mine[i].__array_interface__["data"][0]

    def _at(self, rank, i, offset, nbytes):
        """Those bytes of `rank`'s window i."""
        return self.world.windows[rank][i].reshape(-1).view(np.uint8)[offset:offset + nbytes]

    def pulls(self, recvs):
        """What pull_all's copies do when their stream runs them: each (x, peer), the bytes at x's place in
        `peer`'s window copied into x, read as they are at that moment: a pull that the stream runs before
        the peer's rows are there brings whatever is there instead."""
        places = [(x, peer, *self._place(x)) for x, peer in recvs]

        def run():
            for x, peer, i, offset in places:
                x.reshape(-1).view(np.uint8)[...] = self._at(peer, i, offset, x.nbytes)
        return run

    def pull_all(self, recvs, stream):
        pull = self.pulls(recvs)
        self._log("pull", sum(x.nbytes for x, _ in recvs))
        self.rt.enqueue(stream, pull)

    def allgather(self, send, recv, stream):
        def run():
            w = self.world
            w.slots[self.rank] = send.copy()
            w.barrier.wait()
            recv[...] = np.concatenate(w.slots).reshape(recv.shape)
            w.barrier.wait()
        self._log("allgather", (self.world.ranks - 1) * send.nbytes)
        self.rt.enqueue(stream, run)

    def reduce_scatter(self, send, recv, stream):
        def run():
            w = self.world
            w.slots[self.rank] = send.copy()
            w.barrier.wait()
            total = np.sum(w.slots, axis=0, dtype=np.float32)
            recv[...] = total.reshape(w.ranks, *recv.shape)[self.rank]
            w.barrier.wait()
        self._log("reduce_scatter", (self.world.ranks - 1) * recv.nbytes)
        self.rt.enqueue(stream, run)

    def exchange(self, sends, recvs, stream):
        def run():
            for x, peer in sends:
                self.world.mail[(self.rank, peer)].put(x.copy())
            for x, peer in recvs:
                x[...] = self.world.mail[(peer, self.rank)].get(timeout=20)
        assert all(x.flags.c_contiguous for x, _ in list(sends) + list(recvs))
        self._log("exchange", sum(x.nbytes for x, _ in sends))
        self.rt.enqueue(stream, run)

    def allreduce_max(self, x, stream):
        def run():
            w = self.world
            w.slots[self.rank] = x.copy()
            w.barrier.wait()
            x[...] = np.max(w.slots, axis=0)
            w.barrier.wait()
        self.rt.enqueue(stream, run)

    def allgather_values(self, values, stream):
        mine = np.asarray(values, dtype=np.float64)
        every = np.empty((self.world.ranks, mine.size))
        self.allgather(mine, every, stream)
        self.rt.synchronize()
        return every

    def close(self):
        pass


def numpy_gemm(rt: FakeRuntime, dtype: str):
    """gemm(A, B, C): a launch that queues C = A @ B, reading A and B when it runs (not when it is made)."""
    def value(x):
        return from_bf16(x) if dtype == "bf16" else x.astype(np.float32)

    def gemm(A, B, C, arrival=None):
        if arrival is not None:
            return arrival_launch(A, B, C, arrival)
        return lambda: rt.enqueue(rt.current, lambda: np.matmul(value(A), value(B), out=C))

    def arrival_launch(A, B, C, a):
        """What an ARRIVAL kernel does (kernels/lib/arrival.j2): the rank's own pieces at once, then chunk by
        chunk the others' pieces, each after its flag holds the epoch the launch was given."""
        mc, P, r = a.piece_rows, a.ranks, a.rank
        assert A.shape[0] == C.shape[0] == a.rows

        def piece(c, p):
            src, dst = (c * P + p) * mc, (p * a.chunks + c) * mc
            np.matmul(value(A[src:src + mc]), value(B), out=C[dst:dst + mc])

        def launch():
            epoch, stream = a.epoch, rt.current  # the kernel's argument: the epoch when it is launched
            rt.enqueue(stream, lambda: [piece(c, r) for c in range(a.chunks)])
            for c in range(a.chunks if P > 1 else 0):  # one rank: every tile its own, nothing to wait for
                rt.until(stream, lambda c=c: ((int(a.flags[c]) - epoch) & 0xFFFFFFFF) < 1 << 31)
                rt.enqueue(stream, lambda c=c: [piece(c, p) for p in range(P) if p != r])
        return launch
    return gemm


def run_ranks(ranks: int, body, timeout: float = 60.0):
    """body(world, rank) on one thread per rank; the ranks' return values, or the first exception."""
    world, out, errors = World(ranks), [None] * ranks, []

    def main(rank):
        try:
            out[rank] = body(world, rank)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)
            world.barrier.abort()
    threads = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "a rank did not finish"
    return out, world
