"""Which configurations the CPU suite compiles: a sample chosen by risk, about a third of Variant.sample's.

Variant.sample (what the GPU tests run) gives, for a space too large to enumerate, the defaults and one
configuration per allowed value, each as close to the defaults as the constraints allow: one value
changed at a time, 24 compiles of a second or two each for pipelined, lean and spread. What goes wrong
in a compile is a value's code path that does not compile, or too many registers (spills, a serialized
wgmma) where large values meet. `risk_sample` covers both in fewer compiles: every allowed value of
every parameter is still compiled at least once, and the values are combined, largest first: the
first round puts the biggest tiles, the most stages and splits together (the boundary where registers
run out), each later round the largest values still to do, down to the smallest ones. A round ends when
no value still to do fits, so there are about as many rounds as the parameter with the most values has
values (SPLIT_K's 8); the last rounds, one parameter's middle values alone, go beside the smallest tiles.
Each input type's default configuration (the one a user runs) comes first.
The smallest spaces (at most ENUMERATE valid configurations) are compiled whole."""

import itertools

ENUMERATE = 6  # up to this many valid configurations, all of them (naive, coalesced, tiled: 0.1 s a compile;
# regblock's 21, vectorized's and bankfree's 8 took 15 s of CPU, their combinations no riskier than the others')


def risk_sample(v) -> list[dict]:
    valid = list(itertools.islice((p for p, bad in v.configs() if not bad), ENUMERATE + 1))
    if len(valid) <= ENUMERATE:
        return valid
    defaults = v.defaults()
    picked = []
    for start in [None, *v.dtypes]:
        p = dict(defaults, **v.for_dtype(start)) if start else defaults
        if p not in picked and not v.violations(p):
            picked.append(p)
    # (parameter, value) still to compile, the largest values first (the last of each parameter's choices)
    todo = [(n, c) for n, param in v.params.items() for c in (param.choices or ()) if not any(p[n] == c for p in picked)]
    todo.sort(key=lambda t: -list(v.params[t[0]].choices).index(t[1]))
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
        todo = [(n, c) for n, c in todo if config[n] != c]
    return picked
