"""Find kernel templates and read their headers; validate parameters and launch geometry.

A template is one file `NAME.cu.j2`, or `NN_NAME.cu.j2` where the number orders it in its folder (the
built-in ones are kernels/fp32/03_tiled.cu.j2 and so on, in ladder order). Its contract sits at the top in
a Jinja comment holding TOML:

    {#---
    name = "tiled"
    parent = "coalesced"
    idea = "one line: what this rung does"
    predict = "optional: what should change against the parent, and by how much"
    predict_x = 1.5                        # optional: that prediction as a speed-up over the parent
    dtypes = ["fp32"]                      # or several of fp32 tf32 fp16 bf16: then DTYPE is a parameter
    arch = "sm_90a"                        # optional: the kernel needs this exact target (wgmma)

    [params.TILE]
    default = 32
    choices = [8, 16, 32]
    help = "what TILE means"

    [[constraints]]
    check = "THREADS <= MAX_THREADS"       # a Jinja expression over the parameters, the device limits
    why = "a block holds at most MAX_THREADS threads"  # and the launch's THREADS and SMEM (see below)

    [launch]                               # expressions over M, N, K, SMS, the parameters and the limits
    block = ["TILE", "TILE"]
    grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
    smem = "0"                             # dynamic shared memory, bytes

Optional launch keys: `workspace` (bytes of scratch passed after K), `zero_output` (C is zeroed before
each launch), `resident` (every block of the grid must run at once, because blocks wait for each other:
the runner asks the driver first), `[launch.reduce]` (a second kernel), `[launch.tma]` (TMA tensor maps
over A and B, passed after K: box sizes in elements, contiguous dimension first, 128-byte swizzle),
`[launch.gpc_order]` (`when`, `cluster`, `group`: where `when` holds, a table of grid slots by GPC is passed
after the tensor maps, see gemmlab/gpc.py) and `[[launch.requires]]` (checks on the shape, such as the
alignment TMA needs, each with its reason).
    ---#}

A template writes no device limit as a number: expressions and the body name them (MAX_THREADS,
REGS_PER_THREAD, REGS_PER_SM, SMEM_PER_BLOCK, SMEM_OPTIN, SMEM_PER_SM; gemmlab/limits.py), and they are
the GPU's where gemmlab knows it (Variant.on), else the sm_90 defaults. Nor does it write a formula twice:
constraints see the launch's threads per block as THREADS (as the body does) and its dynamic shared
memory as SMEM, so `check = "SMEM <= SMEM_OPTIN"` checks launch.smem itself.

Nothing here needs a GPU or cupy.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from jinja2 import StrictUndefined, Undefined, meta
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment, modifies_known_mutable, safe_range

from .errors import GemmlabError
from .limits import NAMES as LIMIT_NAMES, Limits, limits as device_limits

SUFFIX = ".cu.j2"
HEADER_RE = re.compile(r"\A\{#---[ \t]*\n(.*?)\n---#\}", re.S)
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DTYPES = ("fp32", "tf32", "fp16", "bf16")
# The C type of an input element. TF32 inputs are FP32 arrays: the tensor core reads 19 of their 32 bits.
C_TYPES = {"fp32": "float", "tf32": "float", "fp16": "__half", "bf16": "__nv_bfloat16"}

# What a kernel may take, by the names launch.args lists: the matrices (A and B in the input type, C
# float32), the sizes (int32), launch.workspace bytes of scratch, a TMA tensor map over A or B (128
# bytes by value), the GPC order's table (gpu/gpc.py), and the epilogue's float alpha and beta and
# float bias[N].
ARGUMENTS = ("A", "B", "C", "M", "N", "K", "workspace", "tma.A", "tma.B", "gpc_order", "alpha", "beta", "bias")

# CUDA's hard limits on a launch's shape (all current architectures); the device's limits are in limits.py.
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)


def show_value(v: object) -> str:
    """A parameter value as a user types it with -p (true, not True)."""
    return str(v).lower() if isinstance(v, bool) else str(v)


def show_params(values: Mapping[str, object]) -> str:
    """`TILE=32 PREFETCH=true`."""
    return " ".join(f"{k}={show_value(v)}" for k, v in values.items())


def cdiv(a: int, b: int) -> int:
    """Ceiling division: how many tiles of size b cover a."""
    return -(-a // b)


# ---------------------------------------------------------------------------- the sandbox

# Templates are data: courses hand them out, users share them, and gemmlab reads every one in the user's
# directories on each command. So the template body and every header expression run in Jinja's immutable
# sandbox (no Python attributes such as `__class__` or `__globals__`, no changing lists or dicts, no
# `str.format` reaching into objects) and see only the names given here and in render.py: nothing in a
# template runs on the host. See docs/templates-are-data.md.
UNSAFE = "templates may not use Python attributes such as `__globals__`"


class Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox without Jinja's default globals (cycler, joiner, namespace, lipsum, dict:
    no template needs them), and an unsafe attribute refused at once, rather than handed on as an
    undefined value that a test such as `is defined` would quietly swallow."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.globals.clear()

    def getattr(self, obj, attribute):  # `x._y`, `x|attr("_y")`: refused even where x is undefined
        if isinstance(attribute, str) and attribute.startswith("_"):
            return self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):  # `lipsum["__globals__"]`
        if isinstance(obj, Undefined) and isinstance(argument, str) and argument.startswith("_"):
            return self.unsafe_undefined(obj, argument)
        return super().getitem(obj, argument)

    def unsafe_undefined(self, obj, attribute):
        owner = obj._undefined_name if isinstance(obj, Undefined) and obj._undefined_name else type(obj).__name__
        if modifies_known_mutable(obj, attribute):
            raise Refused(f"templates may not change a list, dict or set: `{owner}.{attribute}` is not allowed")
        raise Refused(f"{UNSAFE}: `{owner}.{attribute}` is not allowed")


class Refused(SecurityError):
    """What Sandbox refuses, said in one line."""


def sandbox_message(e: SecurityError) -> str:
    """What the sandbox refused, in one line."""
    return str(e) if isinstance(e, Refused) else f"{UNSAFE}; here: {e}"


# Expressions in headers are Jinja expressions: the same language as the template body, in the same sandbox.
_expr_env = Sandbox(undefined=StrictUndefined)
_expr_env.globals.update(cdiv=cdiv, min=min, max=max)
BODY_GLOBALS = {"range": safe_range, "cdiv": cdiv}  # what a template body sees besides its parameters (and render.py's)


@functools.lru_cache(maxsize=None)
def _compiled(expr: str):
    # compiling is ~100x slower than evaluating: do it once. An expression that is a bare undefined name
    # gives the Undefined itself (not Jinja's default None), so that evaluate can say which name it is.
    return _expr_env.compile_expression(expr, undefined_to_none=False)


@functools.lru_cache(maxsize=None)
def names_in(expr: str) -> frozenset[str]:
    """The names an expression reads (none where it does not parse: evaluating it says why)."""
    try:
        return frozenset(meta.find_undeclared_variables(_expr_env.parse("{{ (" + expr + ") }}")))
    except TemplateError:
        return frozenset()


# What a constraint sees besides the parameters and the limits: the launch's own numbers, so that a
# constraint on them does not write their formula again.
LAUNCH_NAMES = ("THREADS", "SMEM")
SHAPE_NAMES = ("M", "N", "K", "SMS")


def expression_line(path: Path, expr: str) -> int | None:
    """The line of a template's header that holds this expression as a TOML string, where it can be found."""
    try:
        m = HEADER_RE.match(Path(path).read_text())
    except (OSError, UnicodeDecodeError):
        return None
    if not m:
        return None
    basic = expr.replace("\\", "\\\\").replace('"', '\\"')
    for quoted in (f"'{expr}'", f'"{basic}"', f"'''{expr}'''", f'"""{expr}"""', expr):
        at = m.group(1).find(quoted)
        if at >= 0:
            return m.group(1).count("\n", 0, at) + 2  # the TOML text begins on the file's second line
    return None


def evaluate(expr: str, names: Mapping[str, object], where: str, path: Path | None = None):
    """The value of a header expression; `where` says which (`launch.smem`), after `path`, the template."""
    try:
        value = _compiled(expr)(**names)
        if isinstance(value, Undefined):  # `block = ["TILEX"]`: "'TILEX' is undefined", not "gave None"
            value._fail_with_undefined_error()
        return value
    except SecurityError as e:  # one line, at the header's line: the sandbox refused, nothing ran
        line = expression_line(path, expr) if path else None
        at = f"{path}:{line}: " if line else f"{path}: " if path else ""
        raise GemmlabError(f"{at}{where} '{expr}': {sandbox_message(e)}") from None
    except TemplateError as e:
        where = f"{path}: {where}" if path else where
        raise GemmlabError(f"{where}: cannot evaluate '{expr}': {e}") from None
    except (ArithmeticError, TypeError, ValueError) as e:
        where = f"{path}: {where}" if path else where
        raise GemmlabError(f"{where}: '{expr}' failed: {e}") from None


# ---------------------------------------------------------------------------- locations

def builtin_dir() -> Path:
    """The templates shipped with gemmlab: gemmlab/kernels when installed (pyproject maps kernels/
    there), ./kernels in a checkout or an editable install. The rungs are in its folders (fp32/, skinny/,
    tensor/), the pieces they share in lib/."""
    here = Path(__file__).resolve().parent
    installed = here / "kernels"
    return installed if installed.is_dir() else here.parent / "kernels"


def data_dir() -> Path:
    """gemmlab's per-user data: templates of `gemmlab new`, the run history, the tuning cache."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gemmlab"


def default_user_dir() -> Path:
    return data_dir() / "kernels"


def user_dirs(extra: tuple[str | Path, ...] = ()) -> list[Path]:
    """User template directories, highest priority first: --kernels-dir, then $GEMMLAB_KERNELS, then the
    per-user directory that `gemmlab new` writes to by default."""
    dirs = [Path(d) for d in extra]
    dirs += [Path(d) for d in os.environ.get("GEMMLAB_KERNELS", "").split(os.pathsep) if d]
    dirs.append(default_user_dir())
    seen, out = set(), []
    for d in dirs:
        key = d.expanduser().resolve()
        if key not in seen:
            seen.add(key)
            out.append(d.expanduser())
    return out


# ---------------------------------------------------------------------------- the header

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

    def arguments(self, values: Mapping[str, object], geometry: "Geometry") -> tuple[str, ...]:
        """The kernel's arguments by name, in order: launch.args where the header lists them, else
        A B C M N K followed by what this launch asks for (a workspace where it has bytes, the TMA maps,
        the GPC order's table where launch.gpc_order.when holds) and, for an EPILOGUE parameter, alpha
        beta bias."""
        if self.args is not None:
            return self.args
        return (("A", "B", "C", "M", "N", "K") + (("workspace",) if geometry.workspace else ())
                + tuple(f"tma.{op}" for op, _ in geometry.tma) + (("gpc_order",) if geometry.gpc_order else ())
                + (("alpha", "beta", "bias") if "EPILOGUE" in values else ()))

    # -- parameters

    def dtype(self, values: Mapping[str, object]) -> str:
        """The input type these parameters run: DTYPE where the variant has it, else its one type."""
        return str(values.get("DTYPE", self.dtypes[0]))

    def for_dtype(self, dtype: str | None, overrides: Mapping[str, object] | None = None) -> dict:
        """`overrides` with DTYPE set for --dtype; an error when the variant has no kernel for it."""
        out = dict(overrides or {})
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
        if "THREADS" in read:
            names["THREADS"] = self.threads(values)
        if "SMEM" in read:
            names["SMEM"] = evaluate(self.smem, {**names, "M": 1, "N": 1, "K": 1, "SMS": 1}, "launch.smem", self.path)
        for c in self.constraints:
            if not evaluate(c.check, names, "constraint", self.path):
                shown = [f"{n} = {names[n]}" for n in dict.fromkeys(re.findall(r"\b[A-Z_][A-Z0-9_]*\b", c.check))
                         if n in LIMIT_NAMES + LAUNCH_NAMES]
                out.append(f"{c.check}: {c.why}" + (f" [{', '.join(shown)}]" if shown else ""))
        if out:
            return out  # the template's own reasons say it better than the generic limits below
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
        for e in exprs:
            v = evaluate(e, names, f"launch.{what}", self.path)
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
        tma = tuple((op, self._dims(box, names, f"tma.{op}")[:2]) for op, box in self.tma.items())
        order = None
        if self.gpc_order and evaluate(self.gpc_order["when"], names, "launch.gpc_order.when", self.path):
            order = tuple(int(evaluate(self.gpc_order[k], names, f"launch.gpc_order.{k}", self.path))
                          for k in ("cluster", "group"))
        return Geometry(grid, block, int(smem), int(workspace), zero, resident, reduce_grid, reduce_block, tma, order)


def _fail(path: Path, msg: str, line: int | None = None) -> GemmlabError:
    where = f"{path}:{line}" if line else str(path)
    return GemmlabError(f"bad template header in {where}: {msg}")


_TOP_KEYS = {"name", "parent", "idea", "predict", "predict_x", "dtypes", "arch", "params", "constraints", "launch"}


def load_variant(path: Path, builtin: bool = True) -> Variant:
    """Read one template's header. Raises GemmlabError naming the file and line of a mistake."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise GemmlabError(f"cannot read template {path}: {e}") from None
    m = HEADER_RE.match(text)
    if not m:
        raise _fail(path, "a template starts with a '{#---' line and its TOML header ends with '---#}'", 1)
    try:
        meta = tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        lm = re.search(r"at line (\d+)", msg)
        # the TOML text begins on the file's second line
        raise _fail(path, re.sub(r" \(at line \d+, column \d+\)", "", msg),
                    int(lm.group(1)) + 1 if lm else None) from None

    def need(key, kind, table=meta, where=""):
        if key not in table:
            raise _fail(path, f"missing '{where}{key}'")
        if not isinstance(table[key], kind):
            raise _fail(path, f"'{where}{key}' must be a {getattr(kind, '__name__', kind)}")
        return table[key]

    unknown = set(meta) - _TOP_KEYS
    if unknown:
        raise _fail(path, f"unknown key(s) {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
    name = need("name", str)
    if name != name_of(path):
        raise _fail(path, f"name = \"{name}\" but the file is {path.name}; they must agree "
                          f"(name it {name}{SUFFIX}, or set name = \"{name_of(path)}\")")
    if not NAME_RE.match(name):
        raise _fail(path, f"name '{name}' must be an identifier (letters, digits, _)")
    idea = need("idea", str)
    parent = meta.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise _fail(path, "'parent' must be a string")
    predict = meta.get("predict", "")
    predict_x = meta.get("predict_x")
    if predict_x is not None and (isinstance(predict_x, bool) or not isinstance(predict_x, (int, float)) or predict_x <= 0):
        raise _fail(path, "'predict_x' must be a positive number: the predicted speed-up over the parent")
    arch = meta.get("arch")
    if arch is not None and not (isinstance(arch, str) and re.fullmatch(r"sm_\d+a?", arch)):
        raise _fail(path, "'arch' must name a target such as sm_90a")
    dtypes = tuple(meta.get("dtypes", ["fp32"]))
    if not dtypes or any(d not in DTYPES for d in dtypes):
        raise _fail(path, f"dtypes must be a non-empty list from {list(DTYPES)}")

    params: dict[str, Param] = {}
    for pname, spec in need("params", dict).items() if "params" in meta else ():
        if not NAME_RE.match(pname):
            raise _fail(path, f"parameter name '{pname}' must be an identifier")
        if not isinstance(spec, dict) or "default" not in spec:
            raise _fail(path, f"params.{pname} needs a default")
        extra = set(spec) - {"default", "choices", "help"}
        if extra:
            raise _fail(path, f"params.{pname}: unknown key(s) {sorted(extra)}")
        default = spec["default"]
        if type(default) not in (int, bool, str):
            raise _fail(path, f"params.{pname}.default must be an integer, boolean or string")
        choices = spec.get("choices")
        if choices is not None:
            if not isinstance(choices, list) or not choices or any(type(c) is not type(default) for c in choices):
                raise _fail(path, f"params.{pname}.choices must be a non-empty list of {type(default).__name__}")
            if default not in choices:
                raise _fail(path, f"params.{pname}.default {default!r} is not one of its choices {choices}")
            choices = tuple(choices)
        params[pname] = Param(pname, default, choices, spec.get("help", ""))
    if "DTYPE" in params:
        raise _fail(path, "DTYPE is made from 'dtypes'; do not declare it as a parameter")
    for pname in params:
        if pname in LIMIT_NAMES:
            raise _fail(path, f"parameter name '{pname}' is a device limit's (gemmlab/limits.py); choose another")
        if pname in LAUNCH_NAMES:
            raise _fail(path, f"parameter name '{pname}' is taken: templates see the launch's {pname} by it")
    if dtypes != ("fp32",):
        # The input type becomes a parameter like any other: constraints, launch expressions and the
        # template see it, sweeps can vary it, and the history tells runs of different types apart.
        params = {"DTYPE": Param("DTYPE", dtypes[0], dtypes, "input type (--dtype); C is always fp32")} | params

    def checks(items, where):
        out = []
        for i, c in enumerate(items):
            if not isinstance(c, dict) or not isinstance(c.get("check"), str) or not isinstance(c.get("why"), str):
                raise _fail(path, f"{where}[{i}] needs a 'check' expression and a 'why' message")
            out.append(Constraint(c["check"], c["why"]))
        return out

    constraints = checks(meta.get("constraints", []), "constraints")

    launch = need("launch", dict)
    block = tuple(need("block", list, launch, "launch."))
    grid = tuple(need("grid", list, launch, "launch."))
    for what, dims in (("block", block), ("grid", grid)):
        if not 1 <= len(dims) <= 3 or not all(isinstance(d, (str, int)) for d in dims):
            raise _fail(path, f"launch.{what} must list 1 to 3 expressions")
    smem = str(launch.get("smem", "0"))
    workspace = str(launch.get("workspace", "0"))
    flags = {}
    for key in ("zero_output", "resident"):
        value = launch.get(key, False)
        if not isinstance(value, (bool, str)):
            raise _fail(path, f"launch.{key} must be true, false, or an expression over the parameters")
        flags[key] = str(value).lower() if isinstance(value, bool) else value
    reduce = launch.get("reduce")
    if reduce is not None:
        if not isinstance(reduce, dict):
            raise _fail(path, "launch.reduce must be a table with block and grid")
        reduce = {k: tuple(map(str, need(k, list, reduce, "launch.reduce."))) for k in ("block", "grid")}
    tma = launch.get("tma", {})
    if not isinstance(tma, dict) or set(tma) - {"A", "B"} or not all(
            isinstance(b, list) and len(b) == 2 for b in tma.values()):
        raise _fail(path, "launch.tma maps A and/or B to a box: 2 expressions, contiguous dimension first")
    tma = {op: tuple(map(str, box)) for op, box in tma.items()}
    gpc_order = launch.get("gpc_order", {})
    if not isinstance(gpc_order, dict) or set(gpc_order) != ({"when", "cluster", "group"} if gpc_order else set()):
        raise _fail(path, "launch.gpc_order has three expressions: when, cluster and group")
    gpc_order = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in gpc_order.items()}
    requires = checks(launch.get("requires", []), "launch.requires")
    args = launch.get("args")
    if args is not None:
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _fail(path, "launch.args must list the kernel's arguments by name")
        needs = {"workspace": launch.get("workspace"), "tma.A": "A" in tma, "tma.B": "B" in tma,
                 "gpc_order": gpc_order}
        for a in args:
            if a not in ARGUMENTS:
                raise _fail(path, f"launch.args: unknown argument {a!r}; known: {', '.join(ARGUMENTS)}")
            if a in needs and not needs[a]:
                raise _fail(path, f"launch.args: {a} needs launch.{a.split('.')[0]}")
        args = tuple(args)
    unknown = set(launch) - {"block", "grid", "smem", "workspace", "zero_output", "resident", "reduce", "tma",
                             "gpc_order", "requires", "args"}
    if unknown:
        raise _fail(path, f"unknown launch key(s) {sorted(unknown)}")

    for c in constraints:  # THREADS and SMEM as constraints see them: over the parameters alone
        for what, exprs in (("THREADS", block), ("SMEM", (smem,))):
            shape = sorted(set().union(*(names_in(str(e)) for e in exprs)) & set(SHAPE_NAMES))
            if what in names_in(c.check) and shape:
                raise _fail(path, f"constraint '{c.check}' reads {what}, but launch.{'block' if what == 'THREADS' else 'smem'} "
                                  f"depends on {', '.join(shape)}: a constraint holds for every shape; "
                                  f"check the shape in [[launch.requires]]")
    variant = Variant(name=name, path=path, idea=idea, parent=parent or None, dtypes=dtypes,
                      params=params, constraints=constraints,
                      block=tuple(map(str, block)), grid=tuple(map(str, grid)), smem=smem,
                      workspace=workspace, zero_output=flags["zero_output"], resident=flags["resident"],
                      reduce_block=reduce["block"] if reduce else None, reduce_grid=reduce["grid"] if reduce else None,
                      tma=tma, gpc_order=gpc_order, requires=requires, arch=arch, predict=predict, predict_x=predict_x,
                      builtin=builtin, args=args)
    # The defaults must be a valid configuration, and the expressions must evaluate.
    broken = variant.violations(variant.defaults())
    if broken:
        raise _fail(path, "the defaults break a constraint: " + "; ".join(broken))
    variant.geometry(variant.defaults(), 64, 64, 64)  # (a shape every requirement so far accepts)
    return variant


# ---------------------------------------------------------------------------- the catalog

@dataclass
class Catalog:
    """All variants found, user directories before the built-in one."""
    dirs: list[Path]
    variants: dict[str, Variant] = field(default_factory=dict)
    broken: dict[str, GemmlabError] = field(default_factory=dict)

    def get(self, name: str) -> Variant:
        if name in self.variants:
            return self.variants[name]
        if name in self.broken:
            raise self.broken[name]
        near = difflib.get_close_matches(name, list(self.variants) + list(self.broken), n=3)
        raise GemmlabError(
            f"unknown variant '{name}'" + (f"; did you mean {', '.join(near)}?" if near else ""),
            hint="`gemmlab list` shows every variant")

    def ladder(self) -> list[Variant]:
        """Variants in ladder order: each after its parent, siblings by name."""
        children: dict[str | None, list[Variant]] = {}
        for v in self.variants.values():
            parent = v.parent if v.parent in self.variants else None
            children.setdefault(parent, []).append(v)
        out: list[Variant] = []

        def walk(parent):
            for v in sorted(children.get(parent, []), key=lambda v: (not v.builtin, v.name)):
                out.append(v)
                walk(v.name)

        walk(None)
        return out


ORDER_RE = re.compile(r"^\d+_")


def name_of(path: Path) -> str:
    """The variant a template file holds: NAME for NAME.cu.j2, and for NN_NAME.cu.j2, whose number only
    orders the files of a folder (kernels/fp32/03_tiled.cu.j2 is `tiled`)."""
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    return ORDER_RE.sub("", stem)


def discover(extra_dirs: tuple[str | Path, ...] = ()) -> Catalog:
    """Scan the user directories (highest priority first) and the built-in directory, each with its
    subfolders. A template whose header is broken is kept aside with its error, so others still list;
    so are two templates of one name in one directory, since neither is the one meant."""
    users = user_dirs(extra_dirs)
    for d in extra_dirs:
        if not Path(d).expanduser().is_dir():
            raise GemmlabError(f"--kernels-dir {d}: no such directory")
    cat = Catalog(dirs=users + [builtin_dir()])
    found: dict[str, list[tuple[Path, bool]]] = {}
    twins: dict[Path, Path] = {}  # a template -> another of its name in the same directory
    for d in cat.dirs:
        builtin = d == cat.dirs[-1]
        if not d.is_dir():
            continue
        here: dict[str, Path] = {}
        for path in sorted(d.rglob("*" + SUFFIX)):
            name = name_of(path)
            if name in here:
                twins.setdefault(here[name], path)
                continue
            here[name] = path
            found.setdefault(name, []).append((path, builtin))
    for name, places in found.items():
        path, builtin = places[0]
        if path in twins:
            cat.broken[name] = GemmlabError(f"two templates of variant '{name}' in one directory: {path} and "
                                            f"{twins[path]}", hint="rename or remove one of them")
            continue
        try:
            v = load_variant(path, builtin)
        except GemmlabError as e:
            cat.broken[name] = e
            continue
        if len(places) > 1:
            v.shadows = places[1][0]
        cat.variants[name] = v
    return cat
