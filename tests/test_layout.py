"""The package's shape: its modules import each other without a circle (lazy imports inside functions
count too: they are still a dependency)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "gemmlab"


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The gemmlab modules `path` imports anywhere in it."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("gemmlab")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("gemmlab"):
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names}  # `from . import check`: a module
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    # an edge to a package is to its __init__; names that are not modules are dropped
    return {m: {t for t in imports(p) if t in files and t != m and t != "gemmlab"} for m, p in files.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in g:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert circles(graph()) == []


def test_the_circle_finder_finds_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_results_need_no_gpu_module():
    """The row model, the check and the history are GPU-free: nothing in results/ imports gpu/."""
    g = graph()
    assert not {t for m, ts in g.items() if m.startswith("gemmlab.results") for t in ts if t.startswith("gemmlab.gpu")}


# The pipeline's stages, lowest first: a module imports only from its own stage or those before it.
STAGES = [
    ("base", ["errors", "files", "limits", "procs"]),
    ("templates", ["templates"]),
    ("build", ["render", "compile", "cache", "kernel"]),
    ("results", ["results", "problems"]),
    ("gpu", ["gpu"]),
    ("present", ["present"]),
    ("run", ["jobs", "worker", "grid", "sanitize", "profile", "suites", "cpu", "watch", "measure"]),
    ("multigpu", ["multigpu", "spread"]),  # spread: sweep, compare and suite over a launcher's ranks
    ("api", ["api"]),
    ("cli", ["cli", "__main__", "notebook"]),
]


def stage(module: str) -> int:
    """The stage of gemmlab.<module> (a package's modules are in the package's stage)."""
    head = module.split(".")[1] if "." in module else None
    for i, (_, members) in enumerate(STAGES):
        if head in members:
            return i
    raise AssertionError(f"{module} is in no stage of tests/test_layout.py: add it to STAGES")


def test_modules_import_only_from_earlier_stages():
    """templates -> build -> results -> gpu -> present -> run -> multigpu -> api -> cli: no module reaches up (the
    GPU-free stages stay GPU-free, the CLI is the only one that parses, the API is the CLI's)."""
    g = graph()
    up = sorted(f"{m} -> {t}" for m, ts in g.items() if m != "gemmlab"
                for t in ts if t != "gemmlab" and stage(t) > stage(m))
    assert up == []


def test_the_stage_check_sees_a_module_that_reaches_up():
    assert stage("gemmlab.render") < stage("gemmlab.gpu.device") < stage("gemmlab.cli.measure")
    with pytest.raises(AssertionError, match="in no stage"):
        stage("gemmlab.nowhere")
