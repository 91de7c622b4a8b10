"""Without a GPU: the FP32 kernels written in plain CUDA (no inline PTX, no workspace, no second
kernel) run on the CPU, one std::thread per CUDA thread (tests/emulate/), and must compute A @ B on
odd shapes and write every element of C. This checks a kernel's indexing, bounds and barriers, not
its speed, and not what only a GPU does (memory alignment, races the barriers would hide)."""

import re
import shutil
import subprocess

import pytest

import gemmlab
from gemmlab.render import render
from conftest import ROOT

HARNESS = ROOT / "tests" / "emulate"
SHAPES = [(1, 1, 1), (17, 33, 65), (37, 130, 97)]
EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w ]+?)\s+(\w+)\[\];")

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) to emulate kernels")


def plain(v) -> bool:
    """Variants whose default kernel the emulator can run."""
    if list(v.dtypes) != ["fp32"]:
        return False
    geo = v.geometry(v.defaults(), 64, 64, 64)
    return "asm" not in render(v).source and not geo.workspace and geo.reduce_grid is None and not geo.tma


PLAIN = [v.name for v in gemmlab.catalog().ladder() if plain(v)]


def emulate(tmp_path, v, params, shapes=SHAPES, edit=("", "")):
    """{shape: (relative error, elements of C not written)}; `edit` replaces text in the kernel first."""
    source = EXTERN_SHARED.sub(r"\1* \2 = reinterpret_cast<\1*>(::smem);", render(v, params).source.replace(*edit))
    (tmp_path / "kernel.cu").write_text(source)
    exe = tmp_path / "kernel"
    r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-pthread", f"-I{HARNESS}", f"-I{tmp_path}",
                        '-DKERNEL="kernel.cu"', "-o", str(exe), str(HARNESS / "main.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    results = {}
    for shape in shapes:
        geo = v.geometry(params, *shape)
        args = [*shape, *geo.grid, *geo.block, int(geo.zero_output)]
        out = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        err, unwritten = out.stdout.split()
        results[shape] = (float(err), int(unwritten))
    return results


def test_the_fp32_ladder_is_emulated():
    assert {"naive", "tiled", "blocktile1d", "warptile", "splitk_atomic", "skinny"} <= set(PLAIN)


@pytest.mark.parametrize("name", PLAIN)
def test_plain_kernels_compute_the_product(tmp_path, name):
    v = gemmlab.catalog().get(name)
    for shape, (err, unwritten) in emulate(tmp_path, v, v.defaults()).items():
        assert unwritten == 0, f"{name} {shape}: {unwritten} elements of C not written"
        assert err < 1e-5, f"{name} {shape}: relative error {err:.2e}"


@pytest.mark.parametrize("params,shapes", [
    ({"BM": 1, "SPLIT_K": 1}, SHAPES),  # no split: plain stores
    ({"BM": 4, "WARPS": 4, "UNROLL": 16}, SHAPES),  # float4 reads of A, fewer warps
    ({"BM": 32, "UNROLL": 8}, SHAPES),
    ({"BM": 2, "WARPS": 4, "SPLIT_K": 64}, [(3, 129, 1000), (2, 33, 65)]),  # more slices than K has rows
])
def test_skinny_configurations(tmp_path, params, shapes):
    v = gemmlab.catalog().get("skinny")
    results = emulate(tmp_path, v, v.resolve(params), shapes)
    assert all(u == 0 and e < 1e-5 for e, u in results.values()), results


def test_the_emulator_catches_a_wrong_kernel(tmp_path):
    """tiled with its inner loop one step short must fail here, or the tests above prove nothing."""
    v = gemmlab.catalog().get("tiled")
    bug = ("for (int k = 0; k < 32; ++k)", "for (int k = 0; k < 31; ++k)")
    assert bug[0] in render(v).source
    (err, unwritten), = emulate(tmp_path, v, v.defaults(), [(17, 33, 65)], edit=bug).values()
    assert err > 1e-3 and unwritten == 0
