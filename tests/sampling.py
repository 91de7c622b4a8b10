"""Which configurations the CPU suite compiles: a sample chosen by risk, a fraction of Variant.sample's.

Variant.sample (what the GPU tests run) gives, for a space too large to enumerate, the defaults and one
configuration per allowed value, each as close to the defaults as the constraints allow: one value
changed at a time, about 24 compiles of a second each for pipelined, lean and spread. What goes wrong
in a compile is a value's code path that does not compile, or too many registers (spills, a serialized
wgmma) when large values meet. `risk_sample` covers both with fewer compiles: every allowed value of
every parameter is still compiled at least once, and the values are combined, largest first (the
biggest tiles, the most stages and splits together: the boundary where registers run out), then the
next largest, down to the smallest values together. Each type's default configuration (the one a user
runs) comes first. Spaces small enough to enumerate (at most ENUMERATE valid configurations) are
compiled whole, as before."""

import itertools

ENUMERATE = 64  # Variant.sample's limit: up to this many valid configurations, all of them


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
        config = dict(defaults)
        for name, value in todo:  # each parameter takes the largest value still to do that keeps it valid
            if config[name] == defaults[name] and not v.violations(trial := dict(config, **{name: value})):
                config = trial
        if config == defaults:  # no value to do fits beside the defaults alone: the nearest valid one
            config = v._nearest(defaults, *todo[0])
            if config is None:  # a value no valid configuration takes
                todo.pop(0)
                continue
        picked.append(config)
        todo = [(n, c) for n, c in todo if config[n] != c]
    return picked
