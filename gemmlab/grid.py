"""Parameter sweeps: the grid a user asks for, split into the configurations a template allows and
those its constraints reject (with the reason), compiled in parallel before anything runs.

    --param TILE=8,16,32        a list
    --param REG=2..8            a range of integers, both ends included
    --param BK=8..32:8          a range with a step

Nothing here needs a GPU: `gemmlab sweep` hands the valid configurations to jobs.run_jobs.
"""

from __future__ import annotations

import itertools
import os
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from .errors import GemmlabError
from .procs import adopt, context
from .templates import Variant, show_params, show_value

_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*(?::\s*(\d+))?\s*$")
MAX_GRID = 10_000


def parse_spec(spec: str) -> tuple[str, list[str]]:
    """`NAME=8,16,32` or `NAME=2..8` or `NAME=8..32:8` -> (NAME, values as typed)."""
    if "=" not in spec:
        raise GemmlabError(f"--param takes NAME=V1,V2 or NAME=A..B[:STEP], not '{spec}'")
    name, text = (s.strip() for s in spec.split("=", 1))
    m = _RANGE.match(text)
    if m:
        lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        if step < 1 or hi < lo:
            raise GemmlabError(f"--param {spec}: a range goes up from A to B with a positive step")
        values = [str(v) for v in range(lo, hi + 1, step)]
    else:
        values = [v.strip() for v in text.split(",") if v.strip()]
    if not name or not values:
        raise GemmlabError(f"--param {spec}: give a name and at least one value")
    return name, values


def specs(grid) -> list[str]:
    """The API's grid as --param texts: a list of `NAME=...` texts as it is, or {NAME: [values]} or
    {NAME: "A..B[:STEP]"} (values in their template type, or as text)."""
    if isinstance(grid, str):
        return [grid]
    if isinstance(grid, dict):
        out = []
        for name, values in grid.items():
            if isinstance(values, str):
                out.append(f"{name}={values}")
            elif isinstance(values, (list, tuple, range)) and values:
                out.append(f"{name}=" + ",".join(show_value(v) for v in values))
            else:
                raise GemmlabError(f"the grid's {name} takes a list of values or a range text, not {values!r}")
        return out
    if isinstance(grid, (list, tuple)) and all(isinstance(sp, str) for sp in grid):
        return list(grid)
    raise GemmlabError(f"a grid is {{NAME: [values]}} or a list of NAME=V1,V2 texts, not {grid!r}")


def grid(variant: Variant, specs: list[str], fixed: dict | None = None) -> tuple[list[dict], list[tuple[dict, str]]]:
    """(valid parameter sets, [(rejected set as typed, why)]). Parameters not swept keep their
    defaults, or the values in `fixed` (such as DTYPE); a name the template does not have is an error,
    not a skip."""
    axes = dict(parse_spec(s) for s in specs)
    for name in axes:
        if name not in variant.params:
            variant.resolve({name: axes[name][0]})  # raises the "no parameter NAME (did you mean ...)" error
    size = 1
    for values in axes.values():
        size *= len(values)
    if size > MAX_GRID:
        raise GemmlabError(f"the grid has {size} points; at most {MAX_GRID}", hint="sweep fewer values at once")
    valid, skipped, seen = [], [], set()
    for combo in itertools.product(*axes.values()):
        typed = dict(zip(axes, combo))
        try:
            params = variant.resolve({**(fixed or {}), **typed})
        except GemmlabError as e:
            lines = e.message.splitlines()
            skipped.append((typed, lines[1].strip() if len(lines) > 1 else lines[0]))  # the first reason
            continue
        key = tuple(params.items())
        if key not in seen:  # "08" and "8" are one configuration
            seen.add(key)
            valid.append(params)
    return valid, skipped


def skip_summary(skipped: list[tuple[dict, str]]) -> list[tuple[int, str, str]]:
    """[(how many, why, an example)] for the rejected points, most frequent reason first."""
    counts = Counter(why for _, why in skipped)
    example = {}
    for typed, why in skipped:
        example.setdefault(why, show_params(typed))
    return [(n, why, example[why]) for why, n in counts.most_common()]


def _compile(rendered, arch):
    from .compile import compile_rendered
    try:
        compile_rendered(rendered, arch)
        return None
    except GemmlabError as e:
        return e.message


def _start_worker(environ: dict, ignore_sigint: bool) -> None:
    adopt(environ)
    if ignore_sigint:  # Ctrl-C is the parent's: it stops the build and keeps what was built
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pool(jobs: int, ignore_sigint: bool = False) -> ProcessPoolExecutor:
    """Compiles run in processes, whatever NVRTC does with the GIL (procs.py: forked, with NVRTC loaded)."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context(), initializer=_start_worker,
                               initargs=(dict(os.environ), ignore_sigint))


def compile_all(rendered: list, arch: str, jobs: int | None = None) -> list[str | None]:
    """Compile every rendered source into the cache, `jobs` at a time (default: the CPU count); the
    error message of each one that fails, in order (None for a success)."""
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1 or len(rendered) <= 1:
        return [_compile(r, arch) for r in rendered]
    with _pool(jobs) as pool:
        return list(pool.map(_compile, rendered, [arch] * len(rendered)))


# ---------------------------------------------------------------------------- `gemmlab build`

def _distance(params: dict, defaults: dict) -> int:
    return sum(params[k] != defaults.get(k) for k in params)


def _configs(variant: Variant, fixed: dict, every: bool, on_count=None):
    """A variant's configurations to build, lazily: its defaults first; with `every`, then every other
    valid configuration, the closest to the defaults first (each allowed value alone before pairs)."""
    defaults = variant.resolve(fixed)
    yield defaults
    if not every:
        return
    if on_count:
        on_count(variant)  # enumerating pipelined's 18,432 configurations takes a while: say so
    valid = [p for p, bad in variant.configs() if not bad and all(p.get(k) == x for k, x in fixed.items())]
    valid.sort(key=lambda p: _distance(p, defaults))
    for p in valid:
        if p != defaults:
            yield p


def build_plan(variants: list[Variant], fixed, every: bool, limit: int | None = None,
               on_count=None) -> list[tuple[Variant, dict]]:
    """The (variant, params) that `gemmlab build` compiles, in the variants' order. With a limit, at most
    that many, taken from each variant in turn (so each gets its defaults first, then its nearest
    neighbours), and only the variants that need more than their defaults are enumerated. `fixed(v)`:
    the values every configuration of v keeps (its DTYPE)."""
    gens = [_configs(v, fixed(v), every, on_count) for v in variants]
    picked: list[list[dict]] = [[] for _ in variants]
    live = list(range(len(variants)))
    count = 0
    while live and (limit is None or count < limit):
        for i in list(live):
            if limit is not None and count >= limit:
                break
            try:
                picked[i].append(next(gens[i]))
                count += 1
            except StopIteration:
                live.remove(i)
    return [(v, p) for v, ps in zip(variants, picked) for p in ps]


def _build_one(item) -> dict:
    variant, params, arch, use_cache = item
    from .compile import compile_rendered
    from .render import render
    row = {"variant": variant.name, "params": params, "arch": arch}
    try:
        c = compile_rendered(render(variant, params), arch, use_cache=use_cache)
    except GemmlabError as e:
        return dict(row, result="FAIL", error=str(e))
    r = c.resources
    return dict(row, arch=c.arch, registers=r.registers, smem=r.smem, stack=r.stack, spills=r.spills,
                compile_ms=None if c.cached else c.compile_ms, cached=c.cached, result="ok", error=None)


def build_all(plan: list[tuple[Variant, dict]], arch: str, use_cache: bool = True, jobs: int | None = None,
              on_row=None) -> tuple[list[dict], bool]:
    """Compile every (variant, params) of the plan, `jobs` at a time in worker processes (default: the
    CPU count); (a row each, in the plan's order; whether Ctrl-C stopped it, and then only the rows
    done). `on_row(row)` sees each row when it is done."""
    jobs = min(jobs or os.cpu_count() or 1, max(len(plan), 1))
    items = [(v, p, arch, use_cache) for v, p in plan]
    rows: list[dict | None] = [None] * len(items)
    on_row = on_row or (lambda row: None)
    try:
        if jobs == 1:
            for i, item in enumerate(items):
                rows[i] = _build_one(item)
                on_row(rows[i])
        else:
            from concurrent.futures import as_completed
            pool = _pool(jobs, ignore_sigint=True)
            try:
                futures = {pool.submit(_build_one, item): i for i, item in enumerate(items)}
                for f in as_completed(futures):
                    rows[futures[f]] = f.result()
                    on_row(rows[futures[f]])
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
    except KeyboardInterrupt:
        return [r for r in rows if r is not None], True
    return rows, False
