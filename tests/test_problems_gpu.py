"""On a GPU: every sampled configuration of every rung of the problems besides GEMM is right on odd
sizes (and one power of two), every input set checked; the cupy references pass their own check; a
planted bug fails. Skipped without a GPU."""

import pytest

import gemmlab
from gemmlab import problems
from gemmlab.gpu.problems import ProblemRun

pytestmark = pytest.mark.gpu

CAT = gemmlab.catalog()
CONFIGS = [(v.name, p) for name in problems.DECLARATIONS for v in CAT.ladder(name) for p in v.sample(limit=8)]
SIZES = {True: [(None, 1), (None, 3), (None, 1001), (None, 65537), (None, 1_000_003), (None, 1 << 22)],
         False: [(1, 1), (7, 3), (33, 65), (1000, 999), (257, 4100), (1024, 1024)]}


@pytest.fixture(scope="module")
def runs():
    made = {}

    def get(name, M, N):
        if (name, M, N) not in made:
            decl = problems.get(name)
            made[(name, M, N)] = ProblemRun(decl.shape(M=M, N=N), 2024, decl)
        return made[(name, M, N)]
    return get


@pytest.mark.parametrize("name,params", CONFIGS, ids=[f"{n}-{p}" for n, p in CONFIGS])
def test_every_rung_is_right_on_odd_sizes(name, params, runs):
    v = CAT.get(name)
    kernel = gemmlab.build(v, params)
    for M, N in SIZES[problems.get(v.problem).vector]:
        r = runs(v.problem, M, N).run(kernel, timed=False)
        assert r.status == "PASS", f"{name} {params} at {M}x{N}: {r.error or r.check.summary()}"


@pytest.mark.parametrize("name", list(problems.DECLARATIONS))
def test_the_reference_passes_its_own_check_and_is_timed(name, runs):
    M, N = SIZES[problems.get(name).vector][2]
    r = runs(name, M, N).cublas(min_reps=3)
    assert r.status == "PASS" and r.timing.median_ms > 0 and r.extra["gbs"] > 0
