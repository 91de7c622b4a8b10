"""Planted bugs (tests/planted.py): each still applies to its rung (CPU); on a GPU the check
fails each one in every dtype it runs, never times it, and says where; the inputs one of them wrote
into are restored, so the kernel after it still passes."""

import pytest

import gemmlab
from gemmlab.gpu.problem import Problem
from gemmlab.results.model import Shape
from gemmlab.render import render
from planted import PLANTS, write
from sampling import FULL

CASES = [(p, d) for p in PLANTS for d in p.dtypes]
IDS = [f"{p.name}-{d}" for p, d in CASES]
SHAPE = (1001, 1000, 1003)  # odd M for the last row of tiles, K % 32 != 0 for the K tail


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("planted")
    write(d)
    return gemmlab.catalog((d,))


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_each_plant_applies(plant, planted):
    """Each plant renders with its line in place in every input type it runs. It is compiled where it runs
    (the GPU test below) and, with GEMMLAB_TESTS_FULL=1, here: 0.5 to 1.5 s of CPU each."""
    v = planted.get(plant.name)
    assert not v.builtin and v.parent == plant.base
    for dtype in plant.dtypes:
        params = v.resolve(v.for_dtype(dtype))
        assert "planted" in render(v, params).source
        if FULL:
            assert gemmlab.build(v, params, arch="sm_90a" if plant.base == "mma" else "sm_90").resources.registers > 0


def test_a_plant_whose_line_is_gone_says_so():
    from planted import Plant
    with pytest.raises(AssertionError, match=r"plant p: its line of tiled.cu.j2 occurs 0 times: 'no such line'"):
        Plant("p", "tiled", ("fp32",), "no such line", "", "").source()


@pytest.mark.gpu
@pytest.mark.parametrize("plant,dtype", CASES, ids=IDS)
def test_each_plant_fails_untimed_and_says_where(plant, dtype, planted):
    v = planted.get(plant.name)
    params = v.resolve(v.for_dtype(dtype))
    p = Problem(Shape(*SHAPE), dtype=dtype)
    r = p.run(gemmlab.build(v, params))
    assert r.status == "FAIL" and r.timing is None and r.valid_time is None, (plant.name, r.check)
    if plant.clobbers:
        assert r.check.clobbered and r.check.clobbered[0].startswith("A: 1 element changed")
        good = gemmlab.catalog().get("tiled")
        after = p.run(gemmlab.build(good, good.defaults()), timed=False)
        assert after.status == "PASS", after.check.summary()  # the input was restored
    else:
        assert r.check.bad > 0 and r.check.tiles["bad"] > 0 and r.check.worst is not None
        assert "out of bound" in r.check.summary()
