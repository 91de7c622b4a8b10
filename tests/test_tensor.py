"""Input types and the tensor-core rungs: DTYPE as a parameter, the instruction class in the SASS, the
TMA contract (alignment, arch), the fused epilogue, the peaks; and on a GPU, the references, cuBLAS per
type and clear errors from the tensor-map encoder."""

import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

import gemmlab
from gemmlab.cli import cli
from gemmlab.compile import compile_rendered
from gemmlab.gpu.device import DeviceInfo
from gemmlab.errors import GemmlabError
from gemmlab.render import render
from gemmlab.results.check import U_INPUT
from gemmlab.results.model import ITEM_BYTES, Shape
from gemmlab.templates import DTYPES, discover
from conftest import sass, write_template
from sampling import FULL

TENSOR = ["wmma", "mma", "wgmma", "wgmma_ws", "wgmma_pingpong", "wgmma_tf32"]
SIXTEEN = ["wmma", "mma", "wgmma", "gemv", "gemv_n", "wgmma_ws", "wgmma_pingpong"]  # the rungs that run bf16 and fp16, in ladder order


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_dtype_is_a_parameter_of_variants_with_several_types():
    cat = discover()
    assert "DTYPE" not in cat.get("pipelined").params and cat.get("pipelined").dtypes == ("fp32",)
    wmma = cat.get("wmma")
    assert wmma.params["DTYPE"].choices == wmma.dtypes == ("bf16", "fp16", "tf32")
    assert wmma.dtype(wmma.defaults()) == "bf16" and wmma.for_dtype("tf32") == {"DTYPE": "tf32"}
    assert cat.get("wgmma").dtypes == ("bf16", "fp16")  # wgmma reads tf32 B only K-major: not offered
    with pytest.raises(GemmlabError, match="runs fp32, not bf16"):
        cat.get("tiled").for_dtype("bf16")
    with pytest.raises(GemmlabError, match="disagree"):
        wmma.for_dtype("fp16", {"DTYPE": "tf32"})
    assert set(U_INPUT) == set(ITEM_BYTES) == set(DTYPES)


def test_declaring_dtype_as_a_parameter_is_refused(user_dir):
    write_template(user_dir, "dt", "", header_extra='[params.DTYPE]\ndefault = "bf16"\n')
    cat = discover((user_dir,))
    assert "DTYPE is made from 'dtypes'" in cat.broken["dt"].message


def test_memory_estimate_counts_inputs_in_their_type():
    """Two input sets at a time, each A and B with a pristine copy: 16-bit inputs save 2 bytes on each."""
    s = Shape(1000, 2000, 3000)
    inputs = 1000 * 3000 + 3000 * 2000
    assert s.bytes_needed(dtype="fp32") - s.bytes_needed(dtype="bf16") == 2 * 2 * (4 - 2) * inputs
    # a float64 reference and bound, and the check's temporaries in float64
    assert s.bytes_needed(fp64_check=True) - s.bytes_needed() == (2 * 2 + 4) * 4 * 1000 * 2000


def test_out_of_memory_in_the_check_is_a_clear_error():
    """The other input sets and the epilogue's C0 come after the inputs: running out there is one clear
    error too (numpy stands in for cupy; the launch runs out)."""
    import numpy as np
    from gemmlab.gpu.problem import Problem

    def no_memory(inputs):
        def launch():
            raise MemoryError("out of memory")
        return launch
    p = Problem(Shape(4096, 4096, 8), dtype="bf16", xp=np)
    with pytest.raises(GemmlabError, match=r"out of GPU memory checking on shape 4096x4096x8: .* \(0.1 GiB each\)"):
        p.verify(no_memory)


@pytest.mark.parametrize("name,dtype,needle", [
    # wmma's 16x16x8 tf32 fragments become m16n8k4 instructions, half the K of mma's m16n8k8
    ("wmma", "bf16", "HMMA.16816.F32.BF16"), ("wmma", "tf32", "HMMA.1684.F32.TF32"),
    ("mma", "fp16", "HMMA.16816.F32"), ("mma", "tf32", "HMMA.1688.F32.TF32"),
    ("wgmma", "bf16", "HGMMA.64x256x16.F32.BF16"), ("wgmma_ws", "fp16", "HGMMA.64x256x16.F32"),
    ("wgmma_pingpong", "bf16", "HGMMA.64x128x16.F32.BF16"),
    ("wgmma_tf32", "tf32", "HGMMA.64x256x8.F32.TF32"),
])
def test_sass_has_the_tensor_core_instruction(name, dtype, needle):
    v = discover().get(name)
    compiled = compile_rendered(render(v, v.resolve(v.for_dtype(dtype))), "sm_90")
    text = sass(compiled)
    assert needle in text, f"{name} {dtype}: no {needle} in its SASS"
    if name.startswith("wgmma"):
        assert compiled.arch == "sm_90a" and "HMMA" not in text and "FFMA " not in text


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_wgmma_ws_k_step_is_lean(dtype):
    """wgmma_ws's consumer K step: at most 50 instructions per warp around its 4 HGMMAs, with the descriptors in
    uniform registers. (103 when each step divided its stage out of a step count and built its descriptors
    from pointers; cutting them bought clock under the H100's power cap, benchmarks/h100-power-experiments.txt.)"""
    v = discover().get("wgmma_ws")
    assert_lean_k_steps(sass(compile_rendered(render(v, v.resolve(v.for_dtype(dtype))), "sm_90")))


def assert_lean_k_steps(text: str) -> None:
    """Every innermost loop of the SASS that holds HGMMAs (a K step): 4 of them, their descriptors in uniform
    registers, at most 50 instructions a warp."""
    address = re.compile(r"\s*/\*([0-9a-f]{4,})\*/")  # cuobjdump's /*0a50*/ before each instruction
    lines = [l for l in text.splitlines() if address.match(l)]
    at = [int(address.match(l).group(1), 16) for l in lines]
    back = {i: int(m.group(1), 16) for i, line in enumerate(lines)  # backward branches: line -> target
            if (m := re.search(r"BRA (0x[0-9a-f]+)", line)) and int(m.group(1), 16) < at[i]}
    loops = []  # the innermost loops that hold HGMMAs: no other backward branch inside
    for i, target in back.items():
        inside = [j for j in range(len(lines)) if target <= at[j] <= at[i]]
        if "HGMMA" in "".join(lines[j] for j in inside) and not any(j in back for j in inside[:-1]):
            loops.append([lines[j] for j in inside])
    assert loops, "no K loop found"
    for body in loops:
        assert sum("HGMMA" in l for l in body) == 4
        assert len(body) <= 50, f"a K step of {len(body)} instructions:\n" + "\n".join(body)
        assert all(re.search(r"gdesc\[UR\d+\]", l) for l in body if "HGMMA" in l)


@pytest.mark.parametrize("in_flight", [0, 1])
def test_wgmma_k_loop_waits_for_the_step_it_releases(in_flight):
    """wgmma's K loop releases a stage once the products that read it are done: this step's with
    MMA_IN_FLIGHT=0 (the loop waits for all of them, `DEPBAR.LE gsb0, 0x0`), the step before's with 1
    (`0x1`: this step's run on while the next barrier is waited on; the last ones are waited for after)."""
    v = discover().get("wgmma")
    params = v.resolve(v.for_dtype("bf16", {"BM": 64, "BN": 64, "STAGES": 4, "SPLIT_K": 4,
                                            "MMA_IN_FLIGHT": in_flight}))
    text = sass(compile_rendered(render(v, params), "sm_90"))
    address = re.compile(r"\s*/\*([0-9a-f]{4,})\*/")
    lines = [l for l in text.splitlines() if address.match(l)]
    at = [int(address.match(l).group(1), 16) for l in lines]
    loops = []  # the backward branches' bodies that hold HGMMAs
    for i, line in enumerate(lines):
        m = re.search(r"BRA (0x[0-9a-f]+)", line)
        if m and int(m.group(1), 16) < at[i]:
            body = [l for j, l in enumerate(lines) if int(m.group(1), 16) <= at[j] <= at[i]]
            if any("HGMMA" in l for l in body):
                loops.append(body)
    assert loops, "no K loop found"
    waits = [re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", l) for l in min(loops, key=len)]
    assert [w.group(1) for w in waits if w] == [hex(in_flight)]
    if in_flight:
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x0" in text  # the last step's products, after the loop


@pytest.mark.parametrize("name, dtype", [("wgmma_ws", "bf16"), ("wgmma_tf32", "tf32")])
def test_cluster_meets_relaxed_and_accumulators_not_zeroed(name, dtype):
    """The start and end of the warp-specialised rungs (benchmarks/h100-power-experiments.txt, runs 61-67): the
    cluster's barriers arrive relaxed (no MEMBAR.ALL.GPU before the first arrive or after the last: a release
    arrive waits for every store the thread has in flight), and a tile's first product reads no accumulators
    (scale-d off, `RZ, !UPT`), so none are zeroed before it (no CS2R)."""
    v = discover().get(name)
    lines = sass(compile_rendered(render(v, v.resolve(v.for_dtype(dtype))), "sm_90")).splitlines()
    arrives = [i for i, line in enumerate(lines) if "UCGABAR_ARV" in line]
    assert len(arrives) >= 2, "no cluster barrier at the start and the end"
    assert not any("MEMBAR.ALL.GPU" in line for line in lines[:arrives[0]] + lines[arrives[-1]:])
    assert any("RZ, !UPT" in line for line in lines if "HGMMA" in line)
    assert not any("CS2R" in line for line in lines)


def test_wgmma_needs_hopper():
    v = discover().get("wgmma")
    with pytest.raises(GemmlabError, match="needs sm_90a; the target here is sm_80"):
        compile_rendered(render(v, v.defaults()), "sm_80")


@pytest.mark.parametrize("name", ["wgmma_ws", "wgmma_pingpong"])
def test_setmaxnreg_takes_effect(name):
    """ptxas ignores setmaxnreg (warning C7508) unless the kernel's register count is capped at entry."""
    v = discover().get(name)
    # the cache keeps the log of the NVRTC compile that made the entry (same source, options and NVRTC:
    # its key), so a compile of these defaults by another test needs no second one here
    compiled = compile_rendered(render(v, v.defaults()), "sm_90")
    assert "C7508" not in compiled.log and "USETMAXREG" in sass(compiled)
    assert compiled.resources.registers * v.threads(v.defaults()) <= 65536


@pytest.mark.parametrize("name, params", [("wgmma_ws", {}), ("wgmma_ws", {"BM": 192, "BN": 192}),
                                          ("wgmma_pingpong", {}), ("wgmma_tf32", {})])
def test_setmaxnreg_hands_out_only_the_blocks_registers(name, params):
    """setmaxnreg.inc waits until the registers it asks for are free: the consumers may take only what the
    producer's setmaxnreg.dec gave back out of the block's own (its threads' launch cap times its threads),
    or the kernel hangs. (Asking for 65536 - 128 * PRODUCER per consumer set hung a wgmma_ws experiment.)"""
    v = discover().get(name)
    p = v.resolve(v.for_dtype("tf32" if name == "wgmma_tf32" else "bf16", params))
    rendered, threads = render(v, p), v.threads(p)
    dec = [int(n) for n in re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32 (\d+)", rendered.source)]
    inc = [int(n) for n in re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+)", rendered.source)]
    assert len(dec) == len(inc) == 1, (dec, inc)
    cap = compile_rendered(rendered, "sm_90a").resources.registers
    assert cap == 65536 // threads // 8 * 8
    assert 128 * dec[0] + (threads - 128) * inc[0] <= cap * threads


def test_pingpong_hands_the_turn_over_on_named_barriers():
    """wgmma_pingpong's consumers take turns: a named barrier for 256 threads (0x100), arrived at by one
    warpgroup and waited on by the other, besides the block-wide barrier 0 before the roles split."""
    v = discover().get("wgmma_pingpong")
    text = sass(compile_rendered(render(v, v.defaults()), "sm_90"))
    assert re.search(r"BAR\.ARV R\d+, 0x100", text) and re.search(r"BAR\.SYNC\S* R\d+, 0x100", text)
    assert v.threads(v.defaults()) == 384  # producer + two consumers, whatever the tile


def test_tma_rungs_state_their_alignment_and_boxes():
    v = discover().get("wgmma")
    geo = v.geometry(v.defaults(), 257, 136, 104)
    assert geo.tma == (("A", (64, 128)), ("B", (64, 64))) and geo.smem > 48 * 1024
    with pytest.raises(GemmlabError, match="K .A's rows. and N .B's rows. must be multiples of 8"):
        v.geometry(v.defaults(), 256, 130, 256)
    ws = discover().get("wgmma_ws")
    assert ws.geometry(ws.defaults(), 4096, 4096, 4096, sms=132).grid == (132, 1, 1)  # persistent
    assert ws.geometry(ws.defaults(), 128, 256, 64, sms=132).grid == (2, 1, 1)  # one cluster of 2 blocks


def test_tma_box_must_be_two_expressions(user_dir):
    write_template(user_dir, "box", "", header_extra="[launch.tma]\nA = [\"64\"]\n")
    assert "2 expressions" in discover((user_dir,)).broken["box"].message


def test_resident_says_which_grids_must_run_at_once(user_dir):
    """`resident` in a template's launch table: an expression over the parameters, true where the kernel's
    blocks wait for each other (wgmma_ws with stream-K), so that the runner asks the driver first."""
    ws, tf32 = discover().get("wgmma_ws"), discover().get("wgmma_tf32")
    assert ws.geometry(ws.defaults(), 4096, 4096, 4096, sms=132).resident
    assert not ws.geometry(dict(ws.defaults(), STREAM_K=False), 4096, 4096, 4096, sms=132).resident
    assert not tf32.geometry(tf32.defaults(), 4096, 4096, 4096, sms=132).resident
    path = write_template(user_dir, "waits", "")
    path.write_text(path.read_text().replace("[launch]\n", "[launch]\nresident = 7\n"))
    assert "launch.resident must be true, false, or an expression" in discover((user_dir,)).broken["waits"].message


@pytest.mark.parametrize("epilogue,needle", [("alpha_beta", "alpha * ("), ("bias_relu", "fmaxf(")])
def test_epilogue_is_fused_into_the_store(epilogue, needle):
    for name in TENSOR:
        v = discover().get(name)
        src = render(v, v.resolve({"EPILOGUE": epilogue})).source
        assert "float alpha, float beta, const float* __restrict__ bias" in src and needle in src, name
        assert needle not in render(v, v.defaults()).source


def test_tensor_peaks():
    h100 = DeviceInfo(0, "H100", (9, 0), 132, 1980000, 2619000, 5120, 50 << 20, 80 << 30, 48 << 10,
                      227 << 10, 228 << 10, 65536, 2048, "13.0", "13.0")
    assert h100.peak("bf16") == h100.peak("fp16") == 2 * h100.peak("tf32") == 132 * 4096 * 1.98e9
    assert h100.peak("fp32") == h100.peak_fp32 == 132 * 128 * 2 * 1.98e9
    assert set(h100.to_json()["peak_tflops"]) == set(DTYPES)
    assert any("BF16 tensor peak" in row[0] for row in h100.derivation())
    old = DeviceInfo(**{**h100.__dict__, "cc": (7, 5)})
    with pytest.raises(GemmlabError, match="tensor-core rate"):
        old.peak("bf16")


def test_cli_list_show_build_take_dtype():
    r = invoke("list", "--dtype", "bf16", "--json")
    assert r.exit_code == 0 and [v["name"] for v in json.loads(r.output)] == SIXTEEN
    r = invoke("list", "--dtype", "tf32", "--json")
    assert [v["name"] for v in json.loads(r.output)] == ["wmma", "mma", "wgmma_tf32"]
    r = invoke("show", "--variant", "wmma", "--dtype", "tf32")
    assert r.exit_code == 0 and "wmma::precision::tf32" in r.output
    r = invoke("show", "--variant", "tiled", "--dtype", "bf16")
    assert r.exit_code == 1 and "runs fp32, not bf16" in r.output and "Traceback" not in r.output
    r = invoke("build", "--variant", "mma", "--dtype", "tf32", "--arch", "sm_90", "--json")
    rows = json.loads(r.output)["rows"]
    assert r.exit_code == 0 and [row["params"]["DTYPE"] for row in rows] == ["tf32"] and rows[0]["spills"] == 0


# ---------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d not in ("e4m3", "e5m2")])  # FP8's cuBLAS row: test_fp8.py
def test_cublas_and_reference_per_dtype(dtype):
    from gemmlab.gpu.problem import Problem
    p = Problem(Shape(257, 136, 104), dtype=dtype)
    assert p.A.dtype.itemsize == ITEM_BYTES[dtype] and p.C.dtype.name == "float32"
    r = p.cublas(min_reps=1)
    assert r.check.passed and r.dtype == dtype
    # the float64 check sees the same inputs: for 16-bit types only the order of the sums differs
    q = Problem(Shape(257, 136, 104), seed=p.seed, dtype=dtype, fp64_check=True)
    assert float(abs(q.ref - p.ref.astype(q.ref.dtype)).max()) < 1e-3


@pytest.mark.gpu
def test_bf16_rounds_to_nearest_even():
    import cupy
    import numpy as np
    from gemmlab.gpu.problem import from_bf16, to_bf16
    x = cupy.asarray(np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 3.14159265], np.float32))
    got = from_bf16(to_bf16(x)).get()
    assert got.tolist() == [1.0, 1.0, 1 + 2**-6, -2.5, 3.140625]


@pytest.mark.gpu
def test_tensor_map_errors_are_clear():
    import cupy
    from gemmlab.gpu.launch import tensor_map
    a = cupy.zeros((64, 64), dtype=cupy.float16)
    assert tensor_map(a, (64, 64), "fp16").nbytes == 128
    with pytest.raises(GemmlabError, match="cuTensorMapEncodeTiled refused a 64 x 64 fp16 matrix with box .512, 64."):
        tensor_map(a, (512, 64), "fp16")
    assert tensor_map(cupy.zeros((64, 64), dtype=cupy.float32), (32, 64), "fp32").nbytes == 128  # C, for TMA stores
    with pytest.raises(GemmlabError, match="tensor maps for bf16, fp16, tf32, e4m3, e5m2, fp32, not int8"):
        tensor_map(cupy.zeros((64, 64), dtype=cupy.int8), (64, 64), "int8")


@pytest.mark.gpu
@pytest.mark.parametrize("name", TENSOR)
@pytest.mark.parametrize("epilogue", ["alpha_beta", "bias_relu"])
def test_epilogues_on_the_gpu(name, epilogue):
    from gemmlab.gpu.problem import Problem
    v = gemmlab.catalog().get(name)
    params = v.resolve({"EPILOGUE": epilogue})
    r = Problem(Shape(300, 264, 136), dtype=v.dtype(params)).run(gemmlab.build(v, params), timed=False)
    assert r.status == "PASS", (r.error, r.check)


@pytest.mark.gpu
@pytest.mark.parametrize("operand", ["A", "B"])
def test_wgmma_tf32_rounds_both_operands_to_nearest(operand):
    """x = 1 + 3/4 of TF32's last place: rounded to nearest it is 1 + 2^-10, truncated 1. wgmma_tf32's tensor
    maps have the copy engine round A and B; with FP32 maps the tensor cores truncated A. K = 32 products of
    x and 1 sum exactly in FP32, so C tells which happened, as cuBLAS's TF32 GEMM does it."""
    from gemmlab.gpu.launch import cublas_gemm
    from gemmlab.gpu.problem import Problem
    x, rounded = 1 + 0.75 * 2.0 ** -10, 1 + 2.0 ** -10
    v = gemmlab.catalog().get("wgmma_tf32")
    params = v.resolve(v.for_dtype("tf32", {}))
    p = Problem(Shape(256, 256, 32), dtype="tf32")
    p.A[...], p.B[...] = (x, 1.0) if operand == "A" else (1.0, x)
    p.main.pristine["A"][...], p.main.pristine["B"][...] = p.A, p.B  # these inputs are the test's, not the kernel's doing
    p.run(gemmlab.build(v, params), timed=False)
    assert float(p.C.min()) == float(p.C.max()) == 32 * rounded, (float(p.C.min()), float(p.C.max()))
    cublas_gemm(p.A, p.B, p.C, "tf32")
    assert float(p.C.min()) == float(p.C.max()) == 32 * rounded, "cuBLAS's TF32 rounds differently"


@pytest.mark.gpu
def test_cli_compare_bf16_ladder():
    r = invoke("compare", "--dtype", "bf16", "-M", "200", "-N", "136", "-K", "104", "--json", "--reps", "1")
    doc = json.loads(r.output)
    assert r.exit_code == 0, r.output
    assert doc["dtype"] == "bf16" and [row["variant"] for row in doc["rows"]] == SIXTEEN + ["cuBLAS"]
    assert all(row["status"] == "PASS" and row["dtype"] == "bf16" for row in doc["rows"])


def test_compare_takes_its_type_from_the_first_named_variant():
    """`compare --variants tiled,wmma` runs tiled's fp32, which wmma does not have: one clear error,
    before any GPU work (so this runs on a CPU too)."""
    r = invoke("compare", "--variants", "tiled,wmma", "--size", "64")
    assert r.exit_code == 1 and "variant 'wmma' runs bf16, fp16, tf32, not fp32" in r.output
    assert "Traceback" not in r.output


# Shapes where wgmma_ws streams its last wave on 132 SMs (stream_k.j2: idle SMs x K steps > 12 x 132),
# single blocks: 133 tiles, so the last tile's 64 K steps go to 64 blocks of one step each; 192 tiles
# (60 streamed) with K not a multiple of 64; 336 tiles of 192 x 192 (72 streamed) in fp16 with the
# alpha/beta epilogue. In 2-block clusters (66 clusters, tiles of 256 x 256: idle clusters x K steps >
# 12 x 66): 68 tiles, 2 streamed over 16 K steps; the same with K = 1048 (17 steps, the last one short).
@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype,params", [
    ((896, 4864, 4096), "bf16", {"CLUSTER_M": 1}),
    ((2000, 3000, 4000), "bf16", {"CLUSTER_M": 1, "STAGED_STORE": False}),
    ((4000, 3000, 2000), "fp16", {"CLUSTER_M": 1, "BM": 192, "BN": 192, "EPILOGUE": "alpha_beta"}),
    ((512, 8704, 1024), "bf16", {"CLUSTER_M": 2}),
    ((1000, 4352, 1048), "fp16", {"CLUSTER_M": 2, "EPILOGUE": "alpha_beta"})])
def test_stream_k_shares_out_the_last_wave(shape, dtype, params):
    from gemmlab.gpu.problem import Problem
    v = gemmlab.catalog().get("wgmma_ws")
    params = v.resolve(v.for_dtype(dtype, params))
    assert params["STREAM_K"] and v.geometry(params, *shape, 132).workspace > 0
    # timed: many launches, then checked again, so the flags left by one launch must not spoil the next
    r = Problem(Shape(*shape), dtype=dtype).run(gemmlab.build(v, params), min_reps=3)
    assert r.status == "PASS" and r.timing is not None, (r.error, r.check)


@pytest.mark.gpu
@pytest.mark.parametrize("name,dtype,cluster", [("wgmma_ws", "bf16", "CLUSTER_M"), ("wgmma_tf32", "tf32", "CLUSTER_N")])
def test_every_cluster_of_the_persistent_grid_is_resident(name, dtype, cluster):
    """The persistent grid of 2-block clusters must fit on the GPU at once. wgmma_ws's stream-K blocks wait
    for each other, which cannot deadlock only then (its template says `resident`, and the runner checks
    before each launch); for wgmma_tf32 a cluster left over would run as a second wave. (With 4-block
    clusters the H100 places 30 of 33: they are not offered.)"""
    from gemmlab.gpu.launch import load
    from gemmlab.gpu.device import get_device
    from gemmlab.gpu.launch import resident_blocks
    v = gemmlab.catalog().get(name)
    params = v.resolve(v.for_dtype(dtype, {}))
    assert params[cluster] == 2
    geo = v.geometry(params, 4096, 4096, 4096, get_device().sms)
    assert geo.resident == (name == "wgmma_ws")
    kernel = load(gemmlab.build(v, params).compiled)
    kernel.max_dynamic_shared_size_bytes = geo.smem
    assert resident_blocks(kernel, geo, get_device().sms) >= geo.grid[0], geo.grid


@pytest.mark.gpu
def test_a_grid_that_cannot_all_run_at_once_is_refused():
    """Told the GPU has twice its SMs, wgmma_ws sizes its persistent grid for them: stream-K's blocks would
    wait for blocks that never start. The runner refuses it, before any launch, with one clear message."""
    import dataclasses
    from gemmlab.gpu.problem import Problem
    v = gemmlab.catalog().get("wgmma_ws")
    params = v.resolve(v.for_dtype("bf16", {}))
    p = Problem(Shape(4096, 4096, 64), dtype="bf16")
    p.device = dataclasses.replace(p.device, sms=2 * p.device.sms)
    with pytest.raises(GemmlabError, match=r"needs all \d+ blocks of its grid running at once .*STREAM_K.* holds \d+"):
        p.run(gemmlab.build(v, params), timed=False)


# wgmma_ws with 64-row tiles (decode: a few rows of C, all of B to stream): one consumer warpgroup beside the
# producer, rings of up to 12 stages, and K split over blockIdx.z, so that C's few tiles still reach every SM.
WS64 = [dict(BN=64, STAGES=12, SPLIT_K=1, STAGED_STORE=True), dict(BN=128, STAGES=8, SPLIT_K=1, STAGED_STORE=False),
        dict(BN=64, STAGES=4, SPLIT_K=2), dict(BN=128, STAGES=6, SPLIT_K=4), dict(BN=64, STAGES=10, SPLIT_K=8)]


def ws64(dtype="bf16", **over):
    v = discover().get("wgmma_ws")
    split = over.get("SPLIT_K", 1) > 1
    base = dict(BM=64, CLUSTER_M=1, STREAM_K=False, GPC_ORDER=False, **({"STAGED_STORE": False} if split else {}))
    return v, v.resolve(v.for_dtype(dtype, dict(base, **over)))


@pytest.mark.parametrize("over", WS64, ids=[str(o) for o in WS64])
@pytest.mark.parametrize("shape", [(16, 4608, 3584), (128, 5120, 4096), (2100, 2000, 72), (1, 5003, 4001)])
def test_ws_64_row_tiles_launch_as_the_header_says(over, shape):
    """Two warpgroups (producer, one consumer), a persistent grid of min(SMS / SPLIT_K, tiles) blocks along x and
    SPLIT_K slices along z, the ring and (without split) the store scratch in shared memory; 72 tiles of 64 x 64 run
    as cuBLAS's decode kernel does, one block per tile and K whole."""
    v, p = ws64(**over)
    M, N, K = shape
    tiles, split = -(-M // 64) * -(-N // p["BN"]), p["SPLIT_K"]
    geo = v.geometry(p, M, N, K, sms=132)
    assert geo.block == (256, 1, 1) and geo.grid == (min(132 // split, tiles), 1, split)
    assert geo.smem == p["STAGES"] * (64 + p["BN"]) * 128 + 1024 + (4 * 16 * 40 * 4 if p["STAGED_STORE"] else 0)
    assert geo.smem <= 232448 and not geo.resident and geo.workspace == 0
    source = render(v, p).source
    assert "__launch_bounds__(256, 1)" in source and "setmaxnreg." not in source
    assert (f"a grid of min(SMS / {split}, tiles) x 1 x {split} blocks" in source) == (split > 1)
    if (M, N, p["BN"], split) == (16, 4608, 64, 1):
        assert geo.grid == (72, 1, 1)


def test_ws_64_row_tiles_are_offered_only_where_they_fit():
    """Deep rings fit 64-row tiles only (12 stages of 64 x 64, 8 of 64 x 128); 64-column tiles and split K only
    with 64 rows; split K only into an FP32 C without an epilogue, and without the persistent grid's extras."""
    v = discover().get("wgmma_ws")
    def bad(**over):
        return v.violations(dict(v.defaults(), **over))
    ok = dict(BM=64, BN=64, CLUSTER_M=1, STREAM_K=False, GPC_ORDER=False, STAGED_STORE=False)
    assert not bad(**dict(ok, STAGES=12)) and not bad(**dict(ok, BN=128, STAGES=8, SPLIT_K=8))
    assert any("SMEM <= SMEM_OPTIN" in r for r in bad(**dict(ok, BN=128, STAGES=10)))
    assert any("SMEM <= SMEM_OPTIN" in r for r in bad(BM=128, BN=128, STAGES=8))
    assert bad(BM=128, BN=64) and bad(BM=64, BN=256)
    assert bad(**dict(ok, BM=128, BN=128, SPLIT_K=2))
    assert bad(**dict(ok, SPLIT_K=2, OUT_DTYPE="bf16", DTYPE="bf16"))
    assert bad(**dict(ok, SPLIT_K=2, EPILOGUE="bias_relu"))
    for extra in (dict(STREAM_K=True), dict(GPC_ORDER=True), dict(STAGED_STORE=True), dict(CLUSTER_M=2),
                  dict(ARRIVAL=True)):
        assert bad(**dict(ok, SPLIT_K=2, **extra)), extra


# Compiled on every CPU run: a deep ring with K whole and a split one (2 to 3 s each on two cores);
# GEMMLAB_TESTS_FULL=1 compiles every 64-row configuration in both types.
WS64_CPU = [(o, d) for o in WS64 for d in ("bf16", "fp16")] if FULL else [(WS64[0], "bf16"), (WS64[3], "fp16")]


@pytest.mark.parametrize("over,dtype", WS64_CPU, ids=[f"{o}-{d}" for o, d in WS64_CPU])
def test_ws_64_row_tiles_compile_to_tma_and_hgmma_without_setmaxnreg(over, dtype):
    """Every 64-row configuration above compiles for sm_90a with no spills and no serialized wgmma; its SASS has
    the 64 x BN HGMMA, TMA loads and no USETMAXREG (one consumer: no registers to move); split K adds into C with
    reductions that wait for no answer (REDG, not ATOMG) and meets on a named barrier of the consumer's 128 threads."""
    v, p = ws64(dtype, **over)
    c = compile_rendered(render(v, p), "sm_90")
    assert c.arch == "sm_90a" and c.resources.spills == 0 and c.resources.stack == 0, c.resources
    assert "C7514" not in c.log and "wgmma.mma_async instructions are serialized" not in c.log, c.log
    text = sass(c)
    assert f"HGMMA.64x{p['BN']}x16.F32" in text and "UTMALDG" in text and "USETMAXREG" not in text
    if p["SPLIT_K"] > 1:
        assert "REDG.E.ADD.F32x2" in text and "ATOMG" not in text and re.search(r"BAR\.SYNC\S* 0x1, 0x80", text)


@pytest.mark.parametrize("over", [dict(BN=64, STAGES=12, SPLIT_K=1), dict(BN=128, STAGES=8, SPLIT_K=4)])
def test_ws_64_row_k_step_is_lean(over):
    """The consumer's K step of a 64-row tile is the lean loop of test_wgmma_ws_k_step_is_lean: 4 HGMMAs with
    their descriptors in uniform registers, at most 50 instructions a warp."""
    v, p = ws64(**over)
    assert_lean_k_steps(sass(compile_rendered(render(v, p), "sm_90")))


# The slices' K steps and the persistent grid's tiles, cut out of the rendered kernel for g++: every block
# (x, z) of the launch walks its tiles with for_each_piece and takes steps k_first .. k_end-1 of each.
SPLIT_HOST = r"""
#include <algorithm>
#include <cstdio>
using std::min; using std::max;
#define __device__
#define __forceinline__ inline
struct { int z; } blockIdx;
%s
int main() {
    int tiles, steps, G, S;
    while (scanf("%%d %%d %%d %%d", &tiles, &steps, &G, &S) == 4) {
        for (int z = 0; z < S; ++z) {
            blockIdx.z = z;
            %s
            for (int b = 0; b < G; ++b)
                for_each_piece(tiles, steps, b, G, [&](int tile, int, int) {
                    for (int k = k_first; k < k_end; ++k) printf("%%d %%d %%d\n", tile, k, z);
                    printf("%%d -1 %%d\n", tile, z);  // the block's arrival for the tile (split_tiles' count)
                });
        }
        printf("end\n");
    }
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("split", [2, 4, 8])
def test_split_slices_take_every_k_step_of_every_tile_once(split, tmp_path):
    v, p = ws64(BN=64, STAGES=4, SPLIT_K=split)
    source = render(v, p).source
    start = source.index("template <typename Piece>")
    piece = source[start:source.index("\n}\n", start) + 3]
    slice_lines = "\n".join(l for l in source.splitlines() if "const int per =" in l or "const int k_first =" in l)
    assert slice_lines.count("\n") == 1
    (tmp_path / "split.cpp").write_text(SPLIT_HOST % (piece, slice_lines))
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(tmp_path / "split"), str(tmp_path / "split.cpp")],
                   check=True, capture_output=True)
    cases = []  # K steps fewer than slices, steps not a multiple of them, more tiles than blocks
    for M, N, K in [(16, 4608, 3584), (128, 5120, 4096), (2100, 2000, 72), (1, 5003, 4001), (16, 64, 64),
                    (64, 640, 200)]:
        cases.append((-(-M // 64) * -(-N // 64), -(-K // 64), v.geometry(p, M, N, K, sms=132).grid[0], split))
    stdin = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    out = subprocess.run([str(tmp_path / "split")], input=stdin, capture_output=True, text=True, check=True).stdout
    blocks = out.split("end\n")[:-1]
    assert len(blocks) == len(cases)
    for (tiles, steps, G, S), block in zip(cases, blocks):
        assert G == min(132 // S, tiles)
        rows = [tuple(map(int, line.split())) for line in block.splitlines()]
        done = sorted((t, k) for t, k, _ in rows if k >= 0)
        assert done == sorted((t, k) for t in range(tiles) for k in range(steps)), (tiles, steps, G, S)
        arrivals = sorted((t, z) for t, k, z in rows if k < 0)
        assert arrivals == sorted((t, z) for t in range(tiles) for z in range(S))  # SPLIT_K a tile, every launch
