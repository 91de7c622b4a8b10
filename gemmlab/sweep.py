"""Parameter sweeps: the grid a user asks for, split into the configurations a template allows and
those its constraints reject (with the reason), compiled in parallel before anything runs.

    --param TILE=8,16,32        a list
    --param REG=2..8            a range of integers, both ends included
    --param BK=8..32:8          a range with a step

Nothing here needs a GPU: `gemmlab sweep` hands the valid configurations to jobs.run_jobs.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from .errors import GemmlabError
from .templates import Variant, show_params

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


def compile_all(rendered: list, arch: str, jobs: int | None = None) -> list[str | None]:
    """Compile every rendered source into the cache, `jobs` at a time (default: the CPU count); the
    error message of each one that fails, in order (None for a success)."""
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1 or len(rendered) <= 1:
        return [_compile(r, arch) for r in rendered]
    # Processes, whatever NVRTC does with the GIL; spawned, since the parent runs a progress thread.
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_compile, rendered, [arch] * len(rendered)))
