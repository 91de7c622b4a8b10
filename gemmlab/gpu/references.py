"""Reference rows beside cuBLAS's (`--refs cublaslt,triton`): what a user would pick instead of a gemmlab
kernel, so that a row says where it stands against more than cupy.matmul's one cuBLAS algorithm.

- cuBLASLt, through nvmath-python: `Matmul(A, B, C, beta=0)` in place, planned with up to ALGORITHMS of
  cuBLASLt's heuristic algorithms, `autotune` times them on the timed inputs and puts the fastest first,
  and `execute` writes C. beta = 0: cuBLASLt does not read C, so its NaN poison does not matter.
  FP8 inputs (e4m3, e5m2): the codes viewed as torch's float8 types, B^T read as a column-major B (the
  only FP8 layout cuBLASLt has on Hopper) and the per-tensor scales of A and B as its quantization scales,
  fast accumulation off (torch._scaled_mm's default, which gave the FP8 rung's PROMOTE=128 C bit for bit:
  docs/fp8.md). Per-tensor only: nvmath-python's other FP8 scales are MXFP8's 1 x 32 blocks, which need
  compute capability 10.0 (Blackwell). The FP8
  cuBLAS row is cuBLASLt's too, through torch._scaled_mm (gpu/fp8_refs.py): this row adds the autotuned
  best of cuBLASLt's algorithms.
- Triton, through torch.compile: `C.copy_(torch.mm(A, B))` compiled with inductor's max-autotune restricted
  to its Triton templates (no aten, so no cuBLAS behind the name); its generated code must hold a Triton
  matmul (`tl.dot`), and the row lists the kernels it launches. Its C is the inputs' type only: inductor
  (torch 2.11) gives `torch.mm(..., out_dtype=torch.float32)` of 16-bit inputs to aten alone, and a bf16
  product made fp32 after is not an FP32 C. So 16-bit inputs have a Triton row with --out-dtype of their
  own type, and a note otherwise.

Each is made once per worker (planning, autotuning and compiling are its `compile ms`, outside every
timing) on the Problem's own arrays: torch tensors sharing their memory through DLPack (bf16's bits viewed
as bfloat16), or the cupy arrays themselves where torch is missing (nvmath takes those, bar bf16). Then
its row is checked and timed as cuBLAS's is (Problem.verify on NaN-poisoned C over every input set, the
guard of the inputs, bench, checked again), writing the run's C type. Neither package is a dependency of
gemmlab: where one is missing, or cannot do this GEMM, the answer is Skipped with why, which the run
shows as a note and no row; never an error.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

from ..errors import GemmlabError
from ..results import fp8
from ..results.model import Result
from .driver import torch_with_cuda

# --refs's words and the rows' names, in the order the rows come
NAMES = {"cublaslt": "cuBLASLt", "triton": "Triton"}
ALGORITHMS = 8           # cuBLASLt's heuristic algorithms that autotune times
AUTOTUNE_ITERATIONS = 10
COMPILE_EXPECT_S = 300.0  # what torch.compile's max-autotune may take (the worker's time limit allows for it)


def parse(refs) -> tuple[str, ...]:
    """The references asked for, as row names, in the order of NAMES: None or "" (none), "a,b", or names."""
    if refs is None or refs == "":
        return ()
    items = refs.split(",") if isinstance(refs, str) else list(refs)
    asked = set()
    for item in items:
        key = str(item).strip().lower()
        if key not in NAMES and key not in (n.lower() for n in NAMES.values()):
            raise GemmlabError(f"no reference '{str(item).strip()}': --refs takes {', '.join(NAMES)} (comma-separated)")
        asked.add(key)
    return tuple(name for key, name in NAMES.items() if key in asked)


@dataclass(frozen=True)
class Skipped:
    """A reference that cannot be had here (its package is missing, or it cannot do this GEMM): no row."""
    name: str
    why: str

    def note(self) -> str:
        return f"no {self.name} row: {self.why}"


@dataclass
class Ref:
    """A reference made for one Problem: `on(inputs)` binds it to a set of inputs and returns the launch."""
    on: Callable
    source: str
    setup_ms: float
    extra: dict | None = None


def measure(problem, name: str, min_reps: int = 10, phase=None) -> Result | Skipped:
    """Reference `name` (a row name of NAMES) on the Problem's inputs: checked on every input set, then
    timed and checked again, as Problem.cublas does. Made on the first call and kept with the Problem
    (later rounds reuse it; its compile ms is the first round's)."""
    made = problem.__dict__.setdefault("_references", {})
    first = name not in made
    if first:
        makers = {"cuBLASLt": cublaslt, "Triton": triton}
        if name not in makers:
            raise GemmlabError(f"no reference '{name}'")
        made[name] = makers[name](problem, phase)
    ref = made[name]
    if isinstance(ref, Skipped):
        return ref
    out = problem.out_dtype
    r = Result(name, {} if out == "fp32" else {"OUT_DTYPE": out}, problem.shape, source=ref.source,
               dtype=problem.dtype, compile_ms=ref.setup_ms if first else None, extra=ref.extra)
    if phase:
        phase(f"check {name}")
    try:
        r.check = problem.verify(ref.on)
        if r.check.passed:
            problem._timed(r, ref.on(problem.main), (32, 32), None, min_reps, phase)
    except GemmlabError:
        raise
    except Exception as e:  # the library failed on a GEMM it had accepted: the row says so
        r.check = r.timing = None
        r.error = f"{name} failed: {_first_line(e)}"
    return r


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:200]


def _view(torch, problem):
    """array -> the operand the libraries take: a torch tensor on the array's memory (DLPack; bf16 bits
    as bfloat16), or the cupy array itself without torch (None for bf16: cupy has no bfloat16)."""
    if torch is None:
        return None if problem.dtype == "bf16" else (lambda x: x)

    def view(x):
        t = torch.from_dlpack(x)
        return t.view(torch.bfloat16) if t.dtype == torch.uint16 else t
    return view


def _stream(problem) -> dict:
    """The stream keyword for nvmath: cupy's current stream, unless it is the default one (then the
    libraries' default, which is the same stream)."""
    ptr = problem.cupy.cuda.get_current_stream().ptr
    return {"stream": ptr} if ptr else {}


def _fp8_operands(torch, problem):
    """FP8 inputs -> nvmath's operands of one input set: A's codes (M x K) and B^T's read as B (K x N,
    column-major) in torch's float8 type, and the per-tensor scales of A and B as quantization scales."""
    kind = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[problem.dtype]
    codes = lambda x: torch.from_dlpack(x).view(kind)  # noqa: E731 (uint8 bits, as cupy holds them)

    def operands(inputs):
        if inputs.scale != "tensor":  # (the Problem's rows run on its first inputs, which are per-tensor)
            raise GemmlabError(f"cuBLASLt's row takes per-tensor FP8 scales, not {inputs.scale}")
        return {"a": codes(inputs.A), "b": codes(inputs.Bt).t(),
                "quantization_scales": {"a": torch.from_dlpack(inputs.scale_a), "b": torch.from_dlpack(inputs.scale_b)}}
    return operands


def cublaslt(problem, phase=None) -> Ref | Skipped:
    """cuBLASLt through nvmath-python, in place into C, its heuristics' best algorithms autotuned."""
    try:
        import nvmath
        from nvmath.linalg import advanced
    except ImportError:
        return Skipped("cuBLASLt", "nvmath-python is not installed (pip install nvmath-python, or gemmlab[refs])")
    except Exception as e:  # installed, but its libraries do not load
        return Skipped("cuBLASLt", f"nvmath-python does not load: {_first_line(e)}")
    torch = torch_with_cuda()
    is_fp8 = problem.dtype in fp8.FORMATS
    if is_fp8 and torch is None:
        return Skipped("cuBLASLt", "FP8 operands need torch (cupy has no float8 types for nvmath-python)")
    view = _view(torch, problem)
    if view is None:
        return Skipped("cuBLASLt", "bf16 operands need torch (cupy has no bfloat16 for nvmath-python)")
    if is_fp8:
        operands = _fp8_operands(torch, problem)
    else:
        operands = lambda inputs: {"a": view(inputs.A), "b": view(inputs.B)}  # noqa: E731
    if phase:
        phase("plan and autotune cuBLASLt (nvmath-python)", 30.0)
    stream = _stream(problem)
    options = {"inplace": True}
    if problem.dtype == "tf32":
        options["compute_type"] = nvmath.linalg.ComputeType.COMPUTE_32F_FAST_TF32
    t0 = time.perf_counter()
    try:
        first = operands(problem.main)
        mm = advanced.Matmul(first.pop("a"), first.pop("b"), c=view(problem.C), alpha=1.0, beta=0.0,
                             options=options, **first, **stream)
        algorithms = mm.plan(preferences=advanced.MatmulPlanPreferences(limit=ALGORITHMS), **stream)
        mm.autotune(iterations=AUTOTUNE_ITERATIONS, **stream)
    except Exception as e:
        return Skipped("cuBLASLt", f"nvmath-python's cuBLASLt does not take this GEMM: {_first_line(e)}")
    problem.cupy.cuda.Device().synchronize()
    setup_ms = (time.perf_counter() - t0) * 1e3

    def on(inputs):
        mm.reset_operands(**operands(inputs), **stream)  # C stays: it is the Problem's
        return lambda: mm.execute(**stream)
    what = f" FP8 ({problem.dtype.upper()}, per-tensor scales)" if is_fp8 else ""
    source = (f"nvmath-python {nvmath.__version__} cuBLASLt{what}: the fastest of {len(algorithms)} heuristic "
              f"algorithms, autotuned")
    return Ref(on, source, setup_ms, {"algorithms": len(algorithms)} | ({"scale": "tensor"} if is_fp8 else {}))


def triton(problem, phase=None) -> Ref | Skipped:
    """Triton's matmul through torch.compile (inductor's max-autotune over its Triton templates only)."""
    if problem.dtype in fp8.FORMATS:
        return Skipped("Triton", "no Triton row for FP8 inputs (torch.mm takes no float8 operands, and inductor's "
                                 "template for torch._scaled_mm is not wired in here)")
    torch = torch_with_cuda()
    if torch is None:
        return Skipped("Triton", "torch with CUDA is not installed (Triton's matmul comes through torch.compile)")
    try:
        import triton as triton_lang
        from torch._inductor import config as inductor
        from torch._inductor.utils import run_and_get_code
    except ImportError as e:
        return Skipped("Triton", f"triton or torch's inductor is not installed ({_first_line(e)})")
    view = _view(torch, problem)
    a, b, c = view(problem.main.A), view(problem.main.B), view(problem.C)
    if c.dtype != a.dtype:
        return Skipped("Triton", f"inductor's Triton matmul writes C in the inputs' type only (torch.mm's "
                                 f"out_dtype goes to aten): --out-dtype {problem.dtype} has a Triton row")
    # tf32 inputs: Triton's dot in TF32, as cuBLAS's row; fp32: in full FP32 (torch's default). Set for the
    # worker (it runs one input type), so the compiled graph's guard on it holds at every call.
    torch.backends.cuda.matmul.allow_tf32 = problem.dtype == "tf32"

    def matmul(a, b, c):
        c.copy_(torch.mm(a, b))

    if phase:
        phase("compile Triton's matmul (torch.compile, max-autotune)", COMPILE_EXPECT_S)
    # Triton templates only (aten's choice would be cuBLAS); the graph cache off, so that the code is
    # generated here and can be read (the autotuning results stay cached)
    inductor.max_autotune_gemm_backends = "TRITON"
    torch._dynamo.config.error_on_recompile = True  # a recompile (another choice) is an error, not a silent one
    t0 = time.perf_counter()
    try:
        compiled = torch.compile(matmul, mode="max-autotune-no-cudagraphs", dynamic=False, fullgraph=True)
        with inductor.patch(fx_graph_cache=False):
            _, code = run_and_get_code(compiled, a, b, c)
        torch.cuda.synchronize()
    except Exception as e:
        return Skipped("Triton", f"torch.compile made no Triton matmul for this GEMM: {_first_line(e)}")
    setup_ms = (time.perf_counter() - t0) * 1e3
    code = "\n".join(code)
    if "tl.dot" not in code:
        return Skipped("Triton", "inductor's autotuning chose no Triton matmul for this GEMM")
    kernels = sorted(set(re.findall(r"\b(triton_\w+)\.run\(", code)))

    def on(inputs):
        a, b = view(inputs.A), view(inputs.B)
        return lambda: compiled(a, b, c)
    source = (f"torch {torch.__version__.split('+')[0]} compile, max-autotune over Triton "
              f"{triton_lang.__version__} templates")
    return Ref(on, source, setup_ms, {"kernels": kernels})
