"""Without a GPU: the FP32 kernels written in plain CUDA (no inline PTX but cp.async; a workspace and a
second kernel allowed), and gemv's 16-bit ones (its streaming loads read plainly), run on the CPU, one fiber per CUDA thread taking turns at the barriers
(tests/emulate/), and must compute A @ B on odd shapes and write every element of C. This checks a kernel's
indexing, bounds, barriers and the alignment of its vector accesses (float2, float4 and uint4 have CUDA's
alignment, checked by the sanitizer), with the H100's code paths (__CUDA_ARCH__ 900); not its speed, and
not what only a GPU does (races the barriers would hide, a cp.async read before its wait: the emulator
copies at once)."""

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
# cp.async's inline PTX, one statement a line: the copy becomes a call the shim makes at once, the
# commit and the wait become nothing.
CP_ASYNC = re.compile(r'asm volatile\("cp\.async\.c[ag]\.shared\.global \[%0\], \[%1\], (\d+), %2;\\n" :: '
                      r'"r"\((\w+)\), "l"\((\w+)\), "r"\((.+)\)\);')
# ... also with an L2 cache policy (cp_async.j2's evict-first copy), which the emulator has no use for.
CP_ASYNC_HINT = re.compile(r'asm volatile\("cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], (\d+), %2, %3;\\n"\s*:: '
                           r'"r"\((\w+)\), "l"\((\w+)\), "r"\((\w+)\), "l"\((\w+)\)\);')
CREATE_POLICY = re.compile(r'asm\("createpolicy\.[\w:.]+ %0, [\d.]+;\\n" : "=l"\((\w+)\)\);')
CP_ASYNC_GROUP = re.compile(r'asm volatile\("cp\.async\.(?:commit_group|wait_group \d+);\\n" ::\);')
# flags.j2's release store and acquire load (split.j2 uses them): calls of the shim's std::atomic versions.
ST_RELEASE = re.compile(r'asm volatile\("st\.release\.gpu\.global\.u32 \[%0\], %1;" :: "l"\((\w+)\), "r"\((\w+)\) : "memory"\);')
# gemv's streaming load of 16 bytes (ld.global.nc.L1::no_allocate): a plain read.
LOAD_STREAM = re.compile(r'asm volatile\("ld\.global\.nc\.L1::no_allocate\.v4\.u32 \{ %0, %1, %2, %3 \}, \[%4\];"\s*'
                         r': "=r"\((\w+)\.x\), "=r"\(\1\.y\), "=r"\(\1\.z\), "=r"\(\1\.w\) : "l"\((\w+)\)\);')
LD_ACQUIRE = re.compile(r'asm volatile\("ld\.acquire\.gpu\.global\.u32 %0, \[%1\];" : "=r"\((\w+)\) : "l"\((\w+)\) : "memory"\);')


def emulable(source: str) -> str:
    """The kernel as the emulator compiles it: cp.async done at once, `extern __shared__` the shim's smem,
    split.j2's counters read and written through std::atomic, streaming loads plain reads."""
    source = CP_ASYNC_GROUP.sub(";", CP_ASYNC.sub(r"cp_async_now(\2, \3, \1, \4);", source))
    source = CREATE_POLICY.sub(r"\1 = 0;", CP_ASYNC_HINT.sub(r"cp_async_now(\2, \3, \1, \4);", source))
    source = LD_ACQUIRE.sub(r"\1 = load_acquire_now(\2);", ST_RELEASE.sub(r"store_release_now(\1, \2);", source))
    source = LOAD_STREAM.sub(r"\1 = *reinterpret_cast<const uint4*>(\2);", source)
    return EXTERN_SHARED.sub(r"\1* \2 = reinterpret_cast<\1*>(::smem);", source)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) to emulate kernels")


def plain(v) -> bool:
    """Variants whose default kernel the emulator can run."""
    if list(v.dtypes) != ["fp32"]:
        return False
    geo = v.geometry(v.defaults(), 64, 64, 64)
    return "asm" not in emulable(render(v).source) and not geo.tma


LADDER = {v.name: v for v in gemmlab.catalog().ladder()}  # read once: the same built-ins each test would read again
PLAIN = [name for name, v in LADDER.items() if plain(v)]


# The shim's float2, float4 and uint4 have CUDA's alignment, and the sanitizer stops a run at the first
# access through a misaligned one: the bus error a GPU would raise.
ALIGNED = ["-fsanitize=alignment", "-fno-sanitize-recover=alignment"]
# ... and the kernels' code for the H100 (sm_90), where it differs: float2 and float4 atomics.
ARCH = ["-D__CUDA_ARCH__=900"]


def build(tmp_path, source: str, defines=()):
    """The emulator (tests/emulate/main.cpp) built around the kernel `source`. Unoptimised: g++ -O1 took
    0.2 s more a build, and the runs, small shapes whose time goes into switching fibers, gained nothing."""
    (tmp_path / "kernel.cu").write_text(source)
    exe = tmp_path / "kernel"
    r = subprocess.run(["g++", "-std=c++20", "-O0", "-w", *ALIGNED, *ARCH, f"-I{HARNESS}", f"-I{tmp_path}", *defines,
                        '-DKERNEL="kernel.cu"', "-o", str(exe), str(HARNESS / "main.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def emulate(tmp_path, v, params, shapes=SHAPES, edit=("", "")):
    """{shape: (relative error, elements of C not written)}; `edit` replaces text in the kernel first.
    A kernel that counts its blocks across launches (split K, kernels/lib/split.j2) is launched twice, C
    poisoned before each, and must be right the second time too."""
    source = emulable(render(v, params).source.replace(*edit))
    launches = 2 if "split_arrive(" in source else 1
    geo = v.geometry(params, *shapes[0])  # whether there is a workspace and a second kernel: the same for any shape
    inputs = {"bf16": ["-DINPUT_BF16"], "fp16": ["-DINPUT_FP16"]}.get(v.dtype(params), [])  # A and B: 16-bit types
    exe = build(tmp_path, source, ["-DWORKSPACE"] * bool(geo.workspace) + ["-DREDUCE"] * (geo.reduce_grid is not None)
                + inputs)
    results = {}
    for shape in shapes:
        geo = v.geometry(params, *shape)
        args = [*shape, *geo.grid, *geo.block, int(geo.zero_output), geo.workspace // 4,
                *(geo.reduce_grid or (0, 0, 0)), *(geo.reduce_block or (0, 0, 0)), launches]
        out = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        err, unwritten = out.stdout.split()
        results[shape] = (float(err), int(unwritten))
    return results


def test_the_fp32_ladder_is_emulated():
    assert {"naive", "tiled", "blocktile1d", "warptile", "pipelined", "splitk", "splitk_atomic", "skinny",
            "skinny_async", "skinny_narrow"} <= set(PLAIN)


@pytest.mark.parametrize("name", PLAIN)
def test_plain_kernels_compute_the_product(tmp_path, name):
    v = LADDER[name]
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
    v = LADDER["skinny"]
    results = emulate(tmp_path, v, v.resolve(params), shapes)
    assert all(u == 0 and e < 1e-5 for e, u in results.values()), results


@pytest.mark.parametrize("name,params,shapes", [
    ("skinny_async", {"BM": 1, "SPLIT_K": 1, "ROWS": 4}, SHAPES),  # no split: plain stores; N % 4 != 0: 4-byte copies
    ("skinny_async", {"BM": 32, "WARPS": 4, "ROWS": 16, "STAGES": 3, "SPLIT_K": 2}, SHAPES),  # float4 reads of A
    ("skinny_async", {"BM": 2, "WARPS": 8, "STAGES": 6, "SPLIT_K": 64}, [(3, 129, 1000), (2, 36, 65)]),  # empty slices
    ("pipelined", {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "STAGES": 4, "SPLIT_K": 4},
     [(17, 33, 65), (70, 132, 301)]),  # split K into C zeroed first; N % 4 == 0: 16-byte copies
    ("pipelined", {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "STAGES": 2, "GROUP_M": 4},
     [(130, 70, 40)]),  # double buffering, GROUP_M order over 3 x 2 tiles
    ("lean", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "UNROLL": 2, "STAGES": 2},
     [(130, 136, 100), (64, 64, 64)]),  # blocks inside A and B take the unchecked copies, all but the last K step
    ("lean", {"BM": 128, "BN": 64, "BK": 32}, [(130, 68, 70)]),  # 64 copies of A per thread and K step
    ("lean", {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "SPLIT_K": 4},
     [(70, 132, 301), (17, 33, 65), (64, 128, 256)]),  # split K: float4 atomics, single ones where N % 4 != 0
    ("spread", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "UNROLL": 4, "STAGES": 2},
     [(130, 136, 100), (64, 64, 64)]),  # inside A and B: unchecked pieces, checked ones for the last K step
    ("spread", {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "BK": 32, "STAGES": 3, "SPLIT_K": 4},
     [(70, 132, 301), (17, 33, 65)]),  # split K; N % 4 != 0: checked copies of single floats
    ("spread", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "UNROLL": 16, "STAGES": 3},
     [(100, 70, 90)]),  # one trip a K step: a piece is the whole tile
    ("spread", {"BM": 128, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "UNROLL": 4, "STAGES": 2},
     [(130, 68, 70)]),  # 64 float4 of B in a piece for 256 threads: most copy none
    ("splitk", {"SPLIT_K": 64}, [(17, 33, 65), (1, 70, 300)]),  # most slices empty: their partials must be 0, not NaN
    ("skinny_narrow", {"BM": 4, "COLS": 16, "WARPS": 4, "ROWS": 8, "STAGES": 2}, SHAPES),  # 8 rows an instruction
    ("skinny_narrow", {"BM": 2, "COLS": 64, "WARPS": 16, "ROWS": 8, "STAGES": 4}, [(3, 130, 1000), (2, 64, 40)]),
    ("gemv_n_fp32", {}, [(77, 1, 1003), (50, 7, 2049), (9, 8, 4)]),  # rows at every offset (K odd), aligned (K % 4 == 0)
    ("gemv_n_fp32", {"ROWS": 2, "LOADS": 4}, [(17, 5, 65), (31, 8, 1001), (40, 3, 1024)]),  # a chunk of B for 2 rows
    ("gemv_n_fp32", {"KSPLIT": 8}, [(5, 3, 4100), (3, 8, 999), (17, 33, 65)]),  # K over 8 warps; N over 8: B float by float
])
def test_more_configurations(tmp_path, name, params, shapes):
    v = LADDER[name]
    results = emulate(tmp_path, v, v.resolve(params), shapes)
    assert all(u == 0 and e < 1e-5 for e, u in results.values()), results


@pytest.mark.parametrize("name,params", [("pipelined", {}), ("pipelined", {"SPLIT_K": 4}), ("skinny_async", {})])
@pytest.mark.parametrize("edit", [
    ("if ((at & 3) == 0) {", "if ((at & 1) == 0) {"),            # 16 bytes where only 8 are aligned
    ("} else if ((at & 1) == 0) {", "} else if (true) {"),      # 8 bytes at an odd float
])
def test_a_store_wider_than_its_alignment_fails(tmp_path, name, params, edit):
    """C's rows start at every alignment where N % 4 != 0 (kernels/lib/store.j2): a vector access wider than
    its address allows is the GPU's misaligned-address fault, and the emulator's alignment check stops the
    run there. N = 33 and 130 give rows at odd and at even offsets."""
    v = LADDER[name]
    assert edit[0] in render(v, v.resolve(params)).source
    with pytest.raises(AssertionError, match="misaligned address"):
        emulate(tmp_path, v, v.resolve(params), [(17, 33, 65), (37, 130, 97)], edit=edit)


# STAGED_C (kernels/lib/store.j2's store_staged): where N % 4 != 0, C goes through shared memory, a warp's 32
# groups of 4 sums at a time, and out row by row with consecutive lanes on consecutive columns. Shapes with N
# odd, N % 4 == 2 and N % 4 == 0 (the direct stores), rows and columns past C's edge inside a tile, K of one
# K step (the ring's last tile in buffer 0, which the first warp's staging overwrites).
STAGED_SHAPES = [(70, 133, 37), (65, 130, 20), (17, 132, 9), (3, 5, 1)]
MEDIUM = {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8}
SMALL = {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TM": 8, "TN": 4}


@pytest.mark.parametrize("name,params", [
    ("pipelined", dict(MEDIUM, STAGED_C=True)),                   # auto's tile for short K
    ("pipelined", dict(SMALL, SPLIT_K=8, STAGED_C=True)),         # split K: atomics in whole sectors
    ("pipelined", {"STAGED_C": True}),                            # 128 x 256, 16 x 8 sums a thread
    ("pipelined", dict(SMALL, TM=4, TN=8, STAGED_C=True)),        # a pass of 8 rows x 16 columns: 2 rows a store
    ("spread", dict(MEDIUM, BK=32, STAGES=3, STAGED_C=True)),     # auto's 64 x 128 spread
    ("spread", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "UNROLL": 4, "STAGES": 2,
                "SPLIT_K": 4, "STAGED_C": True}),
    # COALESCE_B: B's rows read float by float with consecutive lanes on consecutive floats (N % 4 != 0)
    ("pipelined", dict(MEDIUM, STAGED_C=True, COALESCE_B=True)),
    ("pipelined", dict(SMALL, SPLIT_K=4, COALESCE_B=True)),                    # 16 threads a row of B
    ("pipelined", {"COALESCE_B": True}),                                       # 64 threads a row of B
    ("spread", dict(MEDIUM, BK=32, STAGES=3, STAGED_C=True, COALESCE_B=True)),
    ("spread", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "UNROLL": 4, "STAGES": 2,
                "COALESCE_B": True}),
])
def test_c_through_shared_memory_at_any_alignment(tmp_path, name, params):
    v = LADDER[name]
    source = render(v, v.resolve(params)).source
    assert ("store_staged<" in source) == params.get("STAGED_C", False)
    assert ("const int c = cb / 4;" in source) == params.get("COALESCE_B", False)
    results = emulate(tmp_path, v, v.resolve(params), STAGED_SHAPES)
    assert all(u == 0 and e < 1e-5 for e, u in results.values()), results


@pytest.mark.parametrize("option,shape,bug", [
    # STAGED_C: the warp reads its buffer before every lane has written it
    ("STAGED_C", (70, 133, 5), ("= v;  // lane l's 4 sums at 4l: the 128 in C's order, row by row\n    __syncwarp();",
                                "= v;  // lane l's 4 sums at 4l: the 128 in C's order, row by row\n    ;")),
    # STAGED_C: the first warp stages its sums over the ring's last tile while the others still multiply it
    ("STAGED_C", (70, 133, 5), ("asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n    __syncthreads();", ";")),
    # COALESCE_B: B's floats read from the wrong place in the row
    ("COALESCE_B", (70, 133, 37), ("src - cb + c + j * 32,", "src + c + j * 32,")),
    # COALESCE_B: the old bound, past N's end the next row's floats
    ("COALESCE_B", (70, 133, 37), ("n0 + c + j * 32 < N", "n0 + cb + j < N")),
])
def test_the_emulator_catches_unaligned_n_paths_without_their_barriers_or_one_off(tmp_path, option, shape, bug):
    v = LADDER["pipelined"]
    params = v.resolve(dict(MEDIUM, **{option: True}))
    assert render(v, params).source.count(bug[0]) == 1
    (err, unwritten), = emulate(tmp_path, v, params, [shape], edit=bug).values()
    assert err > 1e-3


# gemv reads its 16-bit inputs as raw 16-byte words and shuffles them. With ANY_OFFSET (issue 45) on shapes
# with N odd (rows of B at all 8 offsets: 31 lanes a warp compute, tiles of 248 x WARPS columns), K odd
# and N aligned (only A's rows shifted), both, N's end inside a lane's 8 columns, one element of C; and
# the aligned rung on aligned shapes.
GEMV_ODD = [(1, 13, 37), (3, 1001, 999), (4, 1000, 203), (2, 517, 40), (1, 1, 1)]


@pytest.mark.parametrize("dtype,params,shapes", [
    ("bf16", {"BM": 1, "ANY_OFFSET": True, "SPLIT_K": 1}, GEMV_ODD),  # plain stores
    ("bf16", {"BM": 4, "WARPS": 1, "ANY_OFFSET": True, "SPLIT_K": 16}, GEMV_ODD),  # atomics; 248-column tiles
    ("fp16", {"BM": 2, "ROWS": 8, "ANY_OFFSET": True, "SPLIT_K": 4}, [(3, 1001, 999)]),
    ("bf16", {"BM": 2, "SPLIT_K": 4}, [(3, 1000, 64), (1, 8, 8)]),  # rows aligned, without ANY_OFFSET
])
def test_gemv_takes_rows_at_any_offset(tmp_path, dtype, params, shapes):
    v = LADDER["gemv"]
    results = emulate(tmp_path, v, v.resolve(v.for_dtype(dtype, params)), shapes)
    assert all(u == 0 and e < 1e-5 for e, u in results.values()), results


@pytest.mark.parametrize("bug,nan", [
    # shifted one element too far: wrong sums, and NaN where that reaches past the matrix (main.cpp's fence)
    (("const int s = (offset_of(B) + r * N) & 7;", "const int s = (offset_of(B) + r * N + 1) & 7;"), False),  # rows of B
    (("const int sa = offset_of(pa);", "const int sa = offset_of(pa + 1);"), False),  # rows of A
    # A's values past K's end kept: at the last row of A they are the NaN around it, times B's zeros
    (("av.y = k + r8 + 2 * p + 1 < k_end ? av.y : 0.0f;", ";"), True),
])
def test_the_emulator_catches_gemv_off_by_one(tmp_path, bug, nan):
    v = LADDER["gemv"]
    params = v.resolve(v.for_dtype("bf16", {"BM": 4, "ANY_OFFSET": True, "SPLIT_K": 4}))
    assert render(v, params).source.count(bug[0]) == 1
    (err, unwritten), = emulate(tmp_path, v, params, [(3, 301, 99)], edit=bug).values()
    assert unwritten > 0 if nan else err > 1e-3


def test_the_emulator_sees_a_ring_read_one_stage_off(tmp_path):
    """skinny_async computing on the stage after the one it waited for: the emulator's copies must
    really land in shared memory, stage by stage, for this to fail."""
    v = LADDER["skinny_async"]
    params = v.resolve({"STAGES": 3})
    bug = ("compute_stage(ring + t % 3 *", "compute_stage(ring + (t + 1) % 3 *")
    assert bug[0] in render(v, params).source
    (err, unwritten), = emulate(tmp_path, v, params, [(17, 33, 300)], edit=bug).values()
    assert err > 1e-3 and unwritten == 0


def test_the_emulator_catches_a_wrong_kernel(tmp_path):
    """tiled with its inner loop one step short must fail here, or the tests above prove nothing."""
    v = LADDER["tiled"]
    bug = ("for (int k = 0; k < 32; ++k)", "for (int k = 0; k < 31; ++k)")
    assert bug[0] in render(v).source
    (err, unwritten), = emulate(tmp_path, v, v.defaults(), [(17, 33, 65)], edit=bug).values()
    assert err > 1e-3 and unwritten == 0



@pytest.mark.parametrize("bug", [
    ("__syncthreads();  // the tiles are complete", ";  // the tiles are complete"),  # reads a tile before it is stored
    ("* Bs[k][tx];\n        __syncthreads();", "* Bs[k][tx];\n        ;"),  # stores the next tile over one still read
])
def test_the_emulator_catches_a_missing_barrier(tmp_path, bug):
    """The threads of a block run one after another from barrier to barrier, so a thread with no barrier
    to stop it reads shared memory the others have not written yet, or writes over what they still read."""
    v = LADDER["tiled"]
    assert render(v).source.count(bug[0]) == 1
    (err, unwritten), = emulate(tmp_path, v, v.defaults(), [(17, 33, 65)], edit=bug).values()
    assert err > 1e-3 and unwritten == 0

@pytest.mark.parametrize("name", ["spread", "skinny_async"])
def test_the_emulator_catches_split_k_not_zeroing_c(tmp_path, name):
    """Split K adds into C, which the kernel zeroes itself (kernels/lib/split.j2): with the zeroing taken out,
    C's poison must survive the additions and fail here."""
    v = LADDER[name]
    params = v.resolve({"SPLIT_K": 4} if name == "spread" else {"BM": 2, "SPLIT_K": 4})
    bug = ("p[j] = 0.f;", ";")
    assert bug[0] in render(v, params).source
    (err, unwritten), = emulate(tmp_path, v, params, [(17, 33, 65)], edit=bug).values()
    assert unwritten > 0


def test_a_block_whose_threads_never_meet_ends_the_run(tmp_path):
    """A thread that leaves before a barrier the others wait at: the emulator says so and stops, instead of
    hanging until the test's timeout."""
    exe = build(tmp_path, """extern "C" __global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    if (threadIdx.x == 5)
        return;
    __syncthreads();
    C[threadIdx.x] = 0.f;
}
""")
    out = subprocess.run([str(exe), *map(str, [1, 64, 1, 1, 1, 1, 64, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1])],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3 and "deadlock: in block (0, 0, 0), 63 threads wait at barriers" in out.stderr, out
