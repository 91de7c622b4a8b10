"""NVRTC compilation for sm_90 without a GPU: every configuration, spills, the cache, error mapping."""

import itertools
import re

import pytest

from gemmlab import GemmlabError
from gemmlab.compile import check_arch, compile_rendered, parse_resources
from gemmlab.render import render
from gemmlab.templates import discover, load_variant
from conftest import GOOD_BODY, sass, write_template
from sampling import risk_sample

# The largest values that fit together, then the edges of each parameter's values (tests/sampling.py says
# why that covers what goes wrong in a compile in about 80 compiles instead of Variant.sample's 300, which
# the GPU tests still compile and run, with these checks; GEMMLAB_TESTS_FULL=1 compiles every value here).
LADDER = {v.name: v for v in discover().ladder()}  # read once: the same built-ins each test would read again
CONFIGS = [(name, p) for name, v in LADDER.items() for p in risk_sample(v)]
# Valid configurations that spill, found by combining the large values (Variant.sample, which changes
# one value at a time, never met them), with why. Strict: the day a template rules one out or it stops
# spilling, its mark must go (test_the_known_spills_are_valid_and_sampled below).
SPILLS = [
    ("spread", {"BM": 256, "BN": 64, "BK": 32, "UNROLL": 16, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "STAGES": 3,
                "GROUP_M": 8, "SPLIT_K": 128, "STAGED_C": True, "COALESCE_B": True},
     "the header's register estimate leaves out UNROLL: 255 registers at BM 256, UNROLL 16, TM*TN 128"),
]




def _case(name: str, params: dict):
    why = next((why for n, p, why in SPILLS if (n, p) == (name, params)), None)
    return pytest.param(name, params, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [],
                        id=f"{name}-{params}")


@pytest.mark.parametrize("name,params", [_case(n, p) for n, p in CONFIGS])
def test_every_config_compiles_without_spills(name, params):
    v = LADDER[name]
    c = compile_rendered(render(v, params), "sm_90")
    r = c.resources
    assert r.registers > 0
    assert r.spills == 0 and r.stack == 0, f"{name} {params} spills: {r}"
    # ptxas may quietly make async wgmma products wait for each other (its warning C7513), for example
    # when a branch sits between products still in flight and registers they read
    assert "wgmma.mma_async instructions are serialized" not in c.log, f"{name} {params}: {c.log}"
    assert ".entry gemm(" in c.ptx
    assert c.cubin[:4] == b"\x7fELF"


def test_the_known_spills_are_valid_and_sampled():
    """Else a template that now rules one out leaves its mark above with nothing to mark."""
    assert all(not LADDER[n].violations(p) and (n, p) in CONFIGS for n, p, _ in SPILLS)


@pytest.mark.parametrize("name,over", [("skinny_narrow", {}), ("skinny_async", {"EVICT_FIRST": True}),
                                       ("skinny_async", {"BM": 16, "ROWS": 16, "STAGES": 4, "EVICT_FIRST": True})])
def test_the_l2_evict_first_hint_reaches_every_copy_of_b(name, over):
    v = discover().get(name)
    c = compile_rendered(render(v, v.resolve(over)), "sm_90")
    assert "createpolicy.fractional.L2::evict_first" in c.ptx and "L2::cache_hint" in c.ptx
    text = sass(c)
    assert "LDGSTS.E.BYPASS.128" in text  # B's 16-byte copies
    # The policy rides in a pair of uniform registers, which must start even. ptxas of NVRTC 13.0 gave one
    # copy of skinny_async at BM=16 ROWS=16 STAGES=4 desc[UR1]: an illegal instruction on the H100.
    assert not re.findall(r"desc\[UR\d*[13579]\]", text), "ptxas put a cache policy in an odd register pair"

def test_cache_hit_is_fast_and_keyed_by_source(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path / "cache"))
    v = discover().get("tiled")
    cold = compile_rendered(render(v, {"TILE": 16}), "sm_90")
    warm = compile_rendered(render(v, {"TILE": 16}), "sm_90")
    assert not cold.cached and warm.cached and warm.key == cold.key
    assert warm.lookup_ms < 50, "a cached rerun must add under 50 ms"
    assert warm.resources == cold.resources
    other = compile_rendered(render(v, {"TILE": 8}), "sm_90")
    assert other.key != cold.key and not other.cached
    assert compile_rendered(render(v, {"TILE": 16}), "sm_90a").key != cold.key


def test_compile_error_points_at_template_line(user_dir):
    path = write_template(user_dir, "typo", GOOD_BODY.replace("acc += A[", "acc += AA["))
    v = load_variant(path, builtin=False)
    with pytest.raises(GemmlabError) as e:
        compile_rendered(render(v, v.defaults()), "sm_90")
    line = next(i for i, l in enumerate(path.read_text().split("\n"), 1) if "AA[" in l)
    msg = e.value.message
    assert "does not compile" in msg and f"typo.cu.j2:{line}: error" in msg and '"AA"' in msg
    assert "(rendered typo.cu:" in msg


def test_template_without_gemm_entry_is_rejected(user_dir):
    path = write_template(user_dir, "noentry", GOOD_BODY.replace("void gemm(", "void matmul("))
    v = load_variant(path, builtin=False)
    with pytest.raises(GemmlabError, match="no kernel named gemm"):
        compile_rendered(render(v, v.defaults()), "sm_90")


def test_arch_is_validated():
    assert check_arch("sm_90a") == "sm_90a"
    for bad in ("sm90", "compute_90"):
        with pytest.raises(GemmlabError, match=f"architecture '{bad}' is not of the form sm_90 or sm_90a"):
            check_arch(bad)
    with pytest.raises(GemmlabError, match=r"NVRTC [\d.]+ cannot compile for sm_9; it knows sm_75, .*sm_90"):
        check_arch("sm_9")


def test_parse_resources():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm' for 'sm_90'
ptxas info    : Function properties for gemm
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
"""
    r = parse_resources(log)
    assert (r.registers, r.smem, r.stack, r.spill_stores, r.spill_loads, r.barriers) == (168, 4096, 24, 8, 12, 1)
    assert r.spills == 20


def test_sass_shows_ffma_from_shared_memory():
    v = discover().get("regblock")
    text = sass(compile_rendered(render(v, v.defaults()), "sm_90"))
    assert "FFMA" in text and "LDS" in text and "HMMA" not in text



def test_the_driver_jit_cache_is_off_for_nvrtc():
    """Else NVRTC 13.0 answers repeat compiles from ~/.nv/ComputeCache with no ptxas report."""
    import os
    import gemmlab.compile  # noqa: F401
    assert os.environ["CUDA_CACHE_DISABLE"] == "1"


@pytest.mark.parametrize("name", ["regblock", "vectorized", "bankfree", "warptile"])
def test_tile_copy_issues_every_load_before_its_first_store(name):
    """A thread's global loads of a tile all go out before it stores any of them to shared memory: one wait
    on memory per tile. (A copy loop from tid with a stride does not unroll: load, store, load, store.)"""
    v = discover().get(name)
    ops = re.findall(r"\b(LDG|STS)\b", sass(compile_rendered(render(v, v.defaults()), "sm_90")))
    assert [op for op, _ in itertools.groupby(ops)] == ["LDG", "STS"], ops


@pytest.mark.parametrize("name,needles", [
    ("vectorized", ["LDG.E.128", "STG.E.128", "LDS.128"]),  # 16-byte global and shared accesses
    ("pipelined", ["LDGSTS.E.BYPASS.128", "LDGSTS.E ", "LDGDEPBAR", "DEPBAR"]),  # cp.async, 16 and 4 bytes
    ("lean", ["LDGSTS.E.BYPASS.128", "LDS.128", "FFMA", "!STG.E.128"]),  # C stored float by float
    ("spread", ["LDGSTS.E.BYPASS.128", "LDS.128", "FFMA", "!STG.E.128"]),
    # B into registers, 16 bytes at a time; float4 atomics that do not wait for an answer (a fence in the
    # kernel would make them ATOMG: kernels/lib/split.j2)
    ("skinny", ["LDG.E.128", "REDG.E.ADD.F32x4", "!ATOMG.E.ADD.F32"]),
    ("skinny_async", ["LDGSTS.E.BYPASS.128", "LDGSTS.E ", "DEPBAR", "REDG.E.ADD.F32x4", "!ATOMG.E.ADD.F32",
                      "!LDG.E.128", "!LDG.E.CONSTANT"]),  # B never in registers
])
def test_sass_shows_the_rungs_idea(name, needles):
    """Each needle is in the SASS of the rung's defaults; "!X": X is not."""
    v = discover().get(name)
    text = sass(compile_rendered(render(v, v.defaults()), "sm_90"))
    for needle in needles:
        if needle.startswith("!"):
            assert needle[1:] not in text, f"{name}: {needle[1:]} in its SASS"
        else:
            assert needle in text, f"{name}: no {needle} in its SASS"
