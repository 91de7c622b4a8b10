"""The Python API: the functions the CLI calls, and the pipeline's stages one by one.

The commands, each returning a ResultSet (rows, device, the command that measures it again; a table in
a terminal or a notebook; .to_dicts(), .to_pandas()). Errors raise GemmlabError with the CLI's message.

    rs = gemmlab.run("tiled", {"TILE": 32}, shape=2048)    # check, then time, with cuBLAS beside it
    rs = gemmlab.compare(["naive", "tiled"], shape=(1000, 300, 2000))
    rs = gemmlab.sweep("tiled", {"TILE": [8, 16, 32]}, shape=1024)
    rs = gemmlab.suite(); rs = gemmlab.scaling(sizes=[512, 1024])
    rs = gemmlab.dist("ring", "wgmma_ws", shape=(2048, 8192, 4096), gpus=2)   # one process per GPU, NCCL
    text = gemmlab.show("tiled", {"TILE": 32}, what="sass")
    rows = gemmlab.history("tiled")

The stages (no GPU needed until a Problem runs):

    cat = gemmlab.catalog()                                # find templates
    v = cat.get("tiled"); params = v.resolve({"TILE": 16})  # validate parameters
    kernel = gemmlab.build(v, params)                      # render + NVRTC (cached), no GPU needed
    v, params, why = gemmlab.choose(1024, 1024, 1024)      # or let `auto` pick for a shape
    problem = gemmlab.Problem(gemmlab.Shape(1024, 1024, 1024), dtype=kernel.dtype)
    result = problem.run(kernel)                           # check every element, then time

A tensor-core variant takes its input type as the parameter DTYPE: v.resolve({"DTYPE": "bf16"}).
"""

from __future__ import annotations

from pathlib import Path

from .errors import GemmlabError
from .files import new_file
from .kernel import Kernel, configure
from .templates import Catalog, Variant, discover, show_value


def catalog(kernels_dirs: tuple[str | Path, ...] = ()) -> Catalog:
    """Every variant: built-in templates, shadowed by those in user directories."""
    return discover(tuple(kernels_dirs))


def default_arch(arch: str | None = None) -> tuple[str, str | None]:
    """The architecture to compile for: the one asked for, else the GPU's, else sm_90 with a note."""
    if arch:
        return arch, None
    try:
        from .gpu.device import get_device
        return get_device().arch, None
    except GemmlabError:
        return "sm_90", "no GPU found: compiling for sm_90 (give --arch to choose)"


def build(variant: Variant, params: dict | None = None, arch: str | None = None, use_cache: bool = True) -> Kernel:
    """Render and compile one variant (missing parameters take their defaults) for `arch` (default:
    the GPU's): the configured kernel that runs, shows and reports."""
    arch, _ = default_arch(arch)
    return configure(variant, params, arch, use_cache=use_cache)


def choose(M: int, N: int, K: int, device: str | None = None, sms: int | None = None,
           kernels_dirs: tuple[str | Path, ...] = (), dtype: str = "fp32") -> tuple[Variant, dict, str]:
    """`--variant auto` for the API: (variant, params, why) for this shape and input type on `device` (a
    GPU name as `gemmlab device` shows it; default: this machine's GPU), from the tuning cache or the rule."""
    from .results.model import Shape
    from .results.tuning import choose as pick
    if device is None or sms is None:
        from .gpu.device import get_device
        dev = get_device()
        device, sms = device or dev.name, sms or dev.sms
    return pick(catalog(kernels_dirs), device, Shape(M, N, K), sms, dtype)


# ---- the commands -------------------------------------------------------------------------------------

def _shape(shape):
    """A Shape from n (n x n x n), (M, N, K) or a Shape."""
    from .results.model import Shape
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, int) and not isinstance(shape, bool):
        return Shape(shape, shape, shape)
    if isinstance(shape, (tuple, list)) and len(shape) == 3:
        return Shape(*shape)
    raise GemmlabError(f"a shape is n, (M, N, K) or a gemmlab.Shape, not {shape!r}")


def _problem(cat: Catalog, problem: str | None, chosen: list) -> str:
    """The problem a command runs: the one named (checked), else its variants' (all the same one), else GEMM."""
    from . import problems
    if problem is not None:
        problems.check_name(problem)
    for v in chosen:
        if problem is None:
            problem = v.problem
        elif v.problem != problem:
            raise GemmlabError(f"variant '{v.name}' computes {v.problem}, not {problem}",
                               hint=f"`gemmlab list --problem {problem}` shows the variants of {problem}")
    return problem or "gemm"


def _problem_shape(problem: str, shape):
    """A problem's shape from n (n elements, or an n x n matrix), (M, N), (M, N, K) or a Shape."""
    from . import problems
    from .results.model import Shape
    if problem == "gemm" or isinstance(shape, Shape):
        return _shape(shape)
    decl = problems.get(problem)
    if isinstance(shape, int) and not isinstance(shape, bool):
        return decl.shape(size=shape)
    if isinstance(shape, (tuple, list)) and len(shape) in (2, 3):
        if len(shape) == 3 and shape[2] != 1:
            raise GemmlabError(f"{problem} has no K: give (M, N), not {tuple(shape)!r}")
        return decl.shape(M=shape[0], N=shape[1])
    raise GemmlabError(f"a {problem} shape is n, (M, N) or a gemmlab.Shape, not {shape!r}")


def _gpus(gpus) -> int:
    """A number of GPUs of this host (None: all of them)."""
    if gpus is None:
        from .multigpu.job import gpu_count
        return gpu_count()
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise GemmlabError(f"gpus must be a positive number of GPUs (or None: all), not {gpus!r}")
    return gpus


def _launched(gpus) -> None:
    """--gpus under a launcher of several ranks: one error (each rank takes one GPU)."""
    from .spread import refuse_gpus
    refuse_gpus(gpus)


def _team(opts, store: str | None):
    """Under a launcher of several ranks, this process's place among them (gemmlab/spread.py): the seed
    rank 0 chose, and this rank's GPU, go into opts. None without one."""
    from .spread import join
    team = join(opts.seed, store, max(opts.timeout, 120.0))
    if team:
        opts.seed, opts.device = team.seed, team.gpu()
    return team


def _options(dtype, reps, rounds, seed, check, timeout, gpus=1, out_dtype=None, refs=None):
    from .gpu.references import parse
    from .jobs import Options
    if check not in ("cupy", "fp64"):
        raise GemmlabError(f"check is 'cupy' or 'fp64', not {check!r}")
    for name, value in (("reps", reps), ("rounds", rounds)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise GemmlabError(f"{name} must be a positive integer, not {value!r}")
    if not timeout > 0 or timeout == float("inf"):
        raise GemmlabError(f"timeout must be a positive, finite number of seconds, not {timeout!r}")
    return Options(reps=reps, seed=seed, fp64_check=check == "fp64", dtype=dtype or "fp32", timeout=timeout,
                   rounds=rounds, gpus=_gpus(gpus), out_dtype=out_dtype or "fp32", refs=parse(refs))


def _refs_argv(opts) -> list[str]:
    return ["--refs", ",".join(r.lower() for r in opts.refs)] if opts.refs else []


def _problem_options(opts) -> None:
    """What only GEMM takes (references beside cuBLAS, input and C types) or only another problem (its
    input set): the wrong ones refused with one error."""
    from . import problems
    if opts.problem == "gemm":
        if opts.inputs is not None:
            raise GemmlabError("--inputs chooses the input set of a problem other than gemm")
        return
    if opts.refs:
        raise GemmlabError(f"--refs adds GEMM references beside cuBLAS; {opts.problem} has none")
    if opts.dtype != "fp32" or opts.out_dtype != "fp32":
        raise GemmlabError(f"--dtype and --out-dtype choose GEMM's types; {opts.problem} has inputs of its own")
    problems.get(opts.problem).input_set(opts.inputs)  # an unknown set: one error before any GPU work


def _variant(cat: Catalog, v) -> Variant:
    return v if isinstance(v, Variant) else cat.get(v)


def _argv(command: str, shape, opts, doc: dict, kernels_dirs, extra: list[str]) -> list[str]:
    """The gemmlab command line that measures the same again, with the seed the run used."""
    argv = [command] + extra + ["-M", str(shape.M), "-N", str(shape.N), "-K", str(shape.K)]
    argv += ["--dtype", opts.dtype, "--reps", str(opts.reps)]
    argv += ["--out-dtype", opts.out_dtype] if opts.out_dtype != "fp32" else []
    argv += ["--rounds", str(opts.rounds)] if opts.rounds != 1 else []
    argv += ["--seed", str(doc["seed"])] if doc.get("seed") is not None else []
    argv += ["--check", "fp64"] if opts.fp64_check else []
    argv += ["--gpus", str(opts.gpus)] if opts.gpus != 1 else []
    argv += ["--problem", opts.problem] if opts.problem != "gemm" else []
    argv += ["--inputs", opts.inputs] if opts.inputs else []
    return argv + _refs_argv(opts) + _dirs_argv(kernels_dirs)


def _dirs_argv(kernels_dirs) -> list[str]:
    return [a for d in kernels_dirs for a in ("--kernels-dir", str(d))]


def _params_argv(params: dict) -> list[str]:
    return [a for k, v in params.items() for a in ("-p", f"{k}={show_value(v)}")]


class _Progress:
    """`progress`: True draws a bar on stderr (in a notebook, in the cell), False says nothing, or a
    measure.Reporter of the caller's (the CLI passes its own)."""

    def __init__(self, progress):
        self.progress, self.cm = progress, None

    def __enter__(self):
        from .present.progress import Reporter
        if isinstance(self.progress, Reporter):
            return self.progress
        if not self.progress:
            return Reporter()
        from .present.progress import bar
        self.cm = bar()
        return self.cm.__enter__()

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc) if self.cm else False


def run(variant: str | Variant = "auto", params: dict | None = None, shape=4096, *, dtype: str | None = None,
        reps: int = 10, rounds: int = 1, seed: int | None = None, check: str = "cupy", timeout: float = 60.0,
        cublas: bool = True, out: str | Path | None = None, kernels_dirs=(), record: bool = True, progress=True,
        problem: str | None = None, inputs: str | None = None, out_dtype: str | None = None, refs=None):
    """Check one variant at `params` against cupy.matmul element by element, then time it, with cuBLAS
    beside it (`gemmlab run`); refs ("cublaslt,triton", or a list) adds those reference rows, checked and
    timed as cuBLAS's (gemmlab/gpu/references.py; one whose package is missing is a note, not a row).
    variant "auto" chooses the FP32 kernel and its parameters for the shape.
    A ResultSet: the kernel's row, then cuBLAS's. A variant of another problem (problem: its name, or
    the one its header says; gemmlab/problems/) runs beside that problem's cupy reference instead, on
    `shape` as that problem reads it (n elements, or M x N), timing the input set `inputs`."""
    from . import measure
    from .present.resultset import ResultSet
    cat, opts = catalog(kernels_dirs), _options(dtype, reps, rounds, seed, check, timeout, out_dtype=out_dtype,
                                                refs=refs)
    named = [] if not isinstance(variant, Variant) and variant == "auto" else [_variant(cat, variant)]
    opts.problem, opts.inputs = _problem(cat, problem, named), inputs
    _problem_options(opts)
    shape = _problem_shape(opts.problem, shape)
    if opts.problem != "gemm" and not named:
        raise GemmlabError(f"--variant auto chooses GEMM kernels; name a {opts.problem} variant",
                           hint=f"`gemmlab list --problem {opts.problem}` shows them")
    out = new_file(out, "--out")
    given = dict(params or {})
    if not named:
        if given:
            raise GemmlabError("--variant auto chooses the parameters itself",
                               hint="name a variant to set parameters; `gemmlab run --variant auto` shows its choice")
        v, resolved, extra = None, {}, ["--variant", "auto"]
    else:
        v = _variant(cat, variant)
        resolved = v.resolve(v.for_dtype(dtype, given, out_dtype))
        opts.dtype, opts.out_dtype = v.dtype(resolved), v.out_dtype(resolved)
        extra = ["--variant", v.name] + _params_argv(resolved)
    with _Progress(progress) as reporter:
        doc, rows = measure.run(v, resolved, shape, opts, reporter, cat, out, with_cublas=cublas, record=record)
    extra += [] if cublas else ["--no-cublas"]
    return ResultSet.of(dict(doc, rows=rows), _argv("run", shape, opts, doc, kernels_dirs, extra))


def compare(variants=None, shape=4096, *, dtype: str | None = None, reps: int = 10, rounds: int = 1,
            seed: int | None = None, check: str = "cupy", timeout: float = 60.0, out: str | Path | None = None,
            kernels_dirs=(), record: bool = True, progress=True, gpus: int | None = 1, problem: str | None = None,
            inputs: str | None = None, out_dtype: str | None = None, refs=None, store: str | None = None):
    """The variants (names or Variants; default: the ladder of the input type, or of `problem`) at their defaults, with
    cuBLAS (and the reference rows of `refs`, as run's), and speed-ups rung over rung (`gemmlab compare`). dtype defaults to the first variant's first
    input type, else fp32; out_dtype (C's type) to fp32, and the ladder of a 16-bit C is the rungs that
    write one. gpus: one worker per GPU of this host (None: all), each job timed alone on its own. Under
    mpirun, srun or torchrun each rank measures its share of the variants on its GPU and rank 0 returns
    them all (gemmlab/spread.py; store: a file every rank sees, where neither MPI nor torch is there)."""
    from . import measure
    from .present.resultset import ResultSet
    _launched(gpus)
    cat, opts = catalog(kernels_dirs), _options(dtype, reps, rounds, seed, check, timeout, gpus, out_dtype, refs)
    out = new_file(out, "--out")
    if isinstance(variants, (str, Variant)):
        variants = [variants]
    named = [_variant(cat, x) for x in variants] if variants is not None else []
    opts.problem, opts.inputs = _problem(cat, problem, named), inputs
    _problem_options(opts)
    shape = _problem_shape(opts.problem, shape)
    if variants is not None:
        chosen = named
        opts.dtype = dtype or (chosen[0].dtypes[0] if chosen else "fp32")  # wgmma,wgmma_ws: bf16
    else:  # the ladder of this input type
        chosen = [v for v in cat.ladder(opts.problem) if opts.dtype in v.dtypes
                  and (opts.out_dtype == "fp32" or "OUT_DTYPE" in v.params)]
    if not chosen:
        raise GemmlabError("no variants to compare")
    team = _team(opts, store)
    with _Progress(progress) as reporter:
        doc, rows = measure.compare(chosen, shape, opts, reporter, out, record=record, team=team)
    extra = ["--variants", ",".join(v.name for v in chosen)] if variants is not None else []
    return ResultSet.of(dict(doc, rows=rows), _argv("compare", shape, opts, doc, kernels_dirs, extra))


def sweep(variant: str | Variant, grid, shape=4096, *, dtype: str | None = None, reps: int = 10, rounds: int = 1,
          seed: int | None = None, check: str = "cupy", timeout: float = 60.0, out: str | Path | None = None,
          fresh: bool = False, save_best: bool = False, jobs: int | None = None, kernels_dirs=(),
          record: bool = True, progress=True, gpus: int | None = 1, out_dtype: str | None = None,
          store: str | None = None):
    """Time a variant over a grid of parameters, fastest first, cuBLAS last (`gemmlab sweep`). grid is
    {name: [values]} or {name: "2..8"}, or a list of `NAME=V1,V2|A..B[:STEP]` texts; configurations its
    constraints forbid are skipped (the document's "skipped" says why). What the history has for this
    GPU and shape is reused unless fresh; save_best writes the fastest into the tuning cache auto reads.
    gpus: one worker per GPU of this host (None: all), each configuration timed alone on its own. Under
    mpirun, srun or torchrun each rank measures its share of the configurations on its GPU, and rank 0
    returns them all, records them and saves the best (gemmlab/spread.py; store as compare's)."""
    from . import grid as grids, measure
    from .present.resultset import ResultSet
    _launched(gpus)
    cat, opts = catalog(kernels_dirs), _options(dtype, reps, rounds, seed, check, timeout, gpus)
    v = _variant(cat, variant)
    opts.problem = v.problem  # a variant of another problem sweeps on that problem's inputs (n, or M x N)
    shape = _problem_shape(v.problem, shape)
    first = v.resolve(v.for_dtype(dtype, None, out_dtype))
    opts.dtype, opts.out_dtype = v.dtype(first), v.out_dtype(first)
    specs = grids.specs(grid)
    for name, option in (("DTYPE", "--dtype"), ("OUT_DTYPE", "--out-dtype")):
        if any(sp.split("=", 1)[0].strip() == name for sp in specs):
            raise GemmlabError(f"a sweep runs one {'input' if name == 'DTYPE' else 'C'} type; choose it with {option}")
    valid, skipped = grids.grid(v, specs, fixed=v.for_dtype(opts.dtype, None, opts.out_dtype))
    out = new_file(out, "--out")
    team = _team(opts, store)
    with _Progress(progress) as reporter:
        for n, why, example in grids.skip_summary(skipped):
            reporter.note(f"skipped {n}: {why}  (e.g. {example})")
        if not valid:
            raise GemmlabError(f"no point of the grid satisfies {v.name}'s constraints ({len(skipped)} skipped)")
        about = {"skipped": [{"params": typed, "why": why} for typed, why in skipped],
                 "swept": [grids.parse_spec(sp)[0] for sp in specs]}
        doc, rows = measure.sweep(v, valid, shape, opts, reporter, out, fresh=fresh, compile_jobs=jobs, record=record,
                                  about=about, team=team)
        if save_best and not doc.get("interrupted") and doc.get("rank", 0) == 0:
            measure.save_best(doc, rows, shape, reporter)
    extra = ["--variant", v.name] + [a for sp in specs for a in ("--param", sp)]
    extra += (["--fresh"] if fresh else []) + (["--save-best"] if save_best else [])
    return ResultSet.of(dict(doc, rows=rows), _argv("sweep", shape, opts, doc, kernels_dirs, extra))


def _shapes_variants(cat: Catalog, variants) -> tuple[bool, list[Variant]]:
    names = [variants] if isinstance(variants, (str, Variant)) else list(variants)
    if not names:
        raise GemmlabError("no variants given")
    return "auto" in names, [_variant(cat, n) for n in names if n != "auto"]


def suite(variants=None, only=None, *, shapes: str | None = None, random: int | None = None, dtype: str | None = None,
          reps: int = 10, rounds: int = 1, seed: int | None = None, timeout: float = 60.0, out: str | Path | None = None,
          kernels_dirs=(), record: bool = True, progress=True, gpus: int | None = 1, out_dtype: str | None = None,
          refs=None, problem: str | None = None, inputs: str | None = None, store: str | None = None):
    """A suite of shapes with auto and/or the named variants and cuBLAS (and the reference rows of `refs`), each shape's roofline bound and
    % of it, x cuBLAS, and per variant the geometric mean, minimum and share of shapes at or above cuBLAS
    (`gemmlab suite`). shapes: "lab" (the default: the MIT 6.S894 lab's 12, with the course's targets), "llm"
    (Llama-3 8B and 70B) or a suite file; or random=N shapes drawn log-uniformly from `seed` (default:
    a fresh one, in the result). only: those "MxNxK" of the suite. dtype: the suite's first by default.
    gpus: this host's GPUs (None: all), the shapes dealt out over them, each shape whole on one GPU
    (cuBLAS and its jobs there, so its x cuBLAS is that GPU's). variants: default auto.
    problem (or that of the variants): another problem's sizes (its own, a suite file of that problem's,
    or random=N) with its rungs (default: its best) beside its cupy reference, x cupy in place of x cuBLAS;
    only names n (MxN for transpose), inputs its input set to time. Under mpirun, srun or torchrun each
    rank measures its share of the shapes (each shape with all its jobs) on its GPU, and rank 0 returns
    them all (gemmlab/spread.py; store as compare's)."""
    from . import measure, problems, spread, suites
    from .jobs import fresh_seed
    from .present.resultset import ResultSet
    _launched(gpus)
    cat = catalog(kernels_dirs)
    auto, named = _shapes_variants(cat, variants) if variants is not None else (False, [])
    problem = _problem(cat, problem, named)
    if variants is None:  # auto, or another problem's best rung
        auto, named = _shapes_variants(cat, "auto" if problem == "gemm" else problems.get(problem).best)
    elif auto and problem != "gemm":
        raise GemmlabError(f"auto chooses GEMM kernels; name {problem} variants (by default its best, "
                           f"{problems.get(problem).best})", hint=f"`gemmlab list --problem {problem}` shows them")
    _options(dtype or "fp32", reps, rounds, seed, "cupy", timeout)  # bad numbers: one error before the ranks talk
    team = spread.join(seed, store, max(timeout, 120.0))  # under a launcher: rank 0's seed, for the shapes too
    seed = team.seed if team else seed
    if random is not None:
        if shapes is not None:
            raise GemmlabError("--random draws its own shapes; it does not take --shapes")
        seed = fresh_seed() if seed is None else seed
        suite_ = suites.random_shapes(random, seed, dtype or "fp32", problem=problem)
    elif shapes is not None:
        suite_ = suites.load(shapes)
        if suite_.problem != problem:
            raise GemmlabError(f"--shapes {shapes} holds {suite_.problem} shapes, not {problem}'s", hint=(
                f"leave --shapes out for {problem}'s own sizes, or give a suite file that says problem = \"{problem}\""
                if suite_.problem == "gemm" else f"give --problem {suite_.problem}"))
    else:
        suite_ = suites.load("lab") if problem == "gemm" else suites.sizes(problem)
    if only is not None:
        suite_ = suite_.only([only] if isinstance(only, str) else list(only))
    dtype = dtype or suite_.dtypes[0]
    opts = _options(dtype, reps, rounds, seed, "cupy", timeout, gpus, out_dtype, refs)
    opts.problem, opts.inputs = problem, inputs
    opts.device = team.gpu() if team else None
    _problem_options(opts)
    for v in named:
        v.for_dtype(dtype, None, opts.out_dtype)  # a variant without a kernel for the types: one error now
    out = new_file(out, "--out")
    with _Progress(progress) as reporter:
        doc = measure.suite(suite_, auto, named, cat, opts, reporter, out, record=record, team=team)
    argv = ["suite", "--variants", ",".join((["auto"] if auto else []) + [v.name for v in named])]
    argv += ["--problem", problem] if problem != "gemm" else []
    argv += ["--inputs", inputs] if inputs is not None else []
    argv += ["--random", str(random)] if random is not None else ["--shapes", shapes] if shapes is not None else []
    argv += ["--only", ",".join(suite_.label(e.shape) for e in suite_.entries)] if only is not None else []
    argv += (["--dtype", dtype] if problem == "gemm" else []) + ["--reps", str(reps)]
    argv += ["--rounds", str(rounds)] if rounds != 1 else []
    argv += ["--out-dtype", opts.out_dtype] if opts.out_dtype != "fp32" else []
    argv += ["--seed", str(doc["seed"])] if doc.get("seed") is not None else []
    argv += ["--gpus", str(opts.gpus)] if opts.gpus != 1 else []
    return ResultSet.of(doc, argv + _refs_argv(opts) + _dirs_argv(kernels_dirs))


def scaling(variants=("auto",), sizes=(256, 512, 1024, 2048, 4096), *, numpy: bool = False, reps: int = 10,
            timeout: float = 60.0, kernels_dirs=(), record: bool = True, progress=True):
    """GFLOP/s against the size of squares for the variants and cuBLAS (and numpy.matmul on the CPU)."""
    from . import measure
    from .present.resultset import ResultSet
    cat, opts = catalog(kernels_dirs), _options("fp32", reps, 1, None, "cupy", timeout)
    ns = sorted(set(sizes))
    if not ns or not all(isinstance(n, int) and n >= 1 for n in ns):
        raise GemmlabError(f"sizes must be positive integers, not {list(sizes)!r}")
    auto, named = _shapes_variants(cat, variants)
    with _Progress(progress) as reporter:
        doc = measure.scaling(ns, auto, named, cat, opts, reporter, numpy=numpy, record=record)
    argv = ["scaling", "--variants", ",".join((["auto"] if auto else []) + [v.name for v in named]),
            "--sizes", ",".join(map(str, ns)), "--reps", str(reps)] + (["--backend", "numpy"] if numpy else [])
    return ResultSet.of(doc, argv + _dirs_argv(kernels_dirs))


def dist(schedule="ring", variant: str | Variant | None = "wgmma_ws", params: dict | None = None, shape=4096, *,
         gpus: int | None = None, dtype: str | None = None, reps: int = 20, seed: int | None = None,
         timeout: float = 120.0, comm_sms: int = 0, baseline: bool = True, single: bool = True,
         store: str | None = None, measure: bool = False, timeline: bool = False, out: str | Path | None = None,
         kernels_dirs=(), progress=True):
    """A GEMM over several GPUs (`gemmlab dist`): one process per GPU, NCCL between them, `variant` (at
    `params`) as each GPU's GEMM. schedule: a name of kernels/dist/ (ring, allgather, reduce_scatter,
    summa, allgather_ce: the copy engines, with gemmlab[dist]), several, or "all"; each beside its NCCL +
    cuBLAS baseline without overlap (unless not baseline), and with single, our kernel and cuBLAS on one GPU for the whole problem. The gathered C is
    checked element by element before anything is timed. gpus: this host's N GPUs (default all); under
    mpirun, srun or torchrun the launcher's ranks instead (store: a file that passes the NCCL id where no
    MPI or torch is there). comm_sms: SMs our kernel leaves to NCCL where they overlap. measure: NCCL's
    bus bandwidth instead. timeline: for a schedule with an arrival step (allgather_arrival,
    allgather_pulls), events in its timed repetitions that say when the barrier, each chunk and the GEMM
    ended (the row's "timeline"; the events may shift the row's own time a little). A ResultSet;
    meta["fault"] says which rank stopped the job, if one did."""
    from .multigpu import job as dist_job, schedule as schedules
    from .multigpu.launcher import from_env
    from .multigpu.rank import Item, Job
    from .jobs import fresh_seed
    from .present.resultset import ResultSet
    shape, out = _shape(shape), new_file(out, "--out")
    _options(dtype, reps, 1, seed, "cupy", timeout)  # the same checks as every command's
    if not isinstance(comm_sms, int) or isinstance(comm_sms, bool) or comm_sms < 0:
        raise GemmlabError(f"comm_sms must be a number of SMs (0 or more), not {comm_sms!r}")
    cat = schedules.catalog()
    v, resolved = None, {}
    if not measure and variant not in (None, "cuBLAS"):
        v = _variant(catalog(kernels_dirs), variant)
        resolved = v.resolve(v.for_dtype(dtype, dict(params or {})))
        dtype = v.dtype(resolved)
    dtype = dtype or "bf16"
    names = [] if measure else _schedule_names(schedule, cat, lambda: _world(gpus, from_env().world))
    waits = v is not None and "ARRIVAL" in v.params  # our kernel can wait for rows as they arrive
    if schedule == "all":
        names = [n for n in names if waits or not cat[n].arrival]
    if timeline and measure:
        raise GemmlabError("--timeline follows a schedule's repetitions, and --measure runs none")
    if timeline and schedule != "all" and (without := [n for n in names if not cat[n].arrival]):
        raise GemmlabError(f"--timeline follows an arrival step's barrier, chunks and GEMM, and {', '.join(without)} "
                           f"has none", hint="the schedules with one: " +
                           ", ".join(sorted(n for n, s in cat.items() if s.arrival)))
    for n in names:
        if cat[n].arrival and not waits:
            raise GemmlabError(f"{n} starts one GEMM on rows as they arrive, which needs a variant with an ARRIVAL "
                               f"parameter, not {v.name if v else 'cuBLAS'}", hint="--variant wgmma_ws")
    items = []
    for name in names:
        items.append(Item(name, v.name if v else "cuBLAS", True, "ours" if v else "baseline"))
        base = Item(cat[name].baseline, "cuBLAS", False, "baseline")
        if baseline and v and base not in items:
            items.append(base)
    seed = fresh_seed() if seed is None else seed
    job = Job(shape, dtype, seed, items, cat, v, resolved, reps, comm_sms=comm_sms, measure=measure,
              timeline=bool(timeline))
    with _Progress(progress) as reporter:
        doc, rows, rank = dist_job.run(job, gpus, reporter, store, timeout, out, single=single and v is not None)
    argv = ["dist"] + (["--measure"] if measure else ["--schedule", ",".join(names),
                                                      "--variant", v.name if v else "cuBLAS"] + _params_argv(resolved))
    argv += ["--shape", f"{shape.M},{shape.N},{shape.K}", "--dtype", dtype, "--reps", str(reps), "--seed", str(seed)]
    argv += (["--gpus", str(gpus)] if gpus else []) + (["--comm-sms", str(comm_sms)] if comm_sms else [])
    argv += ([] if baseline else ["--no-baseline"]) + ([] if single else ["--no-single"])
    argv += ["--timeline"] if timeline else []
    return ResultSet.of(dict(doc, rows=rows, rank=rank), argv + _dirs_argv(kernels_dirs))


def _world(gpus, launched: int) -> int:
    """How many ranks a dist run will have: the launcher's, else the GPUs asked for, else this host's."""
    if launched > 1:
        return launched
    if gpus:
        return gpus
    from .multigpu.job import gpu_count
    return gpu_count()


def _schedule_names(schedule, cat: dict, world) -> list[str]:
    """The schedules asked for: a name, names, or "all" (those that run on world() GPUs)."""
    names = [schedule] if isinstance(schedule, str) else list(schedule)
    if names == ["all"]:  # those that run here: on this many GPUs, and with the copy engines if nccl4py is there
        import math
        from .multigpu.comm import copy_engines_missing, transport_missing
        n, ce = world(), copy_engines_missing() is None
        one_sided = {t: ce and transport_missing(t) is None
                     for t in {s.transport for s in cat.values()} - {"allgather"}}
        return [name for name, s in cat.items() if (not s.square or math.isqrt(n) ** 2 == n)
                and (ce or not s.copy_engines) and one_sided.get(s.transport, True)]
    for n in names:
        if n not in cat:
            raise GemmlabError(f"no schedule '{n}'", hint="the schedules: " + ", ".join(sorted(cat)) + ", or all")
    if not names:
        raise GemmlabError("no schedule given")
    return names


def show(variant: str | Variant, params: dict | None = None, what: str = "source", *, dtype: str | None = None,
         arch: str | None = None, kernels_dirs=()):
    """The rendered CUDA source, its PTX or its SASS (text), or its resources (a dict), as `gemmlab show`.
    No GPU needed (arch defaults to the GPU's, else sm_90)."""
    from dataclasses import asdict
    from .compile import compile_rendered, sass
    from .render import render
    if what not in ("source", "ptx", "sass", "resources"):
        raise GemmlabError(f"what is source, ptx, sass or resources, not {what!r}")
    v = _variant(catalog(kernels_dirs), variant)
    resolved = v.resolve(v.for_dtype(dtype, dict(params or {})))
    rendered = render(v, resolved)
    if what == "source":
        return rendered.source
    compiled = compile_rendered(rendered, default_arch(arch)[0])
    if what == "ptx":
        return compiled.ptx
    if what == "sass":
        return sass(compiled)
    # compiled.arch: the target it was built for (wgmma's sm_90a where sm_90 was asked for)
    return dict(variant=v.name, params=resolved, arch=compiled.arch, threads=v.threads(resolved),
                **asdict(compiled.resources), compile_ms=None if compiled.cached else compiled.compile_ms,
                cached=compiled.cached)


def history(variant: str | None = None, limit: int = 20) -> list[dict]:
    """Past runs, newest last, as `gemmlab history --json` gives them."""
    from .results import history as hist
    return hist.runs(variant, limit)
