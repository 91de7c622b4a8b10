"""The two things a rank's schedule runs on: NCCL (through cupy.cuda.nccl) and CUDA streams and events.

The executor (gemmlab/multigpu/execute.py) sees only these small interfaces, so the CPU tests run every
schedule on numpy with stand-ins (tests/dist_fakes.py): threads for ranks, queues for streams.

Comm:     allgather(send, recv, stream), reduce_scatter(send, recv, stream),
          exchange(sends, recvs, stream)   grouped send/recv: lists of (array, peer)
          allreduce_max(x, stream)          in place, on a small array
Runtime:  xp, compute, comm (streams); on(stream) (launches inside go to it); record(stream) -> event;
          wait(stream, event); fill(x, v) and add(dst, src) on the current stream; synchronize()
"""

from __future__ import annotations

import contextlib
import os

from ..errors import GemmlabError
from ..gpu.driver import cuda


def keep_multicast_off() -> None:
    """NVLink multicast (NVLS) stays off: on shared machines a program that uses it can take the host's
    GPUs out of service. Set before NCCL starts, in every process (spawned ones inherit it)."""
    os.environ["NCCL_NVLS_ENABLE"] = "0"


def nccl():
    keep_multicast_off()
    cuda()
    from cupy.cuda import nccl as lib
    if not lib.available:
        raise GemmlabError("NCCL is not available to cupy", hint='pip install "nvidia-nccl-cu13"')
    return lib


def unique_id() -> bytes:
    return nccl().get_unique_id()


def _contiguous(*arrays) -> None:
    for x in arrays:
        if not x.flags.c_contiguous:
            raise GemmlabError("NCCL moves contiguous arrays only (a gemmlab bug: a strided view reached it)")


class Nccl:
    """One rank's NCCL communicator. Inputs are moved as bytes (their type does not matter to a copy);
    the reduce-scatter sums FP32."""

    def __init__(self, world: int, uid: bytes, rank: int):
        self.lib = lib = nccl()
        self.world, self.rank = world, rank
        self.comm = lib.NcclCommunicator(world, uid, rank)

    def allgather(self, send, recv, stream) -> None:
        _contiguous(send, recv)
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.nbytes, self.lib.NCCL_UINT8, stream.ptr)

    def reduce_scatter(self, send, recv, stream) -> None:
        _contiguous(send, recv)
        self.comm.reduceScatter(send.data.ptr, recv.data.ptr, recv.size, self.lib.NCCL_FLOAT32,
                                self.lib.NCCL_SUM, stream.ptr)

    def exchange(self, sends, recvs, stream) -> None:
        """Grouped point-to-point: every send and receive of one step, as one NCCL group (so that a rank
        that sends and receives cannot wait on itself)."""
        if not sends and not recvs:
            return
        _contiguous(*(x for x, _ in sends), *(x for x, _ in recvs))
        self.lib.groupStart()
        try:
            for x, peer in sends:
                self.comm.send(x.data.ptr, x.nbytes, self.lib.NCCL_UINT8, peer, stream.ptr)
            for x, peer in recvs:
                self.comm.recv(x.data.ptr, x.nbytes, self.lib.NCCL_UINT8, peer, stream.ptr)
        finally:
            self.lib.groupEnd()

    def allreduce_max(self, x, stream) -> None:
        kinds = {"float32": self.lib.NCCL_FLOAT32, "float64": self.lib.NCCL_FLOAT64}
        self.comm.allReduce(x.data.ptr, x.data.ptr, x.size, kinds[str(x.dtype)], self.lib.NCCL_MAX, stream.ptr)

    def allgather_values(self, values, stream):
        """Each rank's list of floats (all of one length), as a ranks x length host array."""
        cupy = cuda()
        mine = cupy.asarray(values, dtype=cupy.float64)
        every = cupy.empty((self.world, mine.size), dtype=cupy.float64)
        self.allgather(mine, every, stream)
        stream.synchronize()
        return cupy.asnumpy(every)

    def close(self) -> None:
        self.comm.destroy()


SPIN_SOURCE = r'''
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
'''


class Cuda:
    """Streams and events of one rank's GPU: `compute` for the GEMMs, `comm` for NCCL beside them."""

    def __init__(self):
        self.xp = cupy = cuda()
        self.compute = cupy.cuda.Stream(non_blocking=True)
        self.comm = cupy.cuda.Stream(non_blocking=True)
        self._spin = cupy.RawKernel(SPIN_SOURCE, "spin")

    def on(self, stream):
        return stream  # a cupy Stream is the context manager that makes it current

    def record(self, stream):
        e = self.xp.cuda.Event(disable_timing=True)
        e.record(stream)
        return e

    def wait(self, stream, event) -> None:
        stream.wait_event(event)

    def fill(self, x, value) -> None:
        x.fill(value)

    def add(self, dst, src) -> None:
        self.xp.add(dst, src, out=dst)

    def synchronize(self) -> None:
        """Wait for everything on this GPU (the streams are non-blocking: the default stream does not
        order them, so nothing is left to it)."""
        self.xp.cuda.Device().synchronize()

    def spin(self, stream, ns: int) -> None:
        """Keep `stream` busy for `ns` nanoseconds: the host queues a repetition's work meanwhile, so its
        timing holds no gaps where the GPU waited for Python."""
        with stream:
            self._spin((1,), (1,), (self.xp.uint64(ns),))

    @contextlib.contextmanager
    def timed(self, stream, out: list):
        """Append the milliseconds between entering and leaving, as `stream` runs them (CUDA events)."""
        start, end = self.xp.cuda.Event(), self.xp.cuda.Event()
        start.record(stream)
        yield
        end.record(stream)
        end.synchronize()
        out.append(self.xp.cuda.get_elapsed_time(start, end))
