"""The inputs of one shape and type on the GPU, and the run of a compiled kernel on them: launch, check
every element (gemmlab/results/check.py), guard the inputs, then time (gemmlab/gpu/bench.py).

Correctness comes first: C is filled with NaN before each checked launch, so an element the kernel
never writes fails; a kernel that fails is never timed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import GemmlabError
from ..results import check as checking
from ..results import fp8
from ..results.check import Check
from ..results.model import Result, Shape
from .bench import bench
from ..gpu.device import DeviceInfo, get_device
from .driver import cuda
from .launch import CUBLAS_SOURCE, cublas_gemm, prepare

if TYPE_CHECKING:
    from ..kernel import Kernel


def to_bf16(x):
    """float32 array -> bfloat16 bits (uint16; cupy has no bfloat16 type), rounded to nearest even.
    (numpy's types name the views, so it works on numpy arrays too.)"""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b):
    """bfloat16 bits -> float32, exactly."""
    return (b.astype(np.uint32) << 16).view(np.float32)


def synchronize(xp) -> None:
    """Wait for the GPU (nothing to wait for where numpy stands in for cupy, in the CPU tests)."""
    if hasattr(xp, "cuda"):
        xp.cuda.Device().synchronize()


@dataclass(frozen=True)
class InputSet:
    """A kind of inputs every kernel is checked on. `scale` None: small integers, where every product
    and partial sum is exact in FP32, so C must equal the reference bit for bit."""
    name: str
    scale: float | None
    seed_offset: int


# The first set is the one timed; the others are checked too, before timing, so that a kernel right only
# on one set of values (by accident, or at one magnitude) is caught.
INPUT_SETS = (InputSet("random", 1.0, 0), InputSet("random x1000", 1000.0, 7919),
              InputSet("small integers", None, 104729))


def c_tile(params: dict) -> tuple[int, int]:
    """The rows x columns of C one block computes, from the parameters that name them (BM x BN, TILE,
    BLOCK, COLS), for saying which tiles hold wrong elements; 32 where no parameter says."""
    def first(*names):
        return next((int(params[n]) for n in names if isinstance(params.get(n), int)), 32)
    return first("BM", "TILE", "BLOCK"), first("BN", "COLS", "TILE", "BLOCK")


# Elements of NaN before and after A and B (256 bytes of 16-bit types): a kernel that reads past either end
# of its inputs takes NaN into C, which the check reports; finite bytes there, times the zeros that pad a
# tile, would give the right C and hide the read.
FENCE = 128
# C's array type for each --out-dtype: bf16 as its bits, as the inputs are.
C_ARRAY = {"fp32": lambda xp: xp.float32, "bf16": lambda xp: xp.uint16, "fp16": lambda xp: xp.float16}
NAN_BITS = {"bf16": 0x7FC0, "e4m3": 0x7F, "e5m2": 0x7F}  # cupy has no bfloat16 or FP8: their inputs are the bits


def fenced(xp, x, dtype: str):
    """x in a buffer of NaN, FENCE elements of it on each side (x stays contiguous and 256-byte aligned)."""
    buf = xp.empty(x.size + 2 * FENCE, dtype=x.dtype)
    buf[:] = NAN_BITS.get(dtype, float("nan"))
    inner = buf[FENCE:FENCE + x.size].reshape(x.shape)
    inner[...] = x
    return inner


class Inputs:
    """One set of inputs on the GPU, in the kernels' type, with pristine copies to guard them, and what C
    must be: the reference and each element's bound (gemmlab/results/check.py)."""

    def __init__(self, xp, shape: Shape, dtype: str, seed: int, kind: InputSet, fp64: bool, scale: str | None = None,
                 out: str = "fp32"):
        """`xp`: cupy, or numpy in the CPU tests. `scale`: the scaling mode of FP8 inputs (results/fp8.py;
        default tensor). `out`: C's type."""
        M, N, K = shape.M, shape.N, shape.K
        if out == "fp16" and kind.scale is not None:
            # An fp16 C ends at 65504: inputs of size s give sums of about s^2 sqrt(K), so a large set is
            # made smaller, to keep its largest sums (some 6 of those) 16 times inside the range.
            cap = math.sqrt(checking.FP16_MAX / (16 * 6 * math.sqrt(K)))
            if kind.scale > cap:
                kind = InputSet(f"random x{cap:.3g} (fp16 C)", cap, kind.seed_offset)
        # Integers in [-4, 4]: every partial sum (and alpha_beta's 1.5x of it) fits FP32's 24 bits while
        # 24 K < 2^22, so C is exact in any order; past that K the bound applies to them as to the others.
        self.kind, self.exact = kind, kind.scale is None and 24 * K < 2**22
        rng = xp.random.default_rng(seed + kind.seed_offset)

        def make(*dims):
            if kind.scale is None:
                return rng.integers(-4, 5, dims).astype(xp.float32)
            return rng.standard_normal(dims, dtype=xp.float32) * xp.float32(kind.scale)

        A, B = make(M, K), make(K, N)
        self.scale = self.scale_a = self.scale_b = self.Bt = None
        if dtype in fp8.FORMATS:
            # FP8 codes and their scales; the reference multiplies the dequantised values (code x scale).
            # FP8 wgmma reads B only K-major: B^T (N x K) is made here, once, outside any timing.
            self.scale = scale or fp8.SCALE_MODES[0]
            qa = fp8.quantise(xp, A, "A", dtype, self.scale, exact=self.exact or kind.scale is None)
            qb = fp8.quantise(xp, B, "B", dtype, self.scale, exact=self.exact or kind.scale is None)
            self.A, self.B = qa.codes, qb.codes
            self.scale_a, self.scale_b = fenced(xp, qa.scales, "fp32"), fenced(xp, qb.scales, "fp32")
            self.Bt = fenced(xp, xp.ascontiguousarray(qb.codes.T), dtype)
            A, B = qa.values, qb.values
            del qa, qb
        elif dtype == "fp16":
            self.A, self.B = A.astype(xp.float16), B.astype(xp.float16)
            A, B = self.A.astype(xp.float32), self.B.astype(xp.float32)  # exactly the rounded inputs
        elif dtype == "bf16":
            self.A, self.B = to_bf16(A), to_bf16(B)
            A, B = from_bf16(self.A), from_bf16(self.B)
        else:
            self.A, self.B = A, B
        self.A, self.B = fenced(xp, self.A, dtype), fenced(xp, self.B, dtype)
        self.bias, self._C0, self._make = make(N), None, make
        # The reference multiplies the very inputs the kernel gets, in FP32 (or float64): for tf32 that
        # is the exact product the tensor cores approximate.
        rt = xp.float64 if fp64 else xp.float32
        self.ref = xp.matmul(A.astype(rt), B.astype(rt))
        l2 = None if self.exact else xp.sqrt(xp.matmul(A * A, B * B))
        self.bound = checking.bound(xp, self.ref, l2, K, dtype, self.exact)
        del A, B, l2
        self.pristine = {"A": self.A.copy(), "B": self.B.copy(), "bias": self.bias.copy()}
        if self.Bt is not None:
            self.pristine |= {"Bt": self.Bt.copy(), "scale_a": self.scale_a.copy(), "scale_b": self.scale_b.copy()}

    @property
    def C0(self):
        """The C that alpha_beta's beta * C reads: made when first needed (it is the size of C)."""
        if self._C0 is None:
            self._C0 = self._make(*self.ref.shape)
            self.pristine["C0"] = self._C0.copy()
        return self._C0

    def guard(self, xp) -> list[str]:
        """The inputs a launch wrote into (and puts them back, so that no later verdict depends on it)."""
        found = []
        for name, clean in self.pristine.items():
            now = getattr(self, name if name != "C0" else "_C0")
            what = checking.changed(xp, name, now, clean)
            if what:
                found.append(what)
                now[...] = clean
        return found


def time_then_check(xp, r: Result, launch, inputs, check_again, min_reps: int, phase) -> None:
    """Time `launch` into r, then check its result again (`check_again()`: a verdict on `inputs`): a kernel
    that keeps state from one launch to the next (split K's counters, kernels/split.j2; stream-K's flags,
    kernels/stream_k.j2) must be right on the last one too, and one that wrote into its inputs while timed
    is caught. A wrong result takes the timing away."""
    r.timing = bench(launch, min_reps=min_reps, phase=phase)
    clobbered = inputs.guard(xp)
    again = check_again()
    again.clobbered = clobbered + again.clobbered
    if not again.passed:
        r.check, r.timing = again, None


class Problem:
    """Inputs for one shape and input type, on the GPU: fresh random A and B (the timed set, INPUT_SETS[0]),
    the output C, and the other input sets, made when a kernel is checked. A and B are float32 for fp32
    and tf32, float16 for fp16, bfloat16 bits (uint16) for bf16; C is float32 for every type (FP32
    accumulation)."""

    def __init__(self, shape: Shape, seed: int | None = None, fp64_check: bool = False, dtype: str = "fp32",
                 xp=None, out_dtype: str = "fp32"):
        """`xp`: the array module, cupy unless a CPU test gives numpy (then there is no device, and only
        `verify` and the input sets work: launches are whatever the test emulates). `out_dtype`: C's type,
        fp32 or a 16-bit one (bf16 as its bits, uint16)."""
        if out_dtype not in checking.U_OUT or out_dtype not in ("fp32", dtype) and dtype not in fp8.FORMATS:
            raise GemmlabError(f"C can be fp32 or the inputs' own 16-bit type, not {out_dtype} for {dtype} inputs")
        self.out_dtype = out_dtype
        self.cupy = cupy = xp or cuda()
        self.device: DeviceInfo | None = get_device() if xp is None else None
        self.shape = shape
        self.dtype = dtype
        self.fp64 = fp64_check
        self.seed = seed if seed is not None else int.from_bytes(np.random.bytes(4), "little")
        if self.device is not None:
            free, _total = cupy.cuda.runtime.memGetInfo()
            need = shape.bytes_needed(fp64_check, dtype)
            if need > free:
                raise GemmlabError(f"shape {shape} needs {need / 2**30:.1f} GiB of GPU memory and "
                                   f"{self.device.name} has {free / 2**30:.1f} GiB free",
                                   hint="choose a smaller --size or -M/-N/-K")
        self.ref_name = "float64" if fp64_check else ("cupy.matmul" if dtype == "fp32"
                                                      else f"cupy.matmul fp32 of the {dtype} inputs"
                                                      + (" (dequantised)" if dtype in fp8.FORMATS else ""))
        self.main = self._inputs(INPUT_SETS[0])
        self._mains = {self.main.scale: self.main}  # FP8: the timed set of each scaling mode, made when first run
        self.C = cupy.empty((shape.M, shape.N), dtype=C_ARRAY[out_dtype](cupy))
        synchronize(cupy)
        self.A, self.B, self.ref = self.main.A, self.main.B, self.main.ref

    def _inputs(self, kind: InputSet, scale: str | None = None) -> Inputs:
        try:
            return Inputs(self.cupy, self.shape, self.dtype, self.seed, kind, self.fp64, scale, self.out_dtype)
        except MemoryError:  # cupy's OutOfMemoryError is one
            raise GemmlabError(f"out of GPU memory making the {kind.name} inputs of shape {self.shape}",
                               hint="choose a smaller --size or -M/-N/-K") from None

    def timed_set(self, scale: str | None = None) -> Inputs:
        """The timed inputs; for FP8, those of scaling mode `scale` (the same values, quantised its way)."""
        if scale is None or self.dtype not in fp8.FORMATS:
            return self.main
        if scale not in self._mains:
            self._mains[scale] = self._inputs(INPUT_SETS[0], scale)
        return self._mains[scale]

    def input_sets(self, scale: str | None = None):
        """Every set of inputs, the timed one first; the others are made one at a time and dropped after."""
        yield self.timed_set(scale)
        for kind in INPUT_SETS[1:]:
            yield self._inputs(kind, scale)

    def verify(self, launch_on, tile: tuple[int, int] = (32, 32), epilogue: str | None = None,
               sets=None) -> Check:
        """Run `launch_on(inputs)()` on NaN-poisoned C for each input set (all of them unless `sets` says),
        and judge every element; stop at the first set that fails. The verdict of the timed set, unless
        another failed. Inputs a launch wrote into are named in the verdict, and restored."""
        try:
            verdict = self._verify(launch_on, tile, epilogue or "none", sets or self.input_sets())
        except MemoryError:  # cupy's OutOfMemoryError is one
            raise GemmlabError(f"out of GPU memory checking on shape {self.shape}: the check needs a few more "
                               f"arrays the size of C ({self.C.nbytes / 2**30:.1f} GiB each)",
                               hint="choose a smaller shape") from None
        return verdict

    def _verify(self, launch_on, tile, kind, sets) -> Check:
        cupy, verdict = self.cupy, None
        for inputs in sets:
            self.C.fill(NAN_BITS.get(self.out_dtype, math.nan))  # poison: elements never written stay NaN and fail
            C0 = None
            if kind == "alpha_beta":  # beta * C reads C: it must hold numbers (the reference knows which)
                C0 = checking.round_out(cupy, inputs.C0, self.out_dtype)  # as a C of this type holds them
                self.C[...] = to_bf16(C0) if self.out_dtype == "bf16" else C0
            launch_on(inputs)()
            synchronize(cupy)
            try:
                ref, bnd = checking.epilogue(cupy, kind, inputs.ref, inputs.bound, C0, inputs.bias)
            except ValueError as e:
                raise GemmlabError(str(e)) from None
            ref, bnd = checking.output(cupy, ref, bnd, self.out_dtype, inputs.exact)
            c = checking.verdict(cupy, self.c_float(), ref, bnd, self.ref_name, tile, inputs.kind.name)
            del ref, bnd
            c.clobbered = inputs.guard(cupy)
            if verdict is None or not c.passed:
                verdict = c
            if not c.passed:
                break
        return verdict

    def c_float(self):
        """C as float32 (a copy, for a 16-bit C; C itself for fp32)."""
        if self.out_dtype == "bf16":
            return from_bf16(self.C)
        return self.C.astype(self.cupy.float32) if self.out_dtype == "fp16" else self.C

    def workspace(self, nbytes: int):
        """Scratch memory for kernels that declare it: allocated once per Problem, grown when needed."""
        if getattr(self, "_workspace", None) is None or self._workspace.nbytes < nbytes:
            self._workspace = None
            try:
                self._workspace = self.cupy.empty(nbytes, dtype=self.cupy.uint8)
            except self.cupy.cuda.memory.OutOfMemoryError:
                raise GemmlabError(f"out of GPU memory allocating a {nbytes / 2**20:.0f} MiB workspace",
                                   hint="a smaller split or shape needs less") from None
        return self._workspace

    def _timed(self, r: Result, launch, tile, epilogue, min_reps: int, phase, scale: str | None = None) -> None:
        """Time `launch` on the timed inputs, then check them again (time_then_check)."""
        main = self.timed_set(scale)
        time_then_check(self.cupy, r, launch, main,
                        lambda: self.verify(lambda inputs: launch, tile, epilogue, sets=[main]), min_reps, phase)

    def cublas(self, min_reps: int = 10) -> Result:
        """cuBLAS on the same inputs, the yardstick: cupy.matmul for fp32, cublasGemmEx for the others."""
        cupy = self.cupy

        def on(inputs):
            if self.dtype == "fp32":
                return lambda: cupy.matmul(inputs.A, inputs.B, out=self.C)
            return lambda: cublas_gemm(inputs.A, inputs.B, self.C, self.dtype, self.out_dtype)
        r = Result("cuBLAS", {} if self.out_dtype == "fp32" else {"OUT_DTYPE": self.out_dtype}, self.shape,
                   source=CUBLAS_SOURCE[self.dtype], dtype=self.dtype)
        if self.dtype in fp8.FORMATS:  # cublasGemmEx has no FP8: cuBLASLt's, through torch._scaled_mm
            from .fp8_refs import scaled_mm
            launch, why = scaled_mm(self.main, self.C, self.dtype)
            if launch is None:
                r.error = why
                return r

            def on(inputs):  # noqa: F811 (the FP8 form of the launch above)
                launch, why = scaled_mm(inputs, self.C, self.dtype)
                if launch is None:
                    raise GemmlabError(why)
                return launch
        r.check = self.verify(on)
        if r.check.passed:
            self._timed(r, on(self.main), (32, 32), None, min_reps, None)
        return r

    def run(self, kernel: Kernel, min_reps: int = 10, timed: bool = True, phase=None) -> Result:
        """Launch on NaN-poisoned C and check, on every input set; then, if it passed (and `timed`), time
        it on the first. A CUDA error in a launch marks the result CRASHED: this process's CUDA context is
        then unusable (gemmlab's CLI runs this in a worker process for that reason)."""
        cupy, s, variant, params, compiled = self.cupy, self.shape, kernel.variant, kernel.params, kernel.compiled
        if kernel.dtype != self.dtype:
            raise GemmlabError(f"variant '{variant.name}' with DTYPE={kernel.dtype} cannot run on {self.dtype} inputs")
        if kernel.out_dtype != self.out_dtype:
            raise GemmlabError(f"variant '{variant.name}' writes a C of {kernel.out_dtype}, and this run's C is "
                               f"{self.out_dtype}")
        r = Result(variant.name, dict(params), s, resources=compiled.resources,
                   compile_ms=compiled.compile_ms if not compiled.cached else compiled.lookup_ms,
                   cached=compiled.cached, source=str(variant.path), user=not variant.builtin,
                   dtype=self.dtype)
        epilogue = params.get("EPILOGUE")
        if epilogue is not None and epilogue not in checking.EPILOGUES:
            raise GemmlabError(f"unknown EPILOGUE {epilogue!r}: gemmlab knows {', '.join(checking.EPILOGUES)}")
        t0 = time.perf_counter()
        prepared = prepare(kernel, s.M, s.N, s.K, self.device, workspace=self.workspace)  # plan, load, limits
        if not compiled.cached:
            r.compile_ms = compiled.lookup_ms + (time.perf_counter() - t0) * 1e3
        geo = r.geometry = prepared.plan

        def on(inputs):
            """The launch on one set of inputs, with the arguments the template lists."""
            return prepared.bind(inputs.A, inputs.B, self.C, bias=inputs.bias, Bt=inputs.Bt,
                                 scale_a=inputs.scale_a, scale_b=inputs.scale_b)

        try:
            r.blocks_per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                prepared.function.kernel.ptr, geo.threads, geo.smem)
        except Exception:
            r.blocks_per_sm = None

        tile = c_tile(params)
        cuda_errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
        try:
            if phase:
                phase(f"check {variant.name}")
            scale = params.get("SCALE") if self.dtype in fp8.FORMATS else None
            r.check = self.verify(on, tile, epilogue, sets=self.input_sets(scale))
            if prepared.repitched:  # said in the row: the copies are part of its time
                r.extra = dict(r.extra or {}, repitched=list(prepared.repitched))
            if r.check.passed and timed:
                self._timed(r, on(self.timed_set(scale)), tile, epilogue, min_reps, phase, scale)
        except cuda_errors as e:
            r.check = r.timing = None
            r.fault, r.error = "CRASHED", f"the kernel failed: {e}"
        return r
