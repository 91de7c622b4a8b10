"""Which configurations the CPU suite compiles: a sample chosen by risk, about a quarter of Variant.sample's.

Variant.sample (what the GPU tests run) gives, for a space too large to enumerate, the defaults and one
configuration per allowed value, each as close to the defaults as the constraints allow: one value
changed at a time, 24 compiles of a second or two each for pipelined, lean and spread. What goes wrong
in a compile is a value's code path that does not compile, or too many registers (spills, a serialized
wgmma) where large values meet. `risk_sample` covers both in fewer compiles. The default configuration
(the one a user runs) comes first, in each size of input type: bf16's and fp16's, or e4m3's and e5m2's,
differ in the words that name the type and in nothing that takes registers or shared memory, so the
second type of a size comes in a later round, in a configuration of its own (e5m2's default was 5 s of
a two-core machine's CPU and said nothing e4m3's does not). Then the values are combined, largest first: the first
round puts the biggest tiles, the most stages and splits together, each parameter at the largest value
that still fits beside the others (the boundary where registers run out, so every value may go into
it); each later round the largest values still to do, down to the smallest ones. A round ends when no
value still to do fits. After the first round only the edges are still to do: the smallest and the
largest of a numeric parameter's values, and every value of any other (an input type, an epilogue, a
switch), which pick code paths. A numeric value between two edges takes the code path of the
larger ones (SPLIT_K 8 is SPLIT_K 64's, STAGES 3 is STAGES 4's) with other constants, and the edges
hold the largest and the smallest tiles it can meet; a lone middle value (a tail of SPLIT_K's) cost a
compile a round. The GPU run compiles every value (test_gpu.py: Variant.sample, with test_compile's
checks), and GEMMLAB_TESTS_FULL=1 makes this sample take every value too (127
compiles on the CPU, where the edges take 83). The smallest spaces (at most ENUMERATE valid
configurations) are compiled whole."""

import itertools
import os

from gemmlab.results.model import ITEM_BYTES

ENUMERATE = 5  # up to this many valid configurations, all of them (naive's and coalesced's 3: 0.1 s a compile;
# regblock's 21, vectorized's and bankfree's 8 took 15 s of CPU, their combinations no riskier than the others';
# gemv_n's 6 are its 3 in each 16-bit type, 2 s a compile, where the risk sample takes 4 with every value)


def switched_on(value: str | None) -> bool:
    """An environment variable that is a switch: on unless unset, empty, 0, false or no."""
    return (value or "").strip().lower() not in ("", "0", "false", "no")


FULL = switched_on(os.environ.get("GEMMLAB_TESTS_FULL"))


def edges(param) -> list:
    """The values of a parameter that pick a code path of their own: the smallest and the largest number,
    or every value where they are not numbers (bool is not a number here: both of a switch's values)."""
    choices = list(param.choices or ())
    if choices and all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        return [c for c in choices if c in (min(choices), max(choices))]
    return choices


def risk_sample(v, full: bool = FULL) -> list[dict]:
    valid = list(itertools.islice((p for p, bad in v.configs() if not bad), ENUMERATE + 1))
    if len(valid) <= ENUMERATE:
        return valid
    defaults = v.defaults()
    picked = []
    sizes = set()
    for start in [None, *v.dtypes]:
        if start and ITEM_BYTES[start] in sizes:  # the code of another type of the same size differs in
            continue  # its type words alone: a later round takes that type in a configuration of its own
        p = dict(defaults, **v.for_dtype(start)) if start else defaults
        if p not in picked and not v.violations(p):
            picked.append(p)
            sizes.add(ITEM_BYTES[p.get("DTYPE", "fp32")])
    # (parameter, value) still to compile, the largest values first (the last of each parameter's choices)
    todo = [(n, c) for n, param in v.params.items() for c in (param.choices or ()) if not any(p[n] == c for p in picked)]
    todo.sort(key=lambda t: -list(v.params[t[0]].choices).index(t[1]))
    keep = {n: edges(param) for n, param in v.params.items()}
    while todo:
        # the largest value still to do, in the valid configuration nearest the defaults that takes it; then
        # each other value still to do, largest first, where the nearest configuration that takes it keeps
        # every parameter this round has set (a warp tile's shape moves several parameters at once)
        config = v._nearest(defaults, *todo[0])
        if config is None:  # a value no valid configuration takes
            todo.pop(0)
            continue
        fixed = {n for n in config if config[n] != defaults[n]}
        alone = True
        for name, value in todo[1:]:
            if name in fixed:
                continue
            trial = v._nearest(config, name, value)
            if trial is not None and all(trial[n] == config[n] for n in fixed):
                fixed |= {n for n in trial if trial[n] != config[n]} | {name}
                config, alone = trial, False
        if alone:  # the tail of one parameter (SPLIT_K's middle values): beside the smallest tiles, not the
            # defaults, whose compile is the slowest (spread's two seconds); the boundaries are covered above
            config = v._nearest(valid[0], *todo[0]) or config
        picked.append(config)
        # after the first round (the largest of everything), the edges alone
        todo = [(n, c) for n, c in todo if config[n] != c and (full or c in keep[n])]
    return picked
