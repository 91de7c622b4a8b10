"""`from`: a template that starts from another one.

    {#---
    name = "rolled"
    from = "tiled"                 # any template the catalog finds: a built-in one, or one of yours
    idea = "tiled, its inner loop kept rolled"
    ---#}
    {% block compute %} ... {% endblock %}

The header is the `from` template's (itself resolved, if it has a `from` of its own), with the child's
keys over it: a parameter or launch key the child declares replaces that one alone, its constraints are
added to the parent's, `parent` defaults to the `from` template, and `name`, `predict` and `predict_x`
(which describe the parent against its own parent) are not inherited. The body, unless it has an
`{% extends %}` of its own, extends the parent's file (render.py adds the tag on the header's closing
line, so the file's lines stay where they are): each `{% block %}` it defines replaces the parent's.

Only headers are read here (TOML, data): resolving a `from` runs nothing of the templates.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from ..errors import GemmlabError

NOT_INHERITED = ("name", "predict", "predict_x")
# An {% extends %} of the template's own: then render.py adds none.
EXTENDS_RE = re.compile(r"\{%-?\s*extends\b")


def merge(parent: dict, child: dict, base: str) -> dict:
    """The child's header over the parent's (`base` is the name the child's `from` gives)."""
    out = {k: v for k, v in parent.items() if k not in NOT_INHERITED}
    for k, v in child.items():
        if k == "from":
            continue
        if k in ("params", "launch") and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = out[k] | v
        elif k == "constraints" and isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = out[k] + v
        else:
            out[k] = v
    if "parent" not in child:
        out["parent"] = base
    return out


def resolve(path: Path, meta: dict, read: Callable[[Path], dict], find: Callable[[str], Path | None] | None,
            fail: Callable[..., GemmlabError], _chain: tuple[tuple[str, Path], ...] = ()) -> tuple[dict, tuple[Path, ...]]:
    """The header of the template at `path` with its `from` resolved, and the files it starts from, nearest
    first. read(path) reads a header; find(name) is the catalog's template of that name (None: none);
    fail(path, message) is the header's error. Every error names the template that was asked for."""
    if "from" not in meta:
        return meta, ()
    top = _chain[0][1] if _chain else path
    base = meta["from"]
    if not isinstance(base, str) or not base:
        raise fail(top, "'from' names a template, as a string: from = \"tiled\"")
    if base == meta.get("name"):
        raise fail(top, f"from = \"{base}\" is this template's own name; a template that starts from {base} "
                        "needs a name of its own")
    target = find(base) if find else None
    if target is None:
        raise fail(top, f"from = \"{base}\": no template of that name (`gemmlab list` shows them)")
    chain = _chain + ((str(meta.get("name")), Path(path).resolve()),)
    if Path(target).resolve() in {p for _, p in chain}:
        circle = " -> ".join([n for n, _ in chain] + [base])
        raise fail(top, f"from = \"{base}\" goes round in a circle: {circle}")
    parent, bases = resolve(target, read(target), read, find, fail, chain)
    return merge(parent, meta, base), (Path(target), *bases)
