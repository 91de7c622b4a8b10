"""The problems besides GEMM (gemmlab/problems/): each declaration's inputs, reference and check with
numpy standing in for cupy, every rung of their ladders rendered and compiled for sm_90, the header's
`problem` key, and the CLI's --problem and list. The GPU half (every rung right on odd sizes) is
tests/test_problems_gpu.py."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from gemmlab import GemmlabError, problems
from gemmlab.cli import cli
from gemmlab.compile import compile_rendered
from gemmlab.gpu.problems import ProblemRun
from gemmlab.render import render
from gemmlab.templates import discover, load_variant

CAT = discover()
RUNGS = [v for p in problems.DECLARATIONS for v in CAT.ladder(p)]


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    assert "Traceback" not in r.output, r.output
    return r


# ---------------------------------------------------------------------------- declarations on the CPU

def right(name):
    """A correct y for each problem, computed as a kernel might (float32 sums in another order)."""
    return {"copy": lambda a, y: y.__setitem__(Ellipsis, a["x"]),
            "transpose": lambda a, y: y.__setitem__(Ellipsis, a["x"].T),
            "reduce": lambda a, y: y.__setitem__(0, a["x"].reshape(-1, 7).sum(axis=0, dtype=np.float32).sum()
                                                 if a["x"].size % 7 == 0 else a["x"][::-1].sum(dtype=np.float32)),
            "scan": lambda a, y: y.__setitem__(Ellipsis, np.cumsum(a["x"], dtype=np.float32)),
            "histogram": lambda a, y: y.__setitem__(Ellipsis, np.bincount(a["x"], minlength=256))}[name]


SHAPES = {"copy": (None, 1001), "transpose": (37, 129), "reduce": (None, 4099), "scan": (None, 5003),
          "histogram": (None, 10007)}


def cpu_run(name):
    decl = problems.get(name)
    M, N = SHAPES[name]
    return ProblemRun(decl.shape(M=M, N=N), 12345, decl, xp=np)


@pytest.mark.parametrize("name", list(problems.DECLARATIONS))
def test_a_right_result_passes_on_every_input_set(name):
    run = cpu_run(name)
    write = right(name)
    seen = []

    def on(inputs):
        seen.append(inputs.kind.name)
        return lambda: write(inputs.arrays, run.y)
    c = run.verify(on)
    assert c.passed, c.summary()
    assert seen == [s.name for s in problems.get(name).input_sets]  # every set checked, the timed one first
    # the verdict names what it compared with: the float64 sums for reduce and scan, else the cupy call
    assert c.reference == {"reduce": "float64 cupy.sum", "scan": "float64 cupy.cumsum"}.get(
        name, problems.get(name).reference_name)


@pytest.mark.parametrize("name,spoil", [
    ("copy", lambda y: y.__setitem__(500, y[500] + 1e-6)),     # one bit off: a copy is exact
    ("transpose", lambda y: y.__setitem__((128, 36), 0.0)),      # the last corner
    ("reduce", lambda y: y.__setitem__(0, y[0] * (1 + 1e-3))),   # far past the bound of a 4099-term sum
    ("scan", lambda y: y.__setitem__(2500, y[2500] + 0.01)),
    ("histogram", lambda y: y.__setitem__(3, y[3] + 1)),         # one count off
])
def test_a_wrong_element_fails_and_says_where(name, spoil):
    run = cpu_run(name)
    write = right(name)

    def on(inputs):
        return lambda: (write(inputs.arrays, run.y), spoil(run.y))
    c = run.verify(on)
    assert not c.passed and c.bad == 1 and c.inputs == problems.get(name).input_sets[0].name


@pytest.mark.parametrize("name", list(problems.DECLARATIONS))
def test_an_element_never_written_fails(name):
    run = cpu_run(name)
    write = right(name)

    def on(inputs):
        def launch():
            keep = run.y.reshape(-1)[-1].copy()
            write(inputs.arrays, run.y)
            run.y.reshape(-1)[-1] = keep  # the poison stays in the last element
        return launch
    c = run.verify(on)
    assert not c.passed and c.unwritten == 1


def test_an_input_written_into_fails_and_is_put_back():
    run = cpu_run("scan")

    def on(inputs):
        def launch():
            run.y[...] = np.cumsum(inputs.arrays["x"], dtype=np.float32)
            inputs.arrays["x"][7] = 0.0
        return launch
    c = run.verify(on)
    assert not c.passed and c.clobbered == ["x: 1 element changed, first at (7)"]
    assert (run.main.arrays["x"] == run.main.pristine["x"]).all()


def test_the_sum_bound_is_from_the_arithmetic():
    """A float32 sum in the worst order stays well inside its bound, and a sum in float16 would not."""
    run = cpu_run("scan")
    x = run.main.arrays["x"]
    ref, bound = run.main.ref, run.main.bound
    seq = np.cumsum(x, dtype=np.float32)
    assert (np.abs(seq - ref) <= bound).all() and (np.abs(seq - ref) / bound).max() < 0.5
    half = np.cumsum(x.astype(np.float16), dtype=np.float16)
    assert (np.abs(half.astype(np.float64) - ref) > bound).any()
    assert (cpu_run("scan").main.bound == bound).all()  # the same seed: the same inputs


def test_small_integer_sums_are_exact_and_the_fences_hold():
    run = cpu_run("reduce")
    sets = list(run.input_sets())
    ints = next(s for s in sets if s.kind.kind == "integers")
    assert (ints.bound == 0).all() and float(ints.ref[0]) == float(ints.arrays["x"].astype(np.int64).sum())
    x = run.main.arrays["x"]
    base = x.base if x.base is not None else x
    assert np.isnan(base.reshape(-1)[:128]).all() and np.isnan(base.reshape(-1)[-128:]).all()
    h = cpu_run("histogram").main.arrays["x"]
    assert (h.base.reshape(-1)[:128] == 255).all()  # a read before x counts into bin 255


def test_the_skewed_histogram_piles_on_a_few_bins():
    run = cpu_run("histogram")
    skewed = next(s for s in run.input_sets() if s.kind.name == "skewed")
    counts = skewed.ref
    assert counts[0] > 0.45 * counts.sum() and counts[1] > 0.2 * counts.sum()
    assert ProblemRun(run.shape, 1, run.decl, "skewed", xp=np).main.kind.name == "skewed"  # --inputs skewed
    with pytest.raises(GemmlabError, match="histogram has no input set 'nosuch'; its sets: uniform, skewed, one bin"):
        run.decl.input_set("nosuch")


def test_cost_models_are_the_bytes_every_algorithm_moves():
    from gemmlab.results.model import Shape
    v = Shape(1, 1 << 28, 1)
    assert problems.get("copy").moved(v) == problems.get("scan").moved(v) == 8 << 28
    assert problems.get("reduce").moved(v) == (4 << 28) + 4
    assert problems.get("transpose").moved(Shape(1 << 14, 1 << 14, 1)) == 8 << 28
    assert problems.get("histogram").moved(v) == (1 << 28) + 1024


def test_shapes_of_a_problem():
    d = problems.get("reduce")
    assert d.shape() == d.shape(size=1 << 24) and d.shape(N=100).N == 100 and d.shape(N=100).M == 1
    assert problems.get("transpose").shape(M=3, N=5).M == 3 and problems.get("transpose").shape(7).N == 7
    with pytest.raises(GemmlabError, match="reduce runs on a vector of n elements"):
        d.shape(M=4)


def test_an_unknown_problem_is_one_clear_error():
    with pytest.raises(GemmlabError) as e:
        problems.check_name("transpos")
    assert e.value.message == ("unknown problem 'transpos' (did you mean transpose?); the problems: gemm, copy, "
                               "transpose, reduce, scan, histogram")


# ---------------------------------------------------------------------------- the ladders

def test_every_problem_has_its_ladder():
    assert [v.name for v in CAT.ladder("transpose")] == ["transpose_naive", "smem_tile", "padded_tile", "vec_tile"]
    assert [v.name for v in CAT.ladder("reduce")] == ["interleaved", "sequential", "shfl", "gridstride", "twopass"]
    assert [v.name for v in CAT.ladder("copy")] == ["copy", "copy_vec"]
    assert [v.name for v in CAT.ladder("scan")] == ["scan_blocks", "lookback", "prefetch"]
    assert [v.name for v in CAT.ladder("histogram")] == ["global_atomic", "shared_atomic"]
    assert all(v.problem == "gemm" for v in CAT.ladder())  # GEMM's ladder is GEMM's alone
    for v in RUNGS:
        assert v.idea and (v.predict or v.parent is None), v.name
        assert v.path.parent.name == v.problem, v.name  # kernels/<problem>/NN_name.cu.j2


@pytest.mark.parametrize("name", [v.name for v in RUNGS])
def test_every_rung_compiles_without_spills_and_takes_what_its_problem_provides(name):
    v = CAT.get(name)
    decl = problems.get(v.problem)
    for params in v.sample(limit=4)[:3]:
        c = compile_rendered(render(v, params), "sm_90")
        assert c.resources.spills == 0 and c.resources.stack == 0, f"{name} {params}: {c.resources}"
        assert f".entry {v.entry}(" in c.ptx
        if v.reduce_grid:
            assert f".entry {v.second_entry}(" in c.ptx
        assert set(v.args) <= set(decl.args), set(v.args) - set(decl.args)
        v.geometry(params, *decl.shape(size=1001, M=None, N=None).__dict__.values())


def test_a_problem_template_lists_its_arguments(tmp_path):
    path = tmp_path / "mine.cu.j2"
    path.write_text('{#---\nname = "mine"\nproblem = "reduce"\nidea = "x"\n[launch]\nblock = [32]\ngrid = [1]\n---#}\n')
    with pytest.raises(GemmlabError, match="a reduce kernel lists its arguments by name in launch.args"):
        load_variant(path)
    path.write_text(path.read_text().replace("grid = [1]", 'grid = [1]\nargs = ["x", "y", "n"]'))
    assert load_variant(path).problem == "reduce" and load_variant(path).entry == "reduce"


# ---------------------------------------------------------------------------- the CLI

def test_list_groups_the_variants_by_problem():
    r = invoke("list")
    assert r.exit_code == 0
    out = r.output
    assert out.index("gemmlab variants (ladder order)") < out.index("transpose: y = x^T") < out.index("vec_tile")
    assert "reduce: y[0] = sum" in out and "twopass" in out
    data = json.loads(invoke("list", "--problem", "reduce", "--json").output)
    assert [d["name"] for d in data] == ["interleaved", "sequential", "shfl", "gridstride", "twopass"]
    assert {d["problem"] for d in data} == {"reduce"}


@pytest.mark.parametrize("args,message", [
    (["run", "--problem", "nosuch", "--variant", "shfl"], "error: unknown problem 'nosuch'"),
    (["compare", "--problem", "nosuch"], "error: unknown problem 'nosuch'"),
    (["list", "--problem", "nosuch"], "error: unknown problem 'nosuch'"),
    (["run", "--problem", "transpose", "--variant", "shfl"], "error: variant 'shfl' computes reduce, not transpose"),
    (["run", "--variant", "shfl", "-M", "4"], "error: reduce runs on a vector of n elements"),
    (["run", "--variant", "tiled", "--inputs", "skewed"], "error: --inputs chooses the input set of a problem"),
    (["compare", "--problem", "reduce", "--size", 1 << 28, "-K", 2], "error: reduce has no K"),
])
def test_bad_problem_input_is_one_line(args, message):
    r = invoke(*args)
    assert r.exit_code == 1 and r.output.startswith(message), r.output
    assert len([line for line in r.output.splitlines() if line.startswith("error:")]) == 1


def test_show_renders_a_problem_rung():
    r = invoke("show", "--variant", "padded_tile")
    assert r.exit_code == 0 and "__shared__ float tile[32][33];" in r.output
