"""The GPC order of wgmma_ws's persistent grid (gemmlab/gpu/gpc.py): joining the SMs of clusters into GPCs, the
table of slots, its launch argument and the template's use of it; on a GPU, the probe and the kernel with the
table."""

import pytest

import gemmlab
from gemmlab.errors import GemmlabError
from gemmlab.gpu.gpc import MAX_SLOTS, join, order_argument, slot_table
from gemmlab.render import render
from gemmlab.results.model import Shape
from conftest import GOOD_BODY, write_template

# The GPCs of run 55's H100 (benchmarks/h100-power-experiments.txt): SM numbers go round 8 GPCs two at a
# time up to SM 63 and round the last 7 after; SMs 124-131 took no cluster of more than 2 blocks.
H100 = ([[0, 1, 16, 17, 32, 33, 48, 49]]
        + [sorted(s for t in range(60) for s in (2 * t, 2 * t + 1)
                  if (t % 8 == g if t < 32 else 1 + (t - 32) % 7 == g)) + {6: [120, 121], 7: [122, 123]}.get(g, [])
           for g in range(1, 8)]
        + [list(range(124, 132))])


def test_join_unites_overlapping_clusters_and_groups_the_sms_no_large_cluster_reached():
    clusters = [[0, 1, 4, 5], [4, 5, 8, 9], [2, 3, 6, 7], [10, 11]]  # the last: a 2-block cluster tells nothing
    assert join(clusters, 12) == [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7], [10, 11]]
    assert join([], 4) == [[0, 1, 2, 3]]


def test_the_h100_map_is_a_partition_into_its_gpcs():
    assert sorted(s for g in H100 for s in g) == list(range(132))
    assert [len(g) for g in H100] == [8, 16, 16, 16, 16, 16, 18, 18, 8]


@pytest.mark.parametrize("cluster,group", [(2, 8), (1, 8), (2, 16), (2, 1)])
def test_the_slot_table_is_a_permutation_of_the_grid(cluster, group):
    table = slot_table(H100, 132, cluster, group)
    assert sorted(table) == list(range(132 // cluster))


def test_the_clusters_of_a_gpc_share_a_class_of_slots():
    """With GROUP_M 8, slots v and v + 8k start in the same row of tiles. Each GPC of 8 or 9 pairs gets a
    class of its own, the largest first (66 slots: classes 0 and 1 hold 9); the two groups of 4 share one."""
    table = slot_table(H100, 132, 2, 8)
    classes = [sorted({table[s // 2] % 8 for s in g if s % 2 == 0}) for g in H100]
    assert classes[6] == [0] and classes[7] == [1]  # the two GPCs of 18 SMs, in the classes of 9 slots
    assert sorted(c[0] for c in classes[1:6]) == [2, 3, 4, 5, 6] and all(len(c) == 1 for c in classes[1:6])
    assert classes[0] == classes[8] == [7]


def test_a_gpc_larger_than_its_class_goes_on_in_the_next():
    table = slot_table([list(range(12)), [12, 13, 14, 15]], 16, 1, 4)  # classes of 4 slots, a GPC of 12 SMs
    assert sorted(table) == list(range(16))
    assert sorted(table[s] % 4 for s in range(12)) == [0] * 4 + [1] * 4 + [2] * 4


def test_a_table_too_large_for_the_argument_is_refused():
    with pytest.raises(GemmlabError, match=f"at most {MAX_SLOTS} slots"):
        slot_table([list(range(600))], 600, 2, 8)


def test_the_order_argument_holds_the_count_then_the_slots():
    raw = bytes(order_argument([2, 0, 1]))
    assert len(raw) == 256 and raw[:4] == (3).to_bytes(4, "little") and raw[4:7] == bytes([2, 0, 1])
    assert bytes(order_argument(None)) == bytes(256)  # 0 slots: the kernel's natural order


def test_wgmma_ws_takes_the_table_only_with_gpc_order():
    v = gemmlab.catalog().get("wgmma_ws")
    on = v.resolve(v.for_dtype("bf16", {}))
    off = dict(on, GPC_ORDER=False)
    assert on["GPC_ORDER"] and v.geometry(on, 4096, 4096, 4096, 132).gpc_order == (2, 8)
    assert v.geometry(off, 4096, 4096, 4096, 132).gpc_order is None
    assert v.geometry(dict(on, CLUSTER_M=1, GROUP_M=16), 4096, 4096, 4096, 132).gpc_order == (1, 16)
    src_on, src_off = render(v, on).source, render(v, off).source
    assert "const __grid_constant__ GpcOrder order" in src_on and "GpcOrder" not in src_off
    assert "sk_publish(d, ws, wg - 1, first * 2 + rank)" in src_on and "%%smid" in src_on


def test_gpc_order_needs_all_three_expressions(user_dir):
    write_template(user_dir, "half", GOOD_BODY, header_extra='[launch.gpc_order]\nwhen = "true"\n')
    assert "launch.gpc_order has three expressions: when, cluster and group" in gemmlab.discover((user_dir,)).broken["half"].message


@pytest.mark.gpu
def test_the_probe_finds_every_sm_in_one_gpc_and_clusters_inside_them():
    from gemmlab.gpu.device import get_device
    from gemmlab.gpu.gpc import gpc_map
    sms = get_device().sms
    gpcs = gpc_map(sms)
    assert sorted(s for g in gpcs for s in g) == list(range(sms))
    assert len(gpcs) >= 2 and all(len(g) % 2 == 0 for g in gpcs)  # whole SM pairs


@pytest.mark.gpu
@pytest.mark.parametrize("shape,params", [
    ((4096, 4096, 1024), {}),
    ((2432, 1792, 4096), {}),  # 70 cluster tiles on 66 clusters: the last wave streamed, by slot
    ((4096, 4096, 1024), {"CLUSTER_M": 1}),
    ((1000, 1032, 1048), {})])  # 20 cluster tiles: a smaller grid, in the natural order
def test_wgmma_ws_in_gpc_order_is_right(shape, params):
    """With the table the clusters take their tiles by the SM pair they run on; every tile must still be
    done once (C is poisoned first), over timed launches and the check after them."""
    from gemmlab.gpu.launch import gpc_order, load
    from gemmlab.gpu.problem import Problem
    v = gemmlab.catalog().get("wgmma_ws")
    params = v.resolve(v.for_dtype("bf16", params))
    p = Problem(Shape(*shape), dtype="bf16")
    compiled = gemmlab.build(v, params)
    geo = v.geometry(params, *shape, p.device.sms)
    kernel = load(compiled.compiled)
    kernel.max_dynamic_shared_size_bytes = geo.smem
    n = int.from_bytes(bytes(gpc_order(kernel, geo, p.device.sms))[:4], "little")
    assert n == (p.device.sms // params["CLUSTER_M"] if geo.grid[0] == p.device.sms else 0)
    r = p.run(compiled, min_reps=3)
    assert r.status == "PASS" and r.timing is not None, (r.error, r.check)
