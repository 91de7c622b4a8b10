"""The two things a rank's schedule runs on: NCCL (through cupy.cuda.nccl, or NVIDIA's nccl4py where a
schedule moves its data with the copy engines) and CUDA streams and events.

The executor (gemmlab/multigpu/execute.py) sees only these small interfaces, so the CPU tests run every
schedule on numpy with stand-ins (tests/dist_fakes.py): threads for ranks, queues for streams.

Comm:     allgather(send, recv, stream), reduce_scatter(send, recv, stream),
          exchange(sends, recvs, stream)   grouped send/recv: lists of (array, peer)
          allreduce_max(x, stream)          in place, on a small array
          symmetric(shape, dtype)           (CopyEngineNccl only) an array in a symmetric window
          barrier(stream)          (CopyEngineNccl only, NCCL >= 2.29) every rank's earlier work done
          pull_all(recvs, stream)  (CopyEngineNccl only, NCCL >= 2.29.2) copies out of the others' windows:
                                   recvs is a list of (array in a window, peer)
Runtime:  xp, compute, comm (streams); on(stream) (launches inside go to it); record(stream) -> event;
          record(stream, timing=True) an event that elapsed(a, b) reads: ms from event a to event b;
          wait(stream, event); fill(x, v), add(dst, src) and evict(buf) on the current stream; synchronize();
          write_value(stream, flags, i, v)  flags[i] = v (uint32) in stream order, by the stream itself
"""

from __future__ import annotations

import contextlib
import ctypes
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


# ---------------------------------------------------------------------------- the copy engines

COPY_ENGINES_HINT = ('pip install "gemmlab[dist]" (NVIDIA\'s nccl4py, with cuda-core 1.x and NCCL 2.28 or newer); '
                     "the other schedules run without it")


def copy_engines_missing() -> str | None:
    """Why NCCL's copy-engine collectives cannot be reached from here (None: they can): they need
    nccl4py, whose communicator takes a config (the zero-CTA policy) and registers windows."""
    try:
        import nccl.core  # noqa: F401
    except Exception as e:  # ImportError, or a wheel that does not load (a missing libnccl, an old cuda-core)
        return f"nccl4py is not importable ({type(e).__name__}: {e})"
    return None


# What an arrival step's transport other than the all-gather needs (gemmlab/multigpu/schedule.py TRANSPORTS):
# the pulls' barrier (ncclSignal, ncclWaitSignal) came in NCCL 2.29.0, a peer's address of a symmetric window
# (ncclGetPeerDevicePointer) in 2.29.2
TRANSPORT_NEEDS = {"pulls": (22902, "ncclGetPeerDevicePointer")}
TRANSPORT_HINT = ('pip install "nvidia-nccl-cu13>=2.29.2" (or put a libnccl.so.2 of 2.29.2 or newer in LD_PRELOAD), '
                  "with nccl4py 0.6 or newer; allgather_arrival moves the same rows with all-gathers")
PULLS_COPY_ENV = "GEMMLAB_PULLS_COPY"  # "each": one cudaMemcpyAsync per peer instead of one batch a chunk


def _release(version: int) -> str:
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"


def transport_missing(transport: str) -> str | None:
    """Why an arrival step's `transport` cannot move rows from here (None: it can): every one needs the
    copy engines (nccl4py); "pulls" NCCL's one-sided calls too (TRANSPORT_NEEDS) and nccl4py's getter of
    a peer's address."""
    if (why := copy_engines_missing()) or transport == "allgather":
        return why
    try:
        version = nccl().get_version()
    except GemmlabError as e:  # no GPU, or no NCCL for cupy
        return e.message
    least, call = TRANSPORT_NEEDS[transport]
    if version < least:
        return f"this process loaded NCCL {_release(version)}, which has no {call} ({_release(least)} and later)"
    return _peer_pointers_missing()


def _peer_pointers_missing() -> str | None:
    """nccl4py wraps ncclGetPeerDevicePointer as RegisteredWindowHandle.get_peer_device_pointer (0.6)."""
    try:
        from nccl.core.resources import RegisteredWindowHandle
    except ImportError as e:
        return f"nccl4py has no RegisteredWindowHandle ({e})"
    if not hasattr(RegisteredWindowHandle, "get_peer_device_pointer"):
        return "this nccl4py does not wrap ncclGetPeerDevicePointer (get_peer_device_pointer: nccl4py 0.6 and later)"
    return None


class CopyEngineNccl(Nccl):
    """A communicator made with NCCL's zero-CTA policy, through nccl4py. NCCL (2.28 and later) runs an
    all-gather on the copy engines, with no kernel and so no SM, when both of its buffers lie in windows
    registered as symmetric (`symmetric` makes them); any other call runs NCCL's kernels as usual, so
    this communicator serves a whole job. On one host only: across hosts NCCL uses its kernels."""

    copy_engines = True

    def __init__(self, world: int, uid, rank: int):
        import nccl.core as nc
        self.lib = nccl()  # cupy's module, for get_version(): the same libnccl
        self.nc, self.world, self.rank = nc, world, rank
        raw = bytes(b & 0xFF for b in uid) if not isinstance(uid, (bytes, bytearray)) else bytes(uid)
        self.comm = nc.Communicator.init(world, rank, nc.UniqueId.from_bytes(raw),
                                         nc.NCCLConfig(cta_policy=nc.CTAPolicy.ZERO))
        self.windows = []
        self._pulls = {}  # a pull_all's recvs -> its copies' arguments, made once

    def symmetric(self, shape, dtype):
        """Zeros of `shape` in memory from ncclMemAlloc, registered as a symmetric window (collective:
        every rank allocates the same buffers in the same order)."""
        import math
        from nccl.core.interop.cupy import empty
        xp = cuda()
        nbytes = math.prod(shape) * xp.dtype(dtype).itemsize
        raw = empty((max(nbytes, 1),), dtype=xp.uint8)
        window = self.comm.register_window(raw, self.nc.WindowFlag.COLL_SYMMETRIC)
        if not window.handle:
            raise GemmlabError("NCCL registered no symmetric window on this machine (it needs CUDA peer access "
                               "between all the GPUs and NCCL's cuMem allocations): the all-gather would not run "
                               "on the copy engines", hint="run the schedules with engines = \"sm\" here")
        self.windows.append((window, raw))
        out = raw[:nbytes].view(dtype).reshape(shape)
        out.fill(0)
        return out

    @staticmethod
    def _bytes(x):
        return x.reshape(-1).view(cuda().uint8)

    def _window_of(self, x):
        """(the window holding x, x's offset in it in bytes): the same on every rank for the same buffer."""
        for window, raw in self.windows:
            offset = x.data.ptr - raw.data.ptr
            if 0 <= offset and offset + x.nbytes <= raw.nbytes:
                return window, offset
        raise GemmlabError("a pull into memory outside every symmetric window (a gemmlab bug)")

    def _peers(self):
        return [p for p in range(self.world) if p != self.rank]

    def barrier(self, stream) -> None:
        """A signal to every other rank, then a wait for one from each, in `stream`'s order: stream memory
        operations and 8-byte copies on the copy engines (NCCL 2.29's ncclSignal and ncclWaitSignal), no
        kernel. Every rank's work queued on its stream before this is done when any rank gets past it."""
        nc = self.nc
        nc.group_start()
        try:
            for p in self._peers():
                self.comm.signal(p, stream=stream.ptr)
        finally:
            nc.group_end()
        self.comm.wait_signal([nc.WaitSignalDesc(peer=p) for p in self._peers()], stream=stream.ptr)

    def _peer_address(self, x, peer: int) -> int:
        """Where `peer`'s copy of the place x holds in this rank's window lies, as an address this GPU can
        copy from (ncclGetPeerDevicePointer: NCCL maps every peer's window into each rank's address space
        when the window is registered; no device communicator is needed)."""
        window, offset = self._window_of(x)
        address = window.get_peer_device_pointer(peer, offset)
        if not address:
            raise GemmlabError(f"NCCL cannot reach rank {peer}'s window from rank {self.rank} by load/store (no "
                               "peer mapping between these GPUs): the pulls need one host with CUDA peer access")
        return address

    def pull_all(self, recvs, stream) -> None:
        """For each (x, peer) of `recvs` (x in a symmetric window): the bytes at the same place of `peer`'s
        window copied into x, in `stream`'s order, on the copy engines: by default one cuMemcpyBatchAsync
        for them all (what NCCL's copy-engine all-gather gives the driver: one call, every peer's copy in
        flight at once), with GEMMLAB_PULLS_COPY=each one cudaMemcpyAsync per copy. No signal: whatever
        `stream` queues next (a flag) follows the copies. The caller makes sure the peers' bytes are there
        (one barrier) and that nothing on this rank still reads x."""
        if not recvs:
            return
        key = tuple((x.data.ptr, x.nbytes, peer) for x, peer in recvs)
        if key not in self._pulls:
            _contiguous(*(x for x, _ in recvs))
            self._pulls[key] = _Copies([x.data.ptr for x, _ in recvs],
                                       [self._peer_address(x, peer) for x, peer in recvs],
                                       [x.nbytes for x, _ in recvs])
        self._pulls[key].run(stream)

    def allgather(self, send, recv, stream) -> None:
        _contiguous(send, recv)
        self.comm.allgather(self._bytes(send), self._bytes(recv), stream=stream.ptr)

    def reduce_scatter(self, send, recv, stream) -> None:
        _contiguous(send, recv)
        self.comm.reduce_scatter(send.reshape(-1), recv.reshape(-1), self.nc.SUM, stream=stream.ptr)

    def exchange(self, sends, recvs, stream) -> None:
        if not sends and not recvs:
            return
        _contiguous(*(x for x, _ in sends), *(x for x, _ in recvs))
        self.nc.group_start()
        try:
            for x, peer in sends:
                self.comm.send(self._bytes(x), peer, stream=stream.ptr)
            for x, peer in recvs:
                self.comm.recv(self._bytes(x), peer, stream=stream.ptr)
        finally:
            self.nc.group_end()

    def allreduce_max(self, x, stream) -> None:
        self.comm.allreduce(x, x, self.nc.MAX, stream=stream.ptr)

    def close(self) -> None:
        self.comm.destroy()  # deregisters the windows first


class _Copies:
    """Device-to-device copies queued together on a stream (pull_all's), their arguments made once so that
    a repetition only queues them."""

    def __init__(self, dsts: list[int], srcs: list[int], sizes: list[int]):
        self.dsts, self.srcs, self.sizes = dsts, srcs, sizes
        self.each = os.environ.get(PULLS_COPY_ENV, "batch") == "each"
        if not self.each:
            from ..gpu.driver import bindings
            drv = self.drv = bindings()
            if not hasattr(drv, "cuMemcpyBatchAsync"):
                raise GemmlabError("cuda-bindings has no cuMemcpyBatchAsync (CUDA 12.8 and later)",
                                   hint=f"pip install -U cuda-bindings, or {PULLS_COPY_ENV}=each")
            attrs = drv.CUmemcpyAttributes()
            # the sources read in stream order (after the barrier); the copy engines, not SMs, preferred
            attrs.srcAccessOrder = drv.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
            attrs.flags = drv.CUmemcpyFlags.CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE
            self.args = ([drv.CUdeviceptr(d) for d in dsts], [drv.CUdeviceptr(s) for s in srcs], list(sizes),
                         len(sizes), [attrs], [0], 1)

    def run(self, stream) -> None:
        if self.each:
            rt = cuda().cuda.runtime
            for d, s, n in zip(self.dsts, self.srcs, self.sizes):
                rt.memcpyAsync(d, s, n, rt.memcpyDefault, stream.ptr)
            return
        drv = self.drv
        err = drv.cuMemcpyBatchAsync(*self.args, drv.CUstream(stream.ptr))[0]  # CUDA 12.x: (err, failIdx)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise GemmlabError(f"cuMemcpyBatchAsync failed: {err}", hint=f"{PULLS_COPY_ENV}=each copies one by one")


_WRITE_VALUE = []


def _write_value32():
    """The driver's cuStreamWriteValue32 (its _v2, which needs no opt-in to stream memory operations;
    CUDA 11.7 and later), through ctypes: cupy does not wrap it."""
    if not _WRITE_VALUE:
        lib = ctypes.CDLL("libcuda.so.1")
        f = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        f.restype = ctypes.c_int
        _WRITE_VALUE.append(f)
    return _WRITE_VALUE[0]


SPIN_SOURCE = r'''
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
'''
HOG_BLOCKS_PER_SM, HOG_THREADS = 2, 1024  # 2048 threads: an SM's whole thread capacity, so no other block fits


class Cuda:
    """Streams and events of one rank's GPU: `compute` for the GEMMs, `comm` for NCCL beside them."""

    def __init__(self):
        self.xp = cupy = cuda()
        self.compute = cupy.cuda.Stream(non_blocking=True)
        self.comm = cupy.cuda.Stream(non_blocking=True)
        self._spin = cupy.RawKernel(SPIN_SOURCE, "spin")

    def on(self, stream):
        return stream  # a cupy Stream is the context manager that makes it current

    def record(self, stream, timing: bool = False):
        """An event recorded on `stream`. Only an event with `timing` keeps a timestamp (an event without one
        is cheaper to record and to wait for: what ordering the streams needs)."""
        e = self.xp.cuda.Event(disable_timing=not timing)
        e.record(stream)
        return e

    def elapsed(self, a, b) -> float:
        """Milliseconds from event a to event b: both recorded with timing and both done, on any streams
        of this GPU."""
        return self.xp.cuda.get_elapsed_time(a, b)

    def wait(self, stream, event) -> None:
        stream.wait_event(event)

    def fill(self, x, value) -> None:
        x.fill(value)

    def add(self, dst, src) -> None:
        self.xp.add(dst, src, out=dst)

    def evict(self, buf) -> None:
        """Read `buf` (larger than L2) on the current stream: L2 holds clean lines of it afterwards."""
        from ..gpu.bench import evict_l2
        evict_l2(buf)

    def write_value(self, stream, flags, index: int, value: int) -> None:
        """flags[index] = value, when `stream` gets there: a stream memory operation (cuStreamWriteValue32),
        done by the GPU's front end with no kernel, so it runs while another kernel holds every SM. Its
        default flags order it after the stream's earlier work and its writes (a memory barrier first)."""
        if not 0 <= index < flags.size or flags.dtype != self.xp.uint32:
            raise GemmlabError(f"flag {index} of a {flags.dtype} array of {flags.size} (a gemmlab bug)")
        err = _write_value32()(ctypes.c_void_p(stream.ptr), ctypes.c_uint64(flags.data.ptr + 4 * index),
                               ctypes.c_uint32(value & 0xFFFFFFFF), ctypes.c_uint(0))
        if err:
            raise GemmlabError(f"cuStreamWriteValue32 failed: CUresult {err}")

    def synchronize(self) -> None:
        """Wait for everything on this GPU (the streams are non-blocking: the default stream does not
        order them, so nothing is left to it)."""
        self.xp.cuda.Device().synchronize()

    def spin(self, stream, ns: int) -> None:
        """Keep `stream` busy for `ns` nanoseconds: the host queues a repetition's work meanwhile, so its
        timing holds no gaps where the GPU waited for Python."""
        with stream:
            self._spin((1,), (1,), (self.xp.uint64(ns),))

    def hog(self, stream, ns: int) -> None:
        """Fill every SM for `ns` nanoseconds (the spin kernel, as many threads as each SM holds): work
        that needs an SM meanwhile waits for it to end (`--measure`: does a transfer need SMs?)."""
        sms = self.xp.cuda.Device().attributes["MultiProcessorCount"]
        with stream:
            self._spin((HOG_BLOCKS_PER_SM * sms,), (HOG_THREADS,), (self.xp.uint64(ns),))

    @contextlib.contextmanager
    def timed(self, stream, out: list):
        """Append the milliseconds between entering and leaving, as `stream` runs them (CUDA events)."""
        start, end = self.xp.cuda.Event(), self.xp.cuda.Event()
        start.record(stream)
        yield
        end.record(stream)
        end.synchronize()
        out.append(self.xp.cuda.get_elapsed_time(start, end))
