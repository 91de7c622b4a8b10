"""`gemmlab pcie`: the copy rate between host and GPU, host to device (H2D) and device to host (D2H),
from pageable host memory (numpy's) and from pinned (page-locked, cupy.cuda.alloc_pinned_memory),
over sizes from 1 KB to 1 GB, against the rate of the PCIe link the GPU sits on.

A copy from pageable memory goes through a pinned staging buffer of the driver's, so it pays a host
memcpy beside the DMA; a pinned one is the DMA alone. Each copy is timed with CUDA events around it on
one stream, after warm-up copies, and the median of the repetitions is kept.

The link's rate: NVML's PCIe generation and width (the most the GPU and the system allow), each
generation's per-lane transfer rate less its line encoding (8b/10b for generations 1 and 2, 128b/130b
for 3 to 5). It is the ceiling of the bits on the wire: packet headers take more, so no copy reaches it
whole. Without NVML (the optional `nvidia-ml-py`) the rate is unknown.

The arithmetic (the sizes, the link's rate, the plateau from 1 MB up) is plain Python, tested on a
CPU; `link` asks NVML and `measure` copies, in the worker process.
"""

from __future__ import annotations

import re
import statistics

from ..errors import GemmlabError

UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}  # binary: 1 KB = 1024 bytes
# Transfer rate of one lane in GT/s (one bit per transfer and lane), by PCIe generation.
GT_PER_LANE = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PLATEAU_FROM = 1 << 20  # the plateau: the median rate of the sizes from 1 MB up
GOAL_PCT = 90.0  # issue 44: the pinned plateau within 10% of the link's rate
DIRECTIONS = ("H2D", "D2H")
MEMORIES = ("pageable", "pinned")


def parse_size(text: str) -> int:
    """Bytes from `4096`, `1KB`, `64 MB`, `1GB` (binary units); a clear error otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?B)?\s*", str(text), re.I)
    if not m or int(m.group(1)) < 1:
        raise GemmlabError(f"'{text}' is not a size: give bytes, or a number with KB, MB or GB (1 KB = 1024 bytes)")
    return int(m.group(1)) * UNITS[(m.group(2) or "B").upper()]


def size_text(n: int) -> str:
    """The largest unit that divides n: `1 KB`, `256 MB`, `1 GB`, `1000 B`."""
    for unit in ("GB", "MB", "KB"):
        if n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]} {unit}"
    return f"{n} B"


def sizes(smallest: int, largest: int, factor: int) -> list[int]:
    """smallest, smallest x factor, ... up to largest, which must be one of them."""
    if factor < 2:
        raise GemmlabError(f"the size factor must be 2 or more, not {factor}")
    if largest < smallest:
        raise GemmlabError(f"the largest size ({size_text(largest)}) is below the smallest ({size_text(smallest)})")
    out = [smallest]
    while out[-1] < largest:
        out.append(out[-1] * factor)
    if out[-1] != largest:
        raise GemmlabError(f"{size_text(largest)} is not {size_text(smallest)} times a power of {factor}",
                           hint=f"the sizes go {', '.join(size_text(n) for n in out[-3:])}")
    return out


def encoding(gen: int) -> float:
    """The share of the wire's bits that carry data: 8b/10b up to generation 2, 128b/130b from 3."""
    return 8 / 10 if gen <= 2 else 128 / 130


def link_rate(gen: int, width: int) -> float:
    """Bytes per second in each direction of a PCIe link of this generation and width."""
    if gen not in GT_PER_LANE or gen > 5:  # generation 6 frames its data in FEC-protected flits instead
        raise GemmlabError(f"gemmlab does not know the rate of PCIe generation {gen}",
                           hint="add it to GT_PER_LANE in gemmlab/gpu/pcie.py")
    if width < 1:
        raise GemmlabError(f"a PCIe link of width {width} carries nothing")
    return GT_PER_LANE[gen] * 1e9 * width * encoding(gen) / 8


def link_doc(found: dict | None) -> dict:
    """What a result says of the link: NVML's numbers and the rate (None, with why, where unknown)."""
    if not found:
        return {"rate_gbs": None, "why": "NVML is not available (pip install nvidia-ml-py)"}
    doc = dict(found)
    try:
        doc["rate_gbs"] = link_rate(found["max_gen"], found["max_width"]) / 1e9
        doc["how"] = (f"PCIe gen {found['max_gen']} x{found['max_width']}: {GT_PER_LANE[found['max_gen']]:g} GT/s "
                      f"x {found['max_width']} lanes x {'8/10' if found['max_gen'] <= 2 else '128/130'} / 8")
    except GemmlabError as e:
        doc.update(rate_gbs=None, why=e.message)
    return doc


def rows_with_link(rows: list[dict], rate_gbs: float | None) -> list[dict]:
    """Each measured row with its GB/s and its % of the link's rate."""
    return [dict(r, gbs=r["bytes"] / (r["ms"] * 1e-3) / 1e9,
                 pct_link=None if not rate_gbs else 100 * r["bytes"] / (r["ms"] * 1e-3) / 1e9 / rate_gbs)
            for r in rows]


def plateau(rows: list[dict], rate_gbs: float | None, start: int = PLATEAU_FROM) -> list[dict]:
    """Per direction and memory: the median GB/s of the sizes from `start` up, its % of the link's rate,
    and whether that is within 10% of it (None where the rate is unknown)."""
    out = []
    for direction in DIRECTIONS:
        for memory in MEMORIES:
            got = [r["gbs"] for r in rows if r["direction"] == direction and r["memory"] == memory
                   and r["bytes"] >= start]
            if not got:
                continue
            gbs = statistics.median(got)
            pct = 100 * gbs / rate_gbs if rate_gbs else None
            out.append({"direction": direction, "memory": memory, "from_bytes": start, "sizes": len(got),
                        "gbs": gbs, "pct_link": pct, "within_10pct": None if pct is None else pct >= GOAL_PCT})
    return out


def link() -> dict | None:
    """NVML's PCIe generation and width for the current GPU: the most the GPU and the system allow, and
    the current ones (a link idles at a lower generation; read this just after the copies). None
    without NVML."""
    try:
        import cupy
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.Device().pci_bus_id)
        return {"max_gen": pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                "max_width": pynvml.nvmlDeviceGetMaxPcieLinkWidth(h),
                "gen": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                "width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                "bus_id": cupy.cuda.Device().pci_bus_id}
    except Exception:  # no package, no driver, or an NVML that does not know this GPU
        return None


def measure(sizes_: list[int], reps: int = 10, warmup: int = 2, phase=None) -> list[dict]:
    """On the GPU (in a worker): the median ms of each copy, per size, direction and host memory."""
    import numpy as np
    from .driver import cuda
    cupy = cuda()
    phase = phase or (lambda text, expect_s=0.0: None)
    rt = cupy.cuda.runtime
    top = max(sizes_)
    phase(f"allocate {size_text(top)} on the GPU, pinned and pageable")
    try:
        dev = cupy.empty(top, dtype=cupy.uint8)
        pinned_mem = cupy.cuda.alloc_pinned_memory(top)
    except (MemoryError, cupy.cuda.runtime.CUDARuntimeError) as e:
        raise GemmlabError(f"cannot allocate {size_text(top)} for the copies: {e}", hint="give a smaller --max-size") from None
    pinned = np.frombuffer(pinned_mem, dtype=np.uint8, count=top)
    pageable = np.empty(top, dtype=np.uint8)
    pattern = np.resize(np.arange(251, dtype=np.uint8), top)  # every page touched: no first-touch faults timed
    pinned[:] = pattern
    pageable[:] = pattern
    dev.fill(0)
    stream = cupy.cuda.Stream(non_blocking=True)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    hosts = {"pageable": pageable.ctypes.data, "pinned": pinned_mem.ptr}
    kinds = {"H2D": rt.memcpyHostToDevice, "D2H": rt.memcpyDeviceToHost}
    rows = []
    for n in sizes_:
        for direction in DIRECTIONS:
            for memory in MEMORIES:
                src, dst = (hosts[memory], dev.data.ptr) if direction == "H2D" else (dev.data.ptr, hosts[memory])
                phase(f"{direction} {memory} {size_text(n)}")
                for _ in range(warmup):
                    rt.memcpyAsync(dst, src, n, kinds[direction], stream.ptr)
                stream.synchronize()
                times = []
                for _ in range(reps):
                    start.record(stream)
                    rt.memcpyAsync(dst, src, n, kinds[direction], stream.ptr)
                    end.record(stream)
                    end.synchronize()
                    times.append(cupy.cuda.get_elapsed_time(start, end))
                rows.append({"bytes": n, "size": size_text(n), "direction": direction, "memory": memory,
                             "ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "reps": reps})
    # The device started zeroed: its first bytes must now be the pattern, and bring it back to both buffers.
    probe = min(top, 1 << 20)
    for memory, buf in (("pageable", pageable), ("pinned", pinned)):
        buf[:probe] = 0
        rt.memcpy(hosts[memory], dev.data.ptr, probe, rt.memcpyDeviceToHost)
        if not np.array_equal(buf[:probe], pattern[:probe]):
            raise GemmlabError(f"the copies did not carry the bytes there and back ({memory} host memory): "
                               "their rates would mean nothing")
    return rows
