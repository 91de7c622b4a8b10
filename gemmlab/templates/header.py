"""A template's header: the TOML at the top of the file, read and checked into a Variant (load_variant).

A template (file.py says how its file is named) holds its contract at the top, in a Jinja comment holding
TOML:

    {#---
    name = "tiled"
    parent = "coalesced"
    from = "coalesced"                     # optional: start from that template (inherit.py)
    idea = "one line: what this rung does"
    predict = "optional: what should change against the parent, and by how much"
    predict_x = 1.5                        # optional: that prediction as a speed-up over the parent
    dtypes = ["fp32"]                      # or several of fp32 tf32 fp16 bf16 e4m3 e5m2: then DTYPE is a parameter
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
over A and B, passed after K: box sizes in elements, contiguous dimension first, 128-byte swizzle; a box
that evaluates to 0 elements passes no map of that operand; a map of C is for TMA stores into it),
`[launch.gpc_order]` (`when`, `cluster`, `group`: where `when` holds, a table of grid slots by GPC is passed
after the tensor maps, see gemmlab/gpu/gpc.py) and `[[launch.requires]]` (checks on the shape, such as the
alignment TMA needs, each with its reason).
    ---#}

Every mistake is reported with the file, and the line where it can be found. A header is checked whole when
it is read: the defaults must satisfy every constraint, and the launch expressions must evaluate for them.

A template writes no device limit as a number: expressions and the body name them (MAX_THREADS,
REGS_PER_THREAD, REGS_PER_SM, SMEM_PER_BLOCK, SMEM_OPTIN, SMEM_PER_SM; gemmlab/limits.py), and they are
the GPU's where gemmlab knows it (Variant.on), else the sm_90 defaults. Nor does it write a formula twice:
constraints see the launch's threads per block as THREADS (as the body does) and its dynamic shared
memory as SMEM, so `check = "SMEM <= SMEM_OPTIN"` checks launch.smem itself.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Callable

from ..errors import GemmlabError
from ..limits import NAMES as LIMIT_NAMES
from .file import HEADER_RE, NAME_RE, SUFFIX, name_of
from .inherit import resolve
from .sandbox import names_in
from .variant import ARGUMENTS, LAUNCH_NAMES, Constraint, Param, Variant

DTYPES = ("fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2")
# The C type of an input element. TF32 inputs are FP32 arrays: the tensor core reads 19 of their 32 bits.
# FP8 inputs are bytes (cuda_fp8.h's types hold one each).
C_TYPES = {"fp32": "float", "tf32": "float", "fp16": "__half", "bf16": "__nv_bfloat16", "e4m3": "__nv_fp8_e4m3",
           "e5m2": "__nv_fp8_e5m2"}
# The shape's names: constraints hold for every shape, so they may not read what depends on these.
SHAPE_NAMES = ("M", "N", "K", "SMS")


def _fail(path: Path, msg: str, line: int | None = None) -> GemmlabError:
    where = f"{path}:{line}" if line else str(path)
    return GemmlabError(f"bad template header in {where}: {msg}")


_TOP_KEYS = {"name", "from", "parent", "idea", "predict", "predict_x", "dtypes", "arch", "params", "constraints", "launch",
             "problem"}


def _read(path: Path) -> dict:
    """A template's header as TOML gives it. Raises GemmlabError naming the file and line of a mistake."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise GemmlabError(f"cannot read template {path}: {e}") from None
    m = HEADER_RE.match(text)
    if not m:
        raise _fail(path, "a template starts with a '{#---' line and its TOML header ends with '---#}'", 1)
    try:
        return tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        lm = re.search(r"at line (\d+)", msg)
        # the TOML text begins on the file's second line
        raise _fail(path, re.sub(r" \(at line \d+, column \d+\)", "", msg),
                    int(lm.group(1)) + 1 if lm else None) from None


def load_variant(path: Path, builtin: bool = True, find: Callable[[str], Path | None] | None = None) -> Variant:
    """Read one template's header. Raises GemmlabError naming the file and line of a mistake. find(name) is
    the template file of that name (the catalog's), for a header with `from` (inherit.py)."""
    path = Path(path)
    meta, bases = resolve(path, _read(path), _read, find, _fail)

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
    problem = meta.get("problem", "gemm")
    if not (isinstance(problem, str) and NAME_RE.match(problem)):
        raise _fail(path, "'problem' names what the kernel computes, such as \"transpose\" (default \"gemm\")")
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
        if not isinstance(items, list):
            raise _fail(path, f"{where} must be a list of tables ([[{where}]]), each with a 'check' and a 'why'")
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
    for key in ("zero_output", "resident", "zero_workspace"):
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
    if not isinstance(tma, dict) or set(tma) - {"A", "B", "Bt", "C"} or not all(
            isinstance(b, list) and len(b) == 2 for b in tma.values()):
        raise _fail(path, "launch.tma maps A, B, Bt (B^T) and/or C to a box: 2 expressions, contiguous dimension first")
    tma = {op: tuple(map(str, box)) for op, box in tma.items()}
    gpc_order = launch.get("gpc_order", {})
    if not isinstance(gpc_order, dict) or set(gpc_order) != ({"when", "cluster", "group"} if gpc_order else set()):
        raise _fail(path, "launch.gpc_order has three expressions: when, cluster and group")
    gpc_order = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in gpc_order.items()}
    requires = checks(launch.get("requires", []), "launch.requires")
    args = launch.get("args")
    if problem != "gemm":  # its arguments are the problem's (gemmlab/problems/), which the runner checks
        if not isinstance(args, list) or not args or not all(isinstance(a, str) and NAME_RE.match(a) for a in args):
            raise _fail(path, f"a {problem} kernel lists its arguments by name in launch.args "
                              "(gemmlab/problems/ declares what each problem provides)")
        args = tuple(args)
    elif args is not None:
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _fail(path, "launch.args must list the kernel's arguments by name")
        needs = {"workspace": launch.get("workspace"), "tma.A": "A" in tma, "tma.B": "B" in tma, "tma.Bt": "Bt" in tma,
                 "tma.C": "C" in tma,
                 "gpc_order": gpc_order}
        for a in args:
            if a not in ARGUMENTS:
                raise _fail(path, f"launch.args: unknown argument {a!r}; known: {', '.join(ARGUMENTS)}")
            if a in needs and not needs[a]:
                raise _fail(path, f"launch.args: {a} needs launch.{a.split('.')[0]}")
        args = tuple(args)
    unknown = set(launch) - {"block", "grid", "smem", "workspace", "zero_output", "resident", "zero_workspace", "reduce", "tma",
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
                      builtin=builtin, args=args, bases=bases, problem=problem,
                      zero_workspace=flags["zero_workspace"])
    # The defaults must be a valid configuration, and the expressions must evaluate.
    broken = variant.violations(variant.defaults())
    if broken:
        raise _fail(path, "the defaults break a constraint: " + "; ".join(broken))
    variant.geometry(variant.defaults(), 64, 64, 64)  # (a shape every requirement so far accepts)
    return variant
