"""A Result as a row of plain values, the document a run's rows sit in, and what a row says when it
failed. A row is a dict, so a saved JSON file renders exactly as the live table did (`gemmlab report`).
Its derived numbers (TFLOP/s, % of peak, % of cuBLAS, ...) come from results/metrics.py."""

from __future__ import annotations

import datetime as _dt
import math
import os
import subprocess
from pathlib import Path

from .. import __version__
from ..templates import show_params
from .metrics import Context, derive
from .model import Result


def git_commit() -> str | None:
    """The commit of the gemmlab checkout ($GEMMLAB_COMMIT wins: a copied tree has no .git)."""
    if os.environ.get("GEMMLAB_COMMIT"):
        return os.environ["GEMMLAB_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


# The `gemmlab ...` command line being run, set by the CLI (cli/common.py) for the command's duration.
COMMAND_LINE = "GEMMLAB_COMMAND_LINE"


def portable_arg(arg: str) -> str:
    """An argument of the command line as a result file keeps it: a path under the working directory relative
    to it, any other absolute path as its file name (results get committed and shared, this machine's
    directories mean nothing elsewhere); `--out=PATH` likewise."""
    option, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
    if os.path.isabs(value):
        rel = os.path.relpath(value)
        value = rel if not rel.startswith("..") else os.path.basename(value)
    return option + eq + value


def meta(command: str, device=None, shape=None, seed=None, dtype: str = "fp32") -> dict:
    """What every result document starts with: the command (and, from the CLI, its whole command line),
    when, which gemmlab commit, NVRTC and cupy, the device, the shape, the seed and the input type."""
    from ..compile import nvrtc_version
    out = {"gemmlab": __version__, "command": command,
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "commit": git_commit(), "nvrtc": nvrtc_version()}
    if os.environ.get(COMMAND_LINE):
        out["command_line"] = os.environ[COMMAND_LINE]
    try:
        import cupy
        out["cupy"] = cupy.__version__
    except ImportError:
        pass
    if device is not None:
        out["device"] = device.to_json()
    if shape is not None:
        out["shape"] = {"M": shape.M, "N": shape.N, "K": shape.K}
    if seed is not None:
        out["seed"] = seed
    out["dtype"] = dtype
    return out


def source_label(source: str | None) -> str | None:
    """Where a row's template came from, without this machine's directories (results get committed and
    shared): `kernels/tiled.cu.j2` for a built-in, relative to the gemmlab checkout or the working
    directory when under it, else relative to its own directory (a user's kernels directory: the file
    name). Anything that is not an absolute path (cuBLAS's "cupy.matmul") is kept as it is."""
    if not source or not os.path.isabs(source):
        return source
    from ..templates import builtin_dir
    path = Path(source)
    for base, prefix in ((builtin_dir(), "kernels"), (Path(__file__).resolve().parent.parent, ""), (Path.cwd(), "")):
        try:
            rel = path.resolve().relative_to(base.resolve())
        except (ValueError, OSError):
            continue
        return str(Path(prefix) / rel) if prefix else str(rel)
    return path.name


def row(r: Result, peak_flops: float, cublas_ms: float | None = None) -> dict:
    """Flatten a Result, with its derived metrics (results/metrics.py). Time and rates are given only
    for a passing check."""
    ms = r.valid_time
    res = r.resources
    d = {
        "variant": r.name, "params": r.params, "dtype": r.dtype, "source": source_label(r.source), "user": r.user,
        "status": r.status, "error": r.error,
        "rel_err": r.check.rel_err if r.check else None,
        "max_abs_err": r.check.max_abs_err if r.check else None,
        "reference": r.check.reference if r.check else None,
        "unwritten": r.check.unwritten if r.check else None,
        # the element-wise verdict (gemmlab/results/check.py): how far the worst element went toward its bound,
        # and for a FAIL, where: how many elements, the worst and the first, the tiles, the input set
        "err_bound": r.check.ratio if r.check else None,
        "bad": r.check.bad if r.check else None,
        "check": r.check.summary() if r.check and not r.check.passed else None,
        "worst": r.check.worst if r.check else None, "first": r.check.first if r.check else None,
        "tiles": r.check.tiles if r.check else None,
        "inputs": r.check.inputs if r.check and not r.check.passed else None,
        "clobbered": (r.check.clobbered or None) if r.check else None,
        "samples_ms": r.timing.samples if ms else None, "clocks": r.timing.clocks if ms else None,
        "ms": ms, "ms_min": r.timing.min_ms if ms else None, "ms_max": r.timing.max_ms if ms else None,
        "reps": r.timing.reps if ms else None, "rounds_ms": r.timing.rounds if ms else None,
        "registers": res.registers if res else None, "smem_static": res.smem if res else None,
        "smem_dynamic": r.geometry.smem if r.geometry else None,
        "stack": res.stack if res else None, "spills": res.spills if res else None,
        "grid": list(r.geometry.grid) if r.geometry else None,
        "block": list(r.geometry.block) if r.geometry else None,
        "blocks_per_sm": r.blocks_per_sm,
        "compile_ms": r.compile_ms, "cached": r.cached,
    }
    d.update(r.extra or {})
    return derive(d, Context(r.shape.flops if r.flops is None else r.flops, peak_flops, cublas_ms))


def row_from_history(h: dict, peak_flops: float, cublas_ms: float | None = None) -> dict:
    """A row for a result a sweep takes from the history instead of measuring the same kernel again."""
    from .check import Check
    from .model import Shape, Timing
    r = Result(h["variant"], h["params"], Shape(h["M"], h["N"], h["K"]), source=h["template"] or "",
               dtype=h["dtype"], check=Check(h["rel_err"], math.nan, "history"),
               timing=Timing(h["ms"], h["ms"], h["ms"], 0, samples=h.get("samples")))
    d = row(r, peak_flops, cublas_ms)
    d.update(source_hash=h["source_hash"], vs_last=None, vs_last_text=f"from history #{h['id']}", changed="")
    return d


def params_text(params: dict) -> str:
    return show_params(params) or "-"


BAD = ("FAIL", "ERROR", "CRASHED", "TIMEOUT")  # statuses whose time is never reported


def failures(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] in BAD]


def failure_text(r: dict) -> str:
    """Why a row has no time, in one line."""
    if r["error"]:
        return r["error"]
    if r.get("check"):
        return r["check"]
    if r["unwritten"]:
        return f"{r['unwritten']} elements of C never written"
    if r.get("tol") is not None:  # a file written before the element-wise check
        return f"relative error {r['rel_err']:.2e} > tolerance {r['tol']:.0e}"
    return "wrong result"


def clock_note(r: dict) -> str | None:
    """'SM clock 1410-1980 MHz (median 1755) while timed, held down by: power cap', only for a row whose
    clock NVML saw held down for much of its timing (its median under the highest clock it reached):
    a brief dip is not what made a row slow (gemmlab/gpu/clocks.py)."""
    c = r.get("clocks")
    if not c or not c.get("throttle"):
        return None
    lo, mid, hi = c["sm_mhz"]
    if mid >= hi:
        return None
    return f"SM clock {lo}-{hi} MHz (median {mid}) while timed, held down by: {', '.join(c['throttle'])}"
