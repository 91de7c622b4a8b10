"""The GPU's facts and its peaks: computed from its attributes, and optionally measured.

The arithmetic (`fp32_peak`, `dram_bandwidth`) is plain Python so it is tested on a CPU; only
`get_device` and the `measure_*` functions touch the GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import GemmlabError
from .driver import cuda

# FP32 lanes (CUDA cores) per SM, by compute capability: the number an SM can issue FFMAs to per clock.
FP32_LANES_PER_SM = {
    (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128, (10, 3): 128, (11, 0): 128, (12, 0): 128, (12, 1): 128,
}

# Dense tensor-core FLOPs per clock per SM with FP32 accumulation, by compute capability and input type
# (NVIDIA's A100 and H100 whitepapers: an H100 SM does 1024 FP16 FMAs per clock, twice A100's).
TENSOR_FLOPS_PER_SM = {
    (8, 0): {"tf32": 1024, "fp16": 2048, "bf16": 2048},
    (9, 0): {"tf32": 2048, "fp16": 4096, "bf16": 4096, "e4m3": 8192, "e5m2": 8192},
}


def tensor_rate(cc: tuple[int, int], dtype: str) -> int:
    rates = TENSOR_FLOPS_PER_SM.get(cc, {})
    if dtype not in rates:
        raise GemmlabError(f"gemmlab does not know the {dtype} tensor-core rate of compute capability "
                           f"{cc[0]}.{cc[1]}", hint="add it to TENSOR_FLOPS_PER_SM in gemmlab/gpu/device.py")
    return rates[dtype]


def fp32_lanes(cc: tuple[int, int]) -> int:
    if cc not in FP32_LANES_PER_SM:
        raise GemmlabError(f"gemmlab does not know how many FP32 lanes an SM of compute capability "
                           f"{cc[0]}.{cc[1]} has", hint="add it to FP32_LANES_PER_SM in gemmlab/gpu/device.py")
    return FP32_LANES_PER_SM[cc]


def fp32_peak(sms: int, lanes: int, clock_khz: int) -> float:
    """FLOP/s: every lane retires one FFMA (2 FLOPs) per clock."""
    return sms * lanes * 2 * clock_khz * 1e3


def dram_bandwidth(mem_clock_khz: int, bus_width_bits: int) -> float:
    """Bytes/s: double data rate, so two transfers of the bus width per memory clock."""
    return 2 * mem_clock_khz * 1e3 * bus_width_bits / 8


@dataclass
class DeviceInfo:
    index: int
    name: str
    cc: tuple[int, int]
    sms: int
    clock_khz: int
    mem_clock_khz: int
    bus_width_bits: int
    l2_bytes: int
    memory_bytes: int
    smem_per_block: int
    smem_optin: int
    smem_per_sm: int
    regs_per_sm: int
    max_threads_per_sm: int
    driver: str
    runtime: str

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def lanes(self) -> int:
        return fp32_lanes(self.cc)

    @property
    def peak_fp32(self) -> float:
        return fp32_peak(self.sms, self.lanes, self.clock_khz)

    def peak(self, dtype: str = "fp32") -> float:
        """FLOP/s for "% of peak": the FP32 lanes for fp32, the dense tensor-core rate for the others."""
        if dtype == "fp32":
            return self.peak_fp32
        return self.sms * tensor_rate(self.cc, dtype) * self.clock_khz * 1e3

    def peaks(self) -> dict[str, float]:
        """Every peak this device has a rate for, FLOP/s by input type."""
        out = {"fp32": self.peak_fp32}
        for dtype in TENSOR_FLOPS_PER_SM.get(self.cc, {}):
            out[dtype] = self.peak(dtype)
        return out

    @property
    def bandwidth(self) -> float:
        return dram_bandwidth(self.mem_clock_khz, self.bus_width_bits)

    def derivation(self) -> list[tuple[str, str, str]]:
        """(quantity, value, how it was obtained) rows for `gemmlab device`."""
        return [
            ("FP32 peak", f"{self.peak_fp32 / 1e12:.1f} TFLOP/s",
             f"{self.sms} SMs x {self.lanes} FP32 lanes/SM ({self.arch}) x 2 FLOP/FFMA x "
             f"{self.clock_khz / 1e3:.0f} MHz"),
            *[(f"{d.upper()} tensor peak", f"{self.peak(d) / 1e12:.0f} TFLOP/s",
               f"{self.sms} SMs x {tensor_rate(self.cc, d)} dense FLOP/clock/SM ({self.arch}) x "
               f"{self.clock_khz / 1e3:.0f} MHz (NVIDIA's datasheets quote the tensor cores at a lower, "
               f"sustained clock)") for d in self.peaks() if d != "fp32"],
            ("DRAM bandwidth", f"{self.bandwidth / 1e12:.2f} TB/s",
             f"2 (DDR) x {self.mem_clock_khz / 1e3:.0f} MHz x {self.bus_width_bits} bit bus / 8"),
        ]

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(arch=self.arch, fp32_lanes_per_sm=self.lanes, peak_fp32_tflops=self.peak_fp32 / 1e12,
                 dram_bandwidth_tbs=self.bandwidth / 1e12,
                 peak_tflops={k: v / 1e12 for k, v in self.peaks().items()})
        return d


_cache: dict[int, DeviceInfo] = {}


def get_device(index: int | None = None) -> DeviceInfo:
    cupy = cuda()
    rt = cupy.cuda.runtime
    index = rt.getDevice() if index is None else index
    if index in _cache:
        return _cache[index]
    props = rt.getDeviceProperties(index)
    attrs = cupy.cuda.Device(index).attributes

    def v(x):
        return x.decode() if isinstance(x, bytes) else x

    drv, run = rt.driverGetVersion(), rt.runtimeGetVersion()
    info = DeviceInfo(
        index=index, name=v(props["name"]), cc=(props["major"], props["minor"]),
        sms=props["multiProcessorCount"],
        clock_khz=props.get("clockRate") or attrs["ClockRate"],
        mem_clock_khz=attrs.get("MemoryClockRate") or props.get("memoryClockRate", 0),
        bus_width_bits=attrs.get("GlobalMemoryBusWidth") or props.get("memoryBusWidth", 0),
        l2_bytes=props["l2CacheSize"], memory_bytes=props["totalGlobalMem"],
        smem_per_block=props["sharedMemPerBlock"], smem_optin=props["sharedMemPerBlockOptin"],
        smem_per_sm=props["sharedMemPerMultiprocessor"], regs_per_sm=props["regsPerMultiprocessor"],
        max_threads_per_sm=props["maxThreadsPerMultiProcessor"],
        driver=f"{drv // 1000}.{drv % 1000 // 10}", runtime=f"{run // 1000}.{run % 1000 // 10}")
    _cache[index] = info
    return info


def measure_copy_bandwidth(nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Device-to-device copy rate, bytes read plus bytes written per second (median of reps)."""
    from .bench import bench
    cupy = cuda()
    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    t = bench(lambda: cupy.copyto(dst, src), min_reps=reps, flush=False)
    return 2 * nbytes / (t.median_ms * 1e-3)
