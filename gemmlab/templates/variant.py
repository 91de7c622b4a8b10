"""A variant: one template's contract as its header declares it (parameters, constraints, launch
expressions), and what follows from it: the values a configuration resolves to, the configurations worth
testing, and the launch geometry and kernel arguments for a shape.

Its expressions see the parameters, the device limits (the GPU's where gemmlab knows it, Variant.on, else
the sm_90 defaults of gemmlab/limits.py) and, in constraints, the launch's THREADS and SMEM; the launch
expressions see the shape as well. header.py reads a header into a Variant.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from ..errors import GemmlabError
from ..limits import NAMES as LIMIT_NAMES, Limits, limits as device_limits
from .sandbox import evaluate, evaluate_all, names_in

# What a kernel may take, by the names launch.args lists: the matrices (A and B in the input type, C
# float32), the sizes (int32), launch.workspace bytes of scratch, a TMA tensor map over A, B or B^T
# (N x K, FP8's K-major B, transposed before any timing; 128 bytes by value) or over C (TMA stores into it),
# the GPC order's table (gpu/gpc.py), the epilogue's float alpha and beta and float bias[N], and FP8's scales of A and B
# (const float*, laid out as gemmlab/results/fp8.py's kernel_layout says for the SCALE parameter), and
# for an ARRIVAL parameter that holds, the flags and layout of rows still arriving (gemmlab/gpu/arrival.py).
ARGUMENTS = ("A", "B", "C", "M", "N", "K", "workspace", "tma.A", "tma.B", "tma.Bt", "tma.C", "gpc_order", "alpha",
             "beta", "bias", "scale.A", "scale.B", "arrival")

# CUDA's hard limits on a launch's shape (all current architectures); the device's limits are in limits.py.
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)

# What a constraint sees besides the parameters and the limits: the launch's own numbers, so that a
# constraint on them does not write their formula again.
LAUNCH_NAMES = ("THREADS", "SMEM")


def show_value(v: object) -> str:
    """A parameter value as a user types it with -p (true, not True)."""
    return str(v).lower() if isinstance(v, bool) else str(v)


def show_params(values: Mapping[str, object]) -> str:
    """`TILE=32 PREFETCH=true`."""
    return " ".join(f"{k}={show_value(v)}" for k, v in values.items())


@dataclass(frozen=True)
class Param:
    name: str
    default: object
    choices: tuple | None = None
    help: str = ""

    @property
    def type(self) -> type:
        return type(self.default)

    def parse(self, text: str):
        """A value typed on the command line, as this parameter's type."""
        if self.type is bool:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise GemmlabError(f"parameter {self.name} takes true or false, not '{text}'")
        if self.type is int:
            try:
                return int(text, 0)
            except ValueError:
                raise GemmlabError(f"parameter {self.name} takes an integer, not '{text}'") from None
        return text

    def check(self, value) -> str | None:
        """None when the value is allowed, else why not. A value of the wrong type raises: no
        constraint could be evaluated with it."""
        if type(value) is not self.type:
            raise GemmlabError(f"parameter {self.name} takes a {self.type.__name__}, not {value!r}")
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(show_value(c) for c in self.choices)
            return f"{self.name}={show_value(value)} is not allowed; choose one of: {allowed}"
        return None


@dataclass(frozen=True)
class Constraint:
    check: str
    why: str


@dataclass(frozen=True)
class Geometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int  # dynamic shared memory, bytes
    workspace: int = 0  # bytes of scratch memory passed to gemm as a 7th argument (0: none)
    zero_output: bool = False  # C is set to 0 before each gemm launch (kernels that accumulate into C)
    resident: bool = False  # every block must be resident at once (blocks that wait for each other)
    reduce_grid: tuple[int, int, int] | None = None  # a second kernel, reduce(W, C, M, N, K), after gemm
    reduce_block: tuple[int, int, int] | None = None
    tma: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (operand, box) per TMA tensor map, in argument order
    gpc_order: tuple[int, int] | None = None  # (blocks per cluster, GROUP_M): pass a GPC order's table (gpc.py)
    zero_workspace: bool = False  # the workspace is zeroed before each launch (flags a kernel's blocks leave there)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


_samples: dict[tuple, list[dict]] = {}


@dataclass
class Variant:
    name: str
    path: Path
    idea: str
    parent: str | None
    dtypes: tuple[str, ...]
    params: dict[str, Param]
    constraints: list[Constraint]
    block: tuple[str, ...]
    grid: tuple[str, ...]
    smem: str
    workspace: str = "0"
    zero_output: str = "false"  # an expression: true for kernels that add into C
    resident: str = "false"  # an expression: true where the kernel's blocks wait for each other
    reduce_block: tuple[str, ...] | None = None
    reduce_grid: tuple[str, ...] | None = None
    tma: dict[str, tuple[str, ...]] = field(default_factory=dict)  # operand (A or B) -> box expressions
    gpc_order: dict[str, str] = field(default_factory=dict)  # when, cluster, group: expressions
    requires: list[Constraint] = field(default_factory=list)  # checks on M, N, K
    arch: str | None = None  # an exact target the kernel needs (sm_90a for wgmma)
    limits: Limits = device_limits()  # the device limits its expressions and body see (on() sets a GPU's)
    predict: str = ""
    predict_x: float | None = None  # the prediction as a number: speed-up over the parent
    builtin: bool = True
    shadows: Path | None = None  # the template this user variant hides
    args: tuple[str, ...] | None = None  # launch.args: the kernel's arguments by name (ARGUMENTS)
    bases: tuple[Path, ...] = ()  # the templates its `from` starts from, nearest first (inherit.py)
    problem: str = "gemm"  # what the kernel computes (gemmlab/problems/): gemm, transpose, reduce, ...
    zero_workspace: str = "false"  # an expression: true where the kernel needs its workspace zeroed first

    @property
    def entry(self) -> str:
        """The kernel the template defines: `gemm` for a GEMM, else the problem's name (`transpose`)."""
        return "gemm" if self.problem == "gemm" else self.problem

    @property
    def second_entry(self) -> str:
        """The second kernel of [launch.reduce]: GEMM's `reduce(W, C, M, N, K)`; another problem's
        `<problem>_finish`, with the same arguments as the first."""
        return "reduce" if self.problem == "gemm" else f"{self.problem}_finish"

    def arguments(self, values: Mapping[str, object], geometry: "Geometry") -> tuple[str, ...]:
        """The kernel's arguments by name, in order: launch.args where the header lists them, else
        A B C M N K followed by what this launch asks for (a workspace where it has bytes, the TMA maps,
        the GPC order's table where launch.gpc_order.when holds), for an EPILOGUE parameter, alpha
        beta bias, for a SCALE parameter (FP8's scaling mode), the scales of A and B, and where an ARRIVAL
        parameter holds, the arrival flags (gemmlab/gpu/arrival.py)."""
        if self.args is not None:
            return self.args
        return (("A", "B", "C", "M", "N", "K") + (("workspace",) if geometry.workspace else ())
                + tuple(f"tma.{op}" for op, _ in geometry.tma) + (("gpc_order",) if geometry.gpc_order else ())
                + (("alpha", "beta", "bias") if "EPILOGUE" in values else ())
                + (("scale.A", "scale.B") if "SCALE" in values else ())
                + (("arrival",) if values.get("ARRIVAL") else ()))

    # -- parameters

    def dtype(self, values: Mapping[str, object]) -> str:
        """The input type these parameters run: DTYPE where the variant has it, else its one type."""
        return str(values.get("DTYPE", self.dtypes[0]))

    def out_dtype(self, values: Mapping[str, object]) -> str:
        """C's type for these parameters: OUT_DTYPE where the variant has it, else fp32."""
        return str(values.get("OUT_DTYPE", "fp32"))

    def for_dtype(self, dtype: str | None, overrides: Mapping[str, object] | None = None,
                  out_dtype: str | None = None) -> dict:
        """`overrides` with DTYPE set for --dtype (and OUT_DTYPE for --out-dtype); an error when the
        variant has no kernel for them."""
        out = dict(overrides or {})
        if out_dtype is not None and out_dtype != self.out_dtype(out):
            if "OUT_DTYPE" not in self.params:
                raise GemmlabError(f"variant '{self.name}' writes C in fp32 only, not {out_dtype}",
                                   hint="the tensor-core rungs wmma, mma and the wgmma ones take --out-dtype")
            if "OUT_DTYPE" in out:
                raise GemmlabError(f"--out-dtype {out_dtype} and -p OUT_DTYPE={out['OUT_DTYPE']} disagree")
            out["OUT_DTYPE"] = out_dtype
        if dtype is None:
            return out
        if dtype not in self.dtypes:
            raise GemmlabError(f"variant '{self.name}' runs {', '.join(self.dtypes)}, not {dtype}",
                               hint=f"`gemmlab list --dtype {dtype}` shows the variants that run {dtype}")
        if "DTYPE" in self.params:
            if "DTYPE" in out and str(out["DTYPE"]) != dtype:
                raise GemmlabError(f"--dtype {dtype} and -p DTYPE={out['DTYPE']} disagree")
            out["DTYPE"] = dtype
        return out

    def defaults(self) -> dict:
        return {n: p.default for n, p in self.params.items()}

    def resolve(self, overrides: Mapping[str, object] | None = None) -> dict:
        """Defaults updated with overrides (strings are parsed), type- and choice-checked, and every
        constraint satisfied; otherwise a GemmlabError that says which rule failed and why."""
        values = self.defaults()
        for name, value in (overrides or {}).items():
            if name not in self.params:
                near = difflib.get_close_matches(name, self.params, n=1)
                known = ", ".join(self.params) or "none"
                raise GemmlabError(
                    f"variant '{self.name}' has no parameter {name}"
                    + (f" (did you mean {near[0]}?)" if near else "")
                    + f"; its parameters: {known}")
            param = self.params[name]
            values[name] = param.parse(value) if isinstance(value, str) and param.type is not str else value
        problems = [why for name, value in values.items() if (why := self.params[name].check(value))]
        problems += self.violations(values)  # a value outside the choices usually breaks a rule too: say which
        if problems:
            raise GemmlabError(f"variant '{self.name}' cannot run with {show_params(values)}:\n  " + "\n  ".join(problems))
        return values

    def on(self, device) -> Variant:
        """This variant with the limits of `device` (a DeviceInfo): what it may be run with, and how it
        renders, on that GPU. Without one, a variant has the sm_90 defaults (limits.py)."""
        found = device_limits(device)
        return self if found == self.limits else dataclasses.replace(self, limits=found)

    def violations(self, values: Mapping[str, object]) -> list[str]:
        """The reason of every constraint these values break, plus the CUDA block-size limits. Constraints
        see the parameters, the device limits, THREADS and SMEM (launch.block's threads and launch.smem,
        worked out only where a constraint reads them); where a constraint names a limit, THREADS or SMEM,
        its reason ends with their values."""
        out = []
        names = {**self.limits.names(), **values}
        read = frozenset().union(*(names_in(c.check) for c in self.constraints))
        block = None  # launch.block, worked out once: for THREADS, or for the limits below
        if "THREADS" in read:
            block = self._dims(self.block, {**names, "M": 1, "N": 1, "K": 1}, "block")
            names["THREADS"] = block[0] * block[1] * block[2]
        if "SMEM" in read:
            names["SMEM"] = evaluate(self.smem, {**names, "M": 1, "N": 1, "K": 1, "SMS": 1}, "launch.smem", self.path)
        checks = evaluate_all(tuple(c.check for c in self.constraints), names, "constraint", self.path)
        for c, holds in zip(self.constraints, checks):
            if not holds:
                shown = [f"{n} = {names[n]}" for n in dict.fromkeys(re.findall(r"\b[A-Z_][A-Z0-9_]*\b", c.check))
                         if n in LIMIT_NAMES + LAUNCH_NAMES]
                out.append(f"{c.check}: {c.why}" + (f" [{', '.join(shown)}]" if shown else ""))
        if out:
            return out  # the template's own reasons say it better than the generic limits below
        if block is None:
            block = self._dims(self.block, {**names, "M": 1, "N": 1, "K": 1}, "block")
        threads = block[0] * block[1] * block[2]
        if min(block) < 1:
            out.append(f"block {block}: every dimension must be at least 1")
        elif threads > self.limits.MAX_THREADS or any(b > m for b, m in zip(block, MAX_BLOCK_DIM)):
            out.append(f"block {block} has {threads} threads: a block holds at most "
                       f"{self.limits.MAX_THREADS} threads (and {MAX_BLOCK_DIM} per dimension)")
        return out

    def configs(self) -> Iterator[tuple[dict, list[str]]]:
        """Every combination of the parameters' choices (others at their defaults), each with the
        reasons it is rejected (empty when valid)."""
        names = list(self.params)
        axes = [self.params[n].choices or (self.params[n].default,) for n in names]
        for combo in itertools.product(*axes):
            values = dict(zip(names, combo))
            yield values, self.violations(values)

    def sample(self, limit: int = 64) -> list[dict]:
        """Valid configurations to test: all of them when there are at most `limit`; otherwise the
        defaults plus, for every allowed value of every parameter, the valid configuration closest to
        the defaults that uses it (so each value is still compiled and run at least once). Worked out
        once per header (pipelined has over 10,000 combinations to check)."""
        key = (tuple(self.params.items()), tuple(self.constraints), self.block, self.smem, self.limits, limit)
        if key not in _samples:
            _samples[key] = self._sample(limit)
        return [dict(p) for p in _samples[key]]

    def _sample(self, limit: int) -> list[dict]:
        valid = []
        for p, bad in self.configs():  # all of them, unless there are more than `limit`
            if not bad:
                valid.append(p)
                if len(valid) > limit:
                    break
        else:
            return valid
        defaults = self.defaults()
        picked = [defaults] if not self.violations(defaults) else []
        for name, param in self.params.items():
            for value in param.choices or ():
                best = self._nearest(defaults, name, value)
                if best is not None and best not in picked:
                    picked.append(best)
        return picked

    def _nearest(self, defaults: dict, name: str, value) -> dict | None:
        """The valid configuration with name=value that differs from the defaults in the fewest other
        parameters (the first in configs() order among those), or None. Searched outward from the
        defaults: a few dozen checks where every combination is tens of thousands (pipelined)."""
        names = list(self.params)
        axes = [self.params[n].choices or (self.params[n].default,) for n in names]
        others = [j for j, n in enumerate(names) if n != name]
        for distance in range(len(others) + 1):
            near = []
            for changed in itertools.combinations(others, distance):
                options = [[c for c in axes[j] if c != defaults[names[j]]] for j in changed]
                for combo in itertools.product(*options):
                    near.append(dict(defaults, **{name: value}, **{names[j]: c for j, c in zip(changed, combo)}))
            near.sort(key=lambda p: [axes[k].index(p[n]) for k, n in enumerate(names)])  # configs() order
            for p in near:
                if not self.violations(p):
                    return p
        return None

    # -- launch

    def _dims(self, exprs: tuple[str, ...], names: Mapping, what: str) -> tuple[int, int, int]:
        dims = []
        for e, v in zip(exprs, evaluate_all(tuple(exprs), names, f"launch.{what}", self.path)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise GemmlabError(f"{self.path}: launch.{what} '{e}' gave {v!r}, not an integer")
            dims.append(v)
        return tuple(dims + [1] * (3 - len(dims)))

    def threads(self, values: Mapping[str, object]) -> int:
        b = self._dims(self.block, {**self.limits.names(), **values, "M": 1, "N": 1, "K": 1}, "block")
        return b[0] * b[1] * b[2]

    def geometry(self, values: Mapping[str, object], M: int, N: int, K: int, sms: int = 1) -> Geometry:
        """The launch for shape M x N x K. `SMS`, the GPU's SM count, sizes persistent grids (1 where
        only the shape's validity is in question)."""
        names = {**self.limits.names(), **values, "M": M, "N": N, "K": K, "SMS": sms}
        for c in self.requires:
            if not evaluate(c.check, names, "launch.requires", self.path):
                raise GemmlabError(f"variant '{self.name}' cannot run shape {M}x{N}x{K}: {c.why} ({c.check})")
        grid = self._dims(self.grid, names, "grid")
        block = self._dims(self.block, names, "block")
        smem = evaluate(self.smem, names, "launch.smem", self.path)
        workspace = evaluate(self.workspace, names, "launch.workspace", self.path)
        reduce_grid = reduce_block = None
        if self.reduce_grid:
            reduce_grid = self._dims(self.reduce_grid, names, "reduce.grid")
            reduce_block = self._dims(self.reduce_block, names, "reduce.block")
        for g in (grid, reduce_grid or grid):
            if any(x < 1 or x > m for x, m in zip(g, MAX_GRID_DIM)):
                raise GemmlabError(
                    f"shape {M}x{N}x{K} needs a grid of {g} blocks for variant '{self.name}'; CUDA allows "
                    f"at most {MAX_GRID_DIM} (x, y, z)", hint="use a larger tile or a smaller shape")
        zero = bool(evaluate(self.zero_output, names, "launch.zero_output", self.path))
        resident = bool(evaluate(self.resident, names, "launch.resident", self.path))
        # A box that evaluates to 0 elements: no map of that operand for these parameters (FP8's B_LAYOUT
        # chooses between B^T's map and B's own).
        tma = tuple((op, dims) for op, box in self.tma.items()
                    if all(dims := self._dims(box, names, f"tma.{op}")[:2]))
        order = None
        if self.gpc_order and evaluate(self.gpc_order["when"], names, "launch.gpc_order.when", self.path):
            order = tuple(int(evaluate(self.gpc_order[k], names, f"launch.gpc_order.{k}", self.path))
                          for k in ("cluster", "group"))
        zero_ws = bool(evaluate(self.zero_workspace, names, "launch.zero_workspace", self.path))
        return Geometry(grid, block, int(smem), int(workspace), zero, resident, reduce_grid, reduce_block, tma, order,
                        zero_workspace=zero_ws)
