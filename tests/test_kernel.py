"""The configured kernel (gemmlab/kernel.py) and the argument list a template declares, on a CPU."""

import dataclasses

import pytest

import gemmlab
from gemmlab.errors import GemmlabError
from gemmlab.kernel import LaunchPlan, configure
from conftest import GOOD_BODY, write_template


def test_a_kernel_is_configured_once_and_is_immutable():
    v = gemmlab.catalog().get("tiled")
    k = configure(v, {"TILE": 16}, "sm_90")
    assert (k.name, k.dtype, k.arch, dict(k.params)) == ("tiled", "fp32", "sm_90", {"TILE": 16, "PREFETCH": True})
    with pytest.raises(TypeError):
        k.params["TILE"] = 32  # a read-only view: what was compiled cannot drift from what is reported
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.compiled = None
    plan = k.plan(100, 70, 50)
    assert isinstance(plan, LaunchPlan) and plan.grid == (5, 7, 1) and plan.block == (16, 16, 1)
    assert plan.args == ("A", "B", "C", "M", "N", "K")


@pytest.mark.parametrize("name,dtype,given,args", [
    ("splitk", "fp32", {}, ("A", "B", "C", "M", "N", "K", "workspace")),
    ("mma", "bf16", {}, ("A", "B", "C", "M", "N", "K", "alpha", "beta", "bias")),
    ("wgmma_ws", "bf16", {}, ("A", "B", "C", "M", "N", "K", "workspace", "tma.A", "tma.B", "gpc_order",
                              "alpha", "beta", "bias")),
    # no stream-K: no workspace, and the kernel takes no ws pointer; no GPC order: no table
    ("wgmma_ws", "bf16", {"STREAM_K": False, "GPC_ORDER": False},
     ("A", "B", "C", "M", "N", "K", "tma.A", "tma.B", "alpha", "beta", "bias")),
    # FP8: B^T's map, and the scales of A and B for its SCALE parameter
    ("wgmma_ws_fp8", "e4m3", {}, ("A", "B", "C", "M", "N", "K", "workspace", "tma.A", "tma.Bt", "scale.A", "scale.B")),
])
def test_the_arguments_follow_the_header(name, dtype, given, args):
    v = gemmlab.catalog().get(name)
    params = v.resolve(v.for_dtype(dtype, given))
    assert v.arguments(params, v.geometry(params, 4096, 4096, 4096, 132)) == args


def test_a_template_lists_its_arguments(user_dir):
    body = GOOD_BODY.replace("int M, int N, int K)", "int M, int N, int K, const float* bias)")
    write_template(user_dir, "listed", body, header_extra="", parent="tiled")
    path = user_dir / "listed.cu.j2"
    path.write_text(path.read_text().replace("[launch]\n", '[launch]\nargs = ["A", "B", "C", "M", "N", "K", "bias"]\n'))
    v = gemmlab.catalog((user_dir,)).get("listed")
    assert v.arguments(v.defaults(), v.geometry(v.defaults(), 8, 8, 8))[-1] == "bias"
    assert configure(v, None, "sm_90").plan(8, 8, 8).args[-1] == "bias"


@pytest.mark.parametrize("args,message", [
    ('["A", "B", "C", "M", "N", "K", "scale"]', "launch.args: unknown argument 'scale'; known: A, B, C, M, N, K, workspace, "
                                               "tma.A, tma.B, tma.Bt, tma.C, gpc_order, alpha, beta, bias, scale.A, "
                                               "scale.B, "
                                               "arrival"),
    ('["A", "B", "C", "M", "N", "K", "workspace"]', "launch.args: workspace needs launch.workspace"),
    ('["A", "B", "C", "M", "N", "K", "tma.A"]', "launch.args: tma.A needs launch.tma"),
    ('["A", "B", "C", "M", "N", "K", "tma.B"]', "launch.args: tma.B needs launch.tma"),
    ('["A", "B", "C", "M", "N", "K", "tma.Bt"]', "launch.args: tma.Bt needs launch.tma"),
    ('["A", "B", "C", "M", "N", "K", "tma.C"]', "launch.args: tma.C needs launch.tma"),
    ('["A", "B", "C", "M", "N", "K", "gpc_order"]', "launch.args: gpc_order needs launch.gpc_order"),
    ('"A B C"', "launch.args must list the kernel's arguments by name"),
    ('["A", "B", 3]', "launch.args must list the kernel's arguments by name"),
])
def test_a_wrong_argument_list_is_a_header_error(user_dir, args, message):
    write_template(user_dir, "badargs", GOOD_BODY)
    path = user_dir / "badargs.cu.j2"
    path.write_text(path.read_text().replace("[launch]\n", f"[launch]\nargs = {args}\n"))
    cat = gemmlab.catalog((user_dir,))
    assert cat.broken["badargs"].message == f"bad template header in {path}: {message}"
    with pytest.raises(GemmlabError) as e:
        cat.get("badargs")
    assert e.value.message == f"bad template header in {path}: {message}"


def test_each_argument_comes_with_its_launch_key(user_dir):
    """workspace, tma.A, tma.B, tma.Bt and gpc_order are taken where the launch has them, and tma.B needs B's
    map, tma.Bt B^T's."""
    write_template(user_dir, "allargs", GOOD_BODY)
    path = user_dir / "allargs.cu.j2"
    every = '["A", "B", "C", "M", "N", "K", "workspace", "tma.A", "tma.B", "tma.Bt", "gpc_order"]'
    launch = ('[launch]\nworkspace = "M * N * 4"\nargs = ARGS\nblock = ["TILE", "TILE"]\ngrid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n'
              '[launch.tma]\nA = ["16", "64"]\nB = ["64", "16"]\nBt = ["64", "16"]\n[launch.gpc_order]\nwhen = "true"\ncluster = "2"\ngroup = "8"\n')
    text = path.read_text().split("[launch]\n")[0] + launch.replace("ARGS", every) + "---#}\n" + GOOD_BODY
    path.write_text(text)
    v = gemmlab.catalog((user_dir,)).get("allargs")
    assert v.args == ("A", "B", "C", "M", "N", "K", "workspace", "tma.A", "tma.B", "tma.Bt", "gpc_order")
    for gone, arg in (("B", "tma.B"), ("Bt", "tma.Bt")):  # a map gone: its argument cannot be passed
        path.write_text(text.replace(f'\n{gone} = ["64", "16"]\n', "\n"))
        with pytest.raises(GemmlabError) as e:
            gemmlab.catalog((user_dir,)).get("allargs")
        assert e.value.message == f"bad template header in {path}: launch.args: {arg} needs launch.tma"


def test_configure_for_sm_90_from_the_cache_unless_told():
    v = gemmlab.catalog().get("tiled")
    first = configure(v, {"TILE": 8})
    again = configure(v, {"TILE": 8})
    assert again.arch == "sm_90" and again.compiled.cached and again.resources is again.compiled.resources
    assert again.compiled.key == first.compiled.key
    assert not configure(v, {"TILE": 8}, use_cache=False).compiled.cached
    assert configure(v, {"TILE": 8}, extra_options=("-lineinfo",)).compiled.key != first.compiled.key


def test_a_plan_is_for_one_sm_unless_told():
    """Stream-K's grid and workspace follow the SMs: the default is 1, where only the shape is in question."""
    from types import SimpleNamespace
    from gemmlab.kernel import Kernel
    v = gemmlab.catalog().get("wgmma_ws")
    params = v.resolve(v.for_dtype("bf16", {}))
    k = Kernel(SimpleNamespace(rendered=SimpleNamespace(variant=v, params=params)))  # nothing compiled
    one = k.plan(4096, 4096, 4096)
    assert one == k.plan(4096, 4096, 4096, sms=1) != k.plan(4096, 4096, 4096, sms=2)
    assert (one.grid, one.workspace) == ((2, 1, 1), 131072) and k.dtype == "bf16" and k.name == "wgmma_ws"
