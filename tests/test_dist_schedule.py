"""The schedules' files and arithmetic, with fake ranks: blocks, local GEMMs, bytes sent, process grids."""

import pytest

from gemmlab.multigpu import schedule as sch
from gemmlab.errors import GemmlabError
from gemmlab.results.model import Shape

SHAPE = Shape(1024 * 12, 4096 * 3, 4096 * 6)


def test_the_four_schedules_are_there_and_say_their_pattern():
    cat = sch.catalog()
    assert set(cat) >= {"allgather", "reduce_scatter", "ring", "summa"}
    for s in cat.values():
        assert s.pattern and s.idea and s.baseline in cat
        assert open(s.path).readline().startswith("# ")  # the communication, in words, at the top
    assert cat["ring"].overlaps and cat["summa"].overlaps and not cat["allgather"].overlaps
    assert cat["ring"].baseline == "allgather"


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_ring_and_allgather_blocks_and_bytes(ranks):
    for name in ("ring", "allgather"):
        s = sch.get(name)
        for r in range(ranks):
            p = sch.rank_plan(s, SHAPE, ranks, r, "bf16")
            m = SHAPE.M // ranks
            assert (p.A.row0, p.A.rows, p.A.col0, p.A.cols) == (r * m, m, 0, SHAPE.K)
            assert (p.B.col0, p.B.cols, p.B.rows) == (r * SHAPE.N // ranks, SHAPE.N // ranks, SHAPE.K)
            assert (p.C.row0, p.C.rows, p.C.col0, p.C.cols) == (0, SHAPE.M, r * SHAPE.N // ranks, SHAPE.N // ranks)
            assert p.sent == (ranks - 1) * m * SHAPE.K * 2  # each rank's block of A, to the ranks - 1 others
            assert p.flops * ranks == SHAPE.flops
    assert sch.rank_plan(sch.get("ring"), SHAPE, 4, 1).gemms == ((SHAPE.M // 4, SHAPE.N // 4, SHAPE.K),) * 4
    assert sch.rank_plan(sch.get("allgather"), SHAPE, 4, 1).gemms == ((SHAPE.M, SHAPE.N // 4, SHAPE.K),)


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_reduce_scatter_splits_k_and_sends_fp32_c(ranks):
    s = sch.get("reduce_scatter")
    p = sch.rank_plan(s, SHAPE, ranks, ranks - 1, "fp16")
    assert p.gemms == ((SHAPE.M, SHAPE.N, SHAPE.K // ranks),)
    assert (p.C.row0, p.C.rows) == ((ranks - 1) * SHAPE.M // ranks, SHAPE.M // ranks)
    assert p.sent == (ranks - 1) * SHAPE.M // ranks * SHAPE.N * 4


@pytest.mark.parametrize("ranks,q", [(1, 1), (4, 2), (9, 3), (16, 4)])
def test_summa_on_a_square_grid(ranks, q):
    s = sch.get("summa")
    for r in range(ranks):
        p = sch.rank_plan(s, SHAPE, ranks, r, "bf16")
        i, j = divmod(r, q)
        assert p.grid == (q, q) and p.coords == (i, j)
        assert (p.C.row0, p.C.col0) == (i * SHAPE.M // q, j * SHAPE.N // q)
        assert p.gemms == ((SHAPE.M // q, SHAPE.N // q, SHAPE.K // q),) * q
        assert p.sent == (q - 1) * (SHAPE.M * SHAPE.K + SHAPE.K * SHAPE.N) // q ** 2 * 2
        assert p.flops * ranks == SHAPE.flops


@pytest.mark.parametrize("ranks,hint", [(2, "1 or 4"), (3, "1 or 4"), (5, "4 or 9"), (8, "4 or 9")])
def test_summa_needs_a_square_count(ranks, hint):
    with pytest.raises(GemmlabError, match=f"summa runs on a square grid of ranks, and {ranks} is not a square") as e:
        sch.rank_plan(sch.get("summa"), SHAPE, ranks, 0)
    assert f"use {hint} GPUs" in e.value.hint


def test_a_split_that_does_not_divide_says_which_dimension():
    with pytest.raises(GemmlabError, match="ring splits M = 1000 over 3 parts") as e:
        sch.rank_plan(sch.get("ring"), Shape(1000, 999, 64), 3, 0)
    assert "multiple of 3" in e.value.hint


def test_unknown_schedule_lists_the_known():
    with pytest.raises(GemmlabError, match="no schedule 'rign'") as e:
        sch.get("rign")
    assert "ring" in e.value.hint


BAD = [
    ('split = {A = "rows", B = "cols", C = "cols"}\nsteps = [{op = "gemm"}]', "gemm cannot multiply A split by rows with B split by cols"),
    ('split = {A = "cols", B = "rows", C = "rows"}\nsteps = [{op = "gemm"}]', "the steps leave C partial"),
    ('split = {A = "rows", B = "cols", C = "cols"}\nsteps = [{op = "shuffle"}]', "unknown step 'shuffle'"),
    ('split = {A = "diag", B = "cols", C = "cols"}\nsteps = [{op = "gemm"}]', "split.A is 'diag'"),
    ('split = {A = "cols", B = "cols", C = "cols"}\nsteps = [{op = "allgather", operand = "A"}, {op = "gemm"}]', "allgather gathers A or B split by rows"),
    ('split = {A = "rows", B = "whole", C = "rows"}\nsteps = [{op = "gemm"}, {op = "reduce_scatter", operand = "C"}]', "reduce_scatter sums partial products"),
    ('split = {A = "grid", B = "grid", C = "grid"}\nsteps = [{op = "summa"}]', 'summa needs A and B split as a grid, and grid = "square"'),
    ('engines = "copy"\nsplit = {A = "rows", B = "cols", C = "cols"}\nsteps = [{op = "ring", operand = "A"}]',
     'engines = "copy" moves all-gathers only'),
    ('engines = "dma"\nsplit = {A = "rows", B = "cols", C = "cols"}\nsteps = [{op = "ring", operand = "A"}]',
     "engines is 'sm'"),
    ('split = {A = "rows", B = "cols", C = "cols"}\nsteps = [{op = "allgather_overlap", operand = "A", chunks = 0}]',
     "chunks is a number of all-gathers"),
    ('split = {A = "cols", B = "rows", C = "cols"}\nsteps = [{op = "allgather_overlap", operand = "A"}]',
     "allgather_overlap brings every rank's rows of A to each: A split by rows, B by cols"),
    ('split = {A = "rows", B = "cols", C = "cols"}\n'
     'steps = [{op = "allgather_overlap", operand = "A", arrival = true}]',
     'arrival = true needs engines = "copy": the GEMM holds every SM'),
    ('engines = "copy"\nsplit = {A = "rows", B = "cols", C = "cols"}\n'
     'steps = [{op = "allgather", operand = "A", arrival = true}, {op = "gemm"}]',
     "arrival belongs to allgather_overlap"),
    ('engines = "copy"\nsplit = {A = "rows", B = "cols", C = "cols"}\n'
     'steps = [{op = "allgather_overlap", operand = "A", arrival = 1}]', "arrival is true or false, not 1"),
    ('engines = "copy"\nsplit = {A = "rows", B = "cols", C = "cols"}\n'
     'steps = [{op = "allgather_overlap", operand = "A", transport = "pulls"}]',
     'transport = "pulls" belongs to a step with arrival = true'),
    ('engines = "copy"\nsplit = {A = "rows", B = "cols", C = "cols"}\n'
     'steps = [{op = "allgather_overlap", operand = "A", arrival = true, transport = "dma"}]',
     "transport is one of allgather, pulls, not 'dma'"),
    ('engines = "copy"\nsplit = {A = "rows", B = "cols", C = "cols"}\n'
     'steps = [{op = "allgather_overlap", operand = "A", arrival = true, transport = "puts"}]',
     "transport is one of allgather, pulls, not 'puts'"),
]


@pytest.mark.parametrize("body,message", BAD)
def test_a_schedule_that_cannot_make_its_c_is_refused(tmp_path, body, message):
    path = tmp_path / "mine.toml"
    path.write_text(f'name = "mine"\npattern = "p"\nidea = "i"\n{body}\n')
    with pytest.raises(GemmlabError, match="mine.toml: " + message.replace("(", r"\(")):
        sch.load(path)


def test_a_new_schedule_is_a_file(tmp_path):
    """Rows of A times the whole B: nothing to communicate (data parallel), C by rows."""
    (tmp_path / "rows.toml").write_text('name = "rows"\npattern = "p"\nidea = "i"\nsplit = {A = "rows", B = "whole", '
                                        'C = "rows"}\nsteps = [{op = "gemm"}]\n')
    s = sch.get("rows", (tmp_path,))
    p = sch.rank_plan(s, Shape(64, 32, 16), 4, 3)
    assert p.gemms == ((16, 32, 16),) and p.sent == 0 and p.C.row0 == 48


def test_the_copy_engine_all_gather():
    s = sch.get("allgather_ce")
    assert s.copy_engines and s.overlaps and s.baseline == "allgather" and s.steps[0].chunks == 1
    assert not any(sch.get(n).copy_engines for n in ("allgather", "ring", "reduce_scatter", "summa"))
    p = sch.rank_plan(s, SHAPE, 4, 2, "bf16")
    m = SHAPE.M // 4
    assert p.gemms == ((m, SHAPE.N // 4, SHAPE.K),) * 4 and p.flops * 4 == SHAPE.flops
    assert p.sent == sch.rank_plan(sch.get("allgather"), SHAPE, 4, 2).sent == 3 * m * SHAPE.K * 2


def test_one_launch_that_waits_for_rows_as_they_arrive():
    s, ce = sch.get("allgather_arrival"), sch.get("allgather_ce")
    assert s.arrival and s.copy_engines and s.overlaps and s.baseline == "allgather" and s.steps[0].chunks >= 1
    assert not any(sch.get(n).arrival for n in ("allgather", "ring", "reduce_scatter", "summa", "allgather_ce"))
    for ranks in (1, 2, 4):
        p, q = sch.rank_plan(s, SHAPE, ranks, ranks - 1, "bf16"), sch.rank_plan(ce, SHAPE, ranks, ranks - 1, "bf16")
        assert p.gemms == ((SHAPE.M, SHAPE.N // ranks, SHAPE.K),)  # every rank's rows, one launch
        assert p.flops == q.flops and p.sent == q.sent and p.C == q.C


@pytest.mark.parametrize("name,transport", [("allgather_arrival", "allgather"), ("allgather_pulls", "pulls")])
def test_the_arrival_schedules_differ_in_how_the_rows_move_only(name, transport):
    s, a = sch.get(name), sch.get("allgather_arrival")
    assert s.transport == transport and s.arrival and s.copy_engines and s.baseline == "allgather"
    assert all(sch.get(n).transport == "allgather" for n in ("allgather", "ring", "reduce_scatter", "summa",
                                                               "allgather_ce"))
    for ranks in (1, 2, 4):
        p, q = sch.rank_plan(s, SHAPE, ranks, ranks - 1, "bf16"), sch.rank_plan(a, SHAPE, ranks, ranks - 1, "bf16")
        assert p.gemms == q.gemms and p.sent == q.sent and p.C == q.C  # the same rows moved, the same launch
