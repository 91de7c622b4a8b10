"""results/tuning.py at its edges: each of auto's rules on both sides of every threshold, the cache's
file, its keys and its ties, a damaged cache. Written from the mutants tests/test_sweep.py and
tests/test_suites.py let through (docs/testing.md, "Mutation testing")."""

import json

import pytest

import gemmlab
from gemmlab.errors import GemmlabError
from gemmlab.render import render
from gemmlab.results import tuning
from gemmlab.results.model import Shape


def test_the_cache_is_where_gemmlab_tuning_says(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_TUNING", str(tmp_path / "new" / "t.json"))
    assert tuning.path() == tmp_path / "new" / "t.json" and tuning.load() == {}
    row = {"variant": "tiled", "params": {"TILE": 16}, "ms": 2.0, "tflops": 3.0, "dtype": "bf16"}
    assert tuning.save_best("GPU", Shape(8, 16, 32), row) is None  # its directory is made
    entry = json.loads((tmp_path / "new" / "t.json").read_text())["GPU"]["8x16x32 bf16"]
    assert {k: entry[k] for k in ("variant", "params", "ms", "tflops")} == {"variant": "tiled", "params": {"TILE": 16},
                                                                         "ms": 2.0, "tflops": 3.0}
    assert entry["date"].endswith("+00:00") and entry["date"][:2] == "20"
    assert tuning.save_best("GPU", Shape(8, 16, 32), dict(row, ms=2.0, params={"TILE": 8})) == entry  # a tie keeps it


@pytest.mark.parametrize("text,why", [("[1, 2]", "not a JSON object"), ("{", "Expecting property name")])
def test_a_damaged_cache_is_named(tmp_path, monkeypatch, text, why):
    (tmp_path / "t.json").write_text(text)
    monkeypatch.setenv("GEMMLAB_TUNING", str(tmp_path / "t.json"))
    with pytest.raises(GemmlabError) as e:
        tuning.load()
    assert e.value.message.startswith(f"the tuning cache {tmp_path / 't.json'} cannot be read: {why}")
    assert e.value.hint == "move it away (a sweep with --save-best starts a new one)"


def test_a_shipped_winner_that_is_faster_is_not_replaced(monkeypatch):
    shipped = {"GPU": {"64x64x64": {"variant": "spread", "params": {}, "ms": 1.0}}}
    monkeypatch.setattr(tuning, "shipped", lambda: shipped)
    row = {"variant": "tiled", "params": {}, "ms": 1.5, "tflops": 1.0}
    assert tuning.save_best("GPU", Shape(64, 64, 64), row) == shipped["GPU"]["64x64x64"]
    assert not tuning.path().exists()
    assert tuning.save_best("GPU", Shape(64, 64, 64), dict(row, ms=0.5)) is None
    assert tuning.cached("GPU", Shape(64, 64, 64))[0]["variant"] == "tiled"  # the user's own wins


def test_the_nearest_cached_shape_and_ties():
    def save(device, M, N, K):
        tuning.save_best(device, Shape(M, N, K), {"variant": f"{M}x{N}x{K}", "params": {}, "ms": 1.0, "tflops": 1.0})
    save("GPU", 1024, 1024, 1448)  # a factor of 1.414 away in K: near, just
    save("GPU", 1024, 1024, 1100)
    assert tuning.cached("GPU", Shape(1024, 1024, 1024))[1] == "1024x1024x1100"  # the nearest, not the first
    assert tuning.cached("GPU", Shape(1024, 1024, 2047))[1] == "1024x1024x1448"
    assert tuning.cached("GPU", Shape(1024, 1024, 724)) is None  # 1100 / 724: a factor of 1.52
    save("TIE", 1024, 1024, 1448)
    save("TIE", 1448, 1024, 1024)
    assert tuning.cached("TIE", Shape(1024, 1024, 1024))[1] == "1024x1024x1448"  # equally near: the first saved


def test_a_cached_entry_the_templates_no_longer_take_falls_back_on_the_rule():
    tuning.save_best("GPU", Shape(1024, 1024, 1024), {"variant": "gone", "params": {}, "ms": 1.0, "tflops": 1.0})
    v, params, how = tuning.choose(gemmlab.catalog(), "GPU", Shape(1024, 1024, 1024))
    assert v.name == "spread" and how.startswith("rule: ")
    tuning.save_best("GPU", Shape(512, 512, 512), {"variant": "tiled", "params": {"TILE": 16}, "ms": 1.0, "tflops": 1.0})
    assert tuning.choose(gemmlab.catalog(), "GPU", Shape(512, 512, 512))[2] == "tuning cache (512x512x512 on GPU)"


@pytest.mark.parametrize("shape,sms,variant,split", [
    ((1152, 256, 4096), 10, "spread", None),       # 128 x 256 tiles fill exactly 90% of the waves
    ((256, 768, 4096), 10, "spread64", None),      # 24 tiles of 64 x 128 fill 80%, 2 an SM or more
    ((128, 512, 4096), 5, "pipelined", 2),         # 8 of them on 5 SMs: 80%, but under 2 an SM
    ((64, 1152, 4096), 10, "spread64", None),      # 9 of 10: 90%, under 2 an SM
    ((64, 1024, 4096), 6, "pipelined", 4),         # both fill 2/3: not better, so K is split (8 tiles of 64 x 128)
    ((1152, 256, 255), 10, "pipelined", 1),        # K under 256: pipelined however full the waves
    ((64, 128, 2 ** 20), 132, "pipelined", 64),    # at most 64 slices
    ((128, 128, 2 ** 16), 8, "pipelined", 8),      # 4 tiles of 64 x 64 x 8 = 4 blocks an SM: enough
    ((64, 128, 1024), 132, "pipelined", 32),       # slices of exactly 32 rows of K are allowed
    ((64, 128, 1023), 132, "pipelined", 16),
])
def test_the_rules_thresholds(shape, sms, variant, split):
    name, overrides, why = tuning.rule(Shape(*shape), sms=sms)
    got = "spread64" if name == "spread" and overrides.get("BM") == 64 else name
    assert got == variant and overrides.get("SPLIT_K") == split
    if split:
        assert why.endswith(f"K split {split} ways, so that every SM gets work")


@pytest.mark.parametrize("shape,sms,tile", [
    ((64 * 132, 65, 255), 132, (64, 128)),     # N over 64 and as many 64 x 128 tiles as SMs: the wider tile
    ((64 * 131, 65, 255), 132, (64, 64)),      # one tile fewer than SMs
    ((64 * 132, 64, 255), 132, (64, 64)),      # N of 64: the narrow tile
])
def test_the_tile_for_few_tiles(shape, sms, tile):
    name, overrides, _ = tuning.rule(Shape(*shape), sms=sms)
    assert name == "pipelined" and (overrides["BM"], overrides["BN"]) == tile
    assert gemmlab.catalog().get(name).resolve(overrides)  # a configuration the template takes


@pytest.mark.parametrize("shape,ksplit", [
    ((33, 8, 256), 8),              # up to 8 columns, M over 32: a stream of A; few rows and K of 256: K split
    ((33, 8, 255), 1),
    ((8 * 263, 1, 4096), 8),        # 263 blocks of 8 rows: under 2 an SM
    ((8 * 264, 1, 4096), 1),
    ((198, 16, 512), 8),            # small C of up to 16 columns: 198 x 2 groups = 3 blocks an SM, K of 512
])
def test_few_columns_take_gemv_n_fp32(shape, ksplit):
    name, overrides, why = tuning.rule(Shape(*shape), sms=132)
    assert (name, overrides) == ("gemv_n_fp32", {"KSPLIT": ksplit})
    assert why.startswith(f"{shape[1]} column(s) of C: a stream of A")
    assert gemmlab.catalog().get(name).resolve(overrides)


@pytest.mark.parametrize("shape", [(199, 16, 512), (198, 16, 511), (100, 17, 4096), (32, 8, 4096)])
def test_small_c_past_the_edges_does_not(shape):
    assert tuning.rule(Shape(*shape), sms=132)[0] != "gemv_n_fp32"


@pytest.mark.parametrize("shape,sms,variant,params", [
    ((1, 2112, 3072), 132, "skinny_narrow", {}),                      # 66 bands: 2 x 66 = 132 SMs' halves
    ((1, 2080, 3072), 132, "skinny_async", {"BM": 1, "SPLIT_K": 32}),  # 65 bands
    ((2, 128, 2 ** 20), 132, "skinny_async", {"BM": 2, "SPLIT_K": 64}),  # at most 64 slices
    ((2, 384, 2 ** 20), 4, "skinny_async", {"BM": 2, "SPLIT_K": 8}),   # 3 blocks x 8 x 2 warps = 6 an SM
    ((5, 3072, 3072), 132, "skinny_async", {"BM": 8, "SPLIT_K": 32}),
    ((9, 3072, 3072), 132, "skinny_async", {"BM": 16, "SPLIT_K": 32}),
])
def test_the_skinny_rules_thresholds(shape, sms, variant, params):
    assert tuning.rule(Shape(*shape), sms=sms)[:2] == (variant, params)


WS64 = {"BM": 64, "CLUSTER_M": 1, "STREAM_K": False, "GPC_ORDER": False}  # wgmma_ws's 64-row tiles, one block an SM
SLICED = {"STAGED_STORE": False}  # K slices add into C with atomics


@pytest.mark.parametrize("shape,variant,params", [
    # a B of 64 MB or less: wgmma_ws's 64-row tiles, K split while the blocks stay within one an SM
    ((16, 4608, 3584), "wgmma_ws", dict(WS64, BN=128, STAGES=6, SPLIT_K=2, **SLICED)),  # 33 MB: 36 x 2 (x 4: 144)
    ((16, 3584, 3584), "wgmma_ws", dict(WS64, BN=128, STAGES=6, SPLIT_K=4, **SLICED)),  # 28 x 4 = 112
    ((33, 4608, 3584), "wgmma_ws", dict(WS64, BN=64, STAGES=10)),                       # 72 tiles: no split
    ((64, 4096, 8192), "wgmma_ws", dict(WS64, BN=64, STAGES=10, SPLIT_K=2, **SLICED)),  # 64 MB: 64 x 2
    ((65, 4608, 3584), "wgmma_ws", dict(WS64, BN=128, STAGES=8)),                       # 2 bands: 72 tiles
    ((128, 3584, 3584), "wgmma_ws", dict(WS64, BN=128, STAGES=8, SPLIT_K=2, **SLICED)),  # 56 x 2
    ((17, 4104, 512), "wgmma_ws", dict(WS64, BN=128, STAGES=6, SPLIT_K=2, **SLICED)),   # 4 steps a slice
    ((17, 4096, 256), "wgmma_ws", dict(WS64, BN=128, STAGES=6)),
    # a larger B: wgmma's 64 x 128 tiles, 2 blocks an SM
    ((64, 4104, 8192), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4, "SPLIT_K": 4}),   # past 64 MB: 33 tiles x 4
    ((16, 3584, 18944), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4, "SPLIT_K": 4}),  # 28 x 4 = 112: half the SMs
    ((128, 3584, 18944), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4, "SPLIT_K": 4}),  # 2 bands: 56 x 4 in 2 x 132
    ((16, 28672, 8192), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4}),               # 224 tiles: no split
    ((5, 4096, 14336), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4, "SPLIT_K": 4}),   # 32 x 4 = 128
    ((65, 16896, 4096), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4}),               # 264 tiles: one wave of 2 an SM
    ((65, 16904, 4096), "wgmma_ws", {"BN": 128, "CLUSTER_M": 1}),                   # 266: a second wave
    ((128, 18944, 3584), "wgmma_ws", {"BN": 128, "CLUSTER_M": 1}),
    ((64, 18944, 3584), "wgmma", {"BM": 64, "BN": 128, "STAGES": 4}),               # one band: no second wave
    ((129, 8320, 4096), "wgmma_ws", {}),
])
def test_the_tensor_rules_thresholds(shape, variant, params):
    name, overrides, why = tuning.tensor_rule(Shape(*shape), "bf16", 132)
    assert (name, overrides) == (variant, params)
    M, N = shape[:2]
    tiles = -(-M // 64) * -(-N // params.get("BN", 128))
    split = f", K in {params['SPLIT_K']} slices" if "SPLIT_K" in params else ""
    if params.get("BM") == 64:
        kind = "warp-specialised wgmma, " if name == "wgmma_ws" else ""
        assert why == f"{M} row(s) of C: {kind}64 x {params['BN']} tiles ({tiles} of them{split}), " \
                      f"B streamed {params['STAGES']} stages deep"
        # a 16-bit C takes the same tiles, K whole (split K adds into an FP32 C)
        whole = {k: v for k, v in params.items() if k not in ("SPLIT_K", "STAGED_STORE")}
        assert tuning.tensor_rule(Shape(*shape), "bf16", 132, out_dtype="bf16")[:2] == (name, whole)
    elif params:
        assert why.startswith(f"{M} rows of C: {tiles} tiles of 64 x 128 would make a second wave")
    else:
        assert why == "warp-specialised wgmma, 128 x 256 tiles, stream-K over the last wave"
    assert tuning.tensor_rule(Shape(*shape), "tf32", 132)[2] == "TMA and wgmma, 256 x 128 tiles"


@pytest.mark.parametrize("shape,params", [
    ((1, 4096, 4096), {"BM": 1, "ROWS": 16, "SPLIT_K": 128}),   # 4 tiles of 1024 columns: 512 blocks, 2 groups a slice
    ((1, 14336, 4096), {"BM": 1, "ROWS": 16, "SPLIT_K": 64}),   # 14 tiles: 896 blocks >= 4 an SM
    ((3, 4096, 4096), {"BM": 4, "ROWS": 16, "SPLIT_K": 128}),
    ((4, 28672, 8192), {"BM": 4, "ROWS": 16, "SPLIT_K": 32}),   # 28 tiles x 32 = 896
    ((1, 4096, 64), {"BM": 1, "ROWS": 16, "SPLIT_K": 2}),       # 64 rows: 2 slices of 2 groups of 16
    ((1, 16, 8), {"BM": 1, "ROWS": 16, "SPLIT_K": 1}),
])
def test_up_to_4_rows_of_c_take_gemv(shape, params):
    name, overrides, why = tuning.tensor_rule(Shape(*shape), "bf16", 132)
    tiles = -(-shape[1] // 1024)
    assert (name, overrides) == ("gemv", params)
    assert why == (f"{shape[0]} row(s) of C: a stream of B, {tiles} tile(s) of {params['BM']} x 1024, "
                   f"K in {params['SPLIT_K']} slice(s)")


@pytest.mark.parametrize("shape,split,width", [
    ((1, 9001, 4097), 64, 992),    # N odd: tiles of 992 columns (31 lanes a warp), 10 of them x 64 slices
    ((2, 12345, 3001), 64, 992),   # 13 tiles: 32 slices leave 416 blocks, under 4 an SM
    ((4, 5003, 8191), 128, 992),
    ((1, 8192, 4095), 64, 1024),   # N aligned, K odd: only A's rows shifted, warps of 256 columns; 512 blocks
    ((1, 2001, 9001), 128, 992),   # 3 tiles x 128: 384 blocks, 2 an SM or more
])
def test_up_to_4_rows_of_c_at_any_offset_take_gemv(shape, split, width):
    """Decode shapes with K or N not a multiple of 8 (issue 45) take gemv with ANY_OFFSET, not mma's 64-row
    tiles, where its blocks make 2 an SM or more (tuning.GEMV_ANY_OFFSET)."""
    M, N, _ = shape
    bm = {1: 1, 2: 2, 3: 4, 4: 4}[M]
    for dtype in ("bf16", "fp16"):
        name, overrides, why = tuning.tensor_rule(Shape(*shape), dtype, 132)
        assert (name, overrides) == ("gemv", {"BM": bm, "ROWS": 16, "SPLIT_K": split, "ANY_OFFSET": True})
        assert why == (f"{M} row(s) of C: a stream of B, {-(-N // width)} tile(s) of {bm} x {width}, K in {split} "
                       "slice(s), rows at any offset (K or N not a multiple of 8)")
    assert tuning.tensor_rule(Shape(*shape), "tf32", 132)[0] == "mma"                   # 16-bit inputs only
    name, overrides, _ = tuning.tensor_rule(Shape(*shape), "bf16", 132, out_dtype="bf16")  # gemv adds into an FP32 C
    assert name == "mma" and "SPLIT_K" not in overrides
    assert tuning.tensor_rule(Shape(5, *shape[1:]), "bf16", 132)[0] != "gemv"           # 5 rows: the tensor cores


@pytest.mark.parametrize("shape", [
    (3, 777, 20001),   # one tile x 128 slices: 128 blocks (48.9 us on gemv, cuBLAS 43.2)
    (3, 55, 826),      # one tile x 16: 18.7 us on gemv, cuBLAS 12.5
    (1, 2001, 2047),   # 3 tiles x 32 slices (of 2 groups of 16 rows at least): 96 blocks
    (4, 1000, 203),    # N aligned, K odd: one tile of 1024 x 4 slices
    (1, 13, 37),
])
def test_decode_shapes_at_any_offset_with_few_blocks_stay_on_mma(shape):
    assert tuning.tensor_rule(Shape(*shape), "bf16", 132) == tuning.mma_rule(Shape(*shape), 132)


@pytest.mark.parametrize("shape,split,why", [
    ((3079, 6638, 627), 1, "1300 tiles of 128 x 128"),           # ten waves of tiles: no split
    ((1000, 1201, 4097), 4, "80 tiles of 128 x 128, K in 4 slices"),  # 3 waves of 33 steps + 8 beat 1 of 129 + 4
    ((300, 1001, 96), 1, "24 tiles of 128 x 128"),               # 3 K steps: too short to split
    ((3000, 160, 9001), 8, "48 tiles of 128 x 128, K in 8 slices"),   # 3 waves of 36 steps; 16 make 6 of 18
    ((7000, 90, 1626), 2, "55 tiles of 128 x 128, K in 2 slices"),    # 1 wave of 26 steps; 4 make 2 of 13
    ((39, 36, 1657), 32, "1 tiles of 64 x 64, K in 32 slices"),       # small tiles: slices down to one step
    ((10, 72, 100001), 64, "2 tiles of 64 x 64, K in 64 slices"),     # at most 64 slices
    ((23, 60, 16265), 64, "1 tiles of 64 x 64, K in 64 slices"),      # 8 steps + 8, not 16 slices' 32 + 8
    ((4000, 1, 400), 8, "63 tiles of 64 x 64, K in 8 slices"),        # 504 blocks, one wave of 2 steps + 8
    ((2500, 7, 6000), 8, "40 tiles of 64 x 64, K in 8 slices"),       # 4 an SM: 320 blocks in one wave
    ((50, 1400, 250), 4, "22 tiles of 64 x 64, K in 4 slices"),       # 2 steps + 8 beat 8 + 4
    ((33, 20, 31), 1, "1 tiles of 64 x 64"),                          # one step: nothing to split
])
def test_unaligned_shapes_take_mma_with_k_split_where_it_ends_sooner(shape, split, why):
    """mma for TF32, and for the 16-bit types up to 128 rows of C or too few tiles for wgmma_ws (below):
    128 x 128 tiles of 8 warps (64 x 64 of 2 where M or N is 64 or less), K in the slices that make waves
    x (steps + MMA_BLOCK_STEPS) least."""
    small = min(shape[0], shape[1]) <= 64
    params = ({"BM": 64, "BN": 64, "WM": 32, "WN": 64} if small else {"BM": 128, "BN": 128, "WM": 32, "WN": 64}) \
        | ({"SPLIT_K": split} if split > 1 else {})
    assert tuning.mma_rule(Shape(*shape), 132) == ("mma", params, "K or N is not a multiple of 16 bytes: "
                                                   "cp.async (TMA cannot read the rows), " + why)
    few_columns = shape[1] <= tuning.GEMV_N_COLUMNS or small_c(shape)  # gemv_n's for bf16 and fp16 (below)
    for dtype in ("bf16", "fp16", "tf32") if (shape[0] <= 128 or shape[1] < 128) and not few_columns else ("tf32",):
        name, overrides, reason = tuning.tensor_rule(Shape(*shape), dtype, 132)
        assert (name, overrides) == ("mma", params)
        assert reason == "K or N is not a multiple of 16 bytes: cp.async (TMA cannot read the rows), " + why


def small_c(shape) -> bool:
    """Small unaligned C that tensor_rule sends to gemv_n for bf16 and fp16 (test below)."""
    M, N, K = shape
    return bool(K % 8 or N % 8) and N <= 48 and M * -(-N // 8) <= 5 * 132 and 512 <= K <= 8192 \
        and M * -(-N // 8) * K <= 800_000


@pytest.mark.parametrize("shape,takes", [
    ((40, 27, 1001), True),       # 160 blocks of 8 warps on one row and 8 columns
    ((3, 45, 2501), True),
    ((150, 30, 750), True),       # 600 blocks: 5 an SM at most
    ((100, 50, 750), False),      # 50 columns: mma in 16 slices
    ((120, 48, 750), False),      # 720 blocks
    ((110, 48, 750), True),       # 660
    ((40, 27, 511), False),       # K under 512
    ((5719, 9, 1053), False),     # rows enough for mma's tiles
    ((40, 32, 1000), False),      # aligned rows: wgmma
    ((120, 20, 2001), True),      # 360 blocks x K of 2001: 720 thousand
    ((150, 30, 1500), False),     # 900 thousand: mma splits K over blocks (benchmarks/h100-gemv-n-long-k/)
    ((68, 48, 14725), False),     # 6 million: 0.16x cuBLAS as gemv_n
    ((4, 28, 12526), False),      # 16 blocks, but each walks a K over 8192 alone
])
def test_small_unaligned_c_takes_gemv_n_with_k_over_the_warps(shape, takes):
    assert small_c(shape) == takes
    for dtype in ("bf16", "fp16"):
        name, overrides, why = tuning.tensor_rule(Shape(*shape), dtype, 132)
        assert ((name, overrides) == ("gemv_n", {"ROWS": 1, "KSPLIT": 8})) == takes, (name, overrides)
        if takes:
            assert why == (f"small C ({shape[0]} x {shape[1]}), K or N not a multiple of 16 bytes: a stream of A "
                           "for each 8 columns, K over the 8 warps of a block")
    assert tuning.tensor_rule(Shape(*shape), "tf32", 132)[0] != "gemv_n"                   # 16-bit inputs only
    assert tuning.tensor_rule(Shape(*shape), "bf16", 132, out_dtype="bf16")[0] != "gemv_n"  # it writes an FP32 C


def test_mma_split_weighs_waves_against_slice_depth():
    assert tuning.mma_split(48, 9001, 132) == 8     # 282 steps: 3 waves of 36 + 8 beat 1 of 141 + 8, 6 of 18 + 8
    assert tuning.mma_split(100, 9001, 132) == 1    # 1 wave of 282 + 4 beats 7 of 36 + 8 and 2 of 141 + 8
    assert tuning.mma_split(1, 96, 132) == 1        # 3 steps: a slice keeps 4 at least
    assert tuning.mma_split(1, 256, 132) == 1       # 8 steps: 2 slices of 4 + 8 end no sooner
    assert tuning.mma_split(1, 1024, 132) == 8      # 32 steps: 8 slices of 4 (16 would be 64 deep)
    assert tuning.mma_split(1, 10 ** 6, 132, most=16) == 16
    assert tuning.mma_split(132, 10 ** 6, 132) == 1  # a full wave: slices only add waves
    assert tuning.mma_split(1, 1001, 528, least=1, most=16) == 16  # 32 steps: 16 slices of 2 + 8 (small tiles)
    assert tuning.mma_split(2, 750, 528, least=1, most=16) == 16   # 24 steps: 16 slices of 46, one step and a half
    assert tuning.mma_split(1, 160, 528, least=1, most=16) == 1    # 5 steps: 4 slices of 2 + 8 end no sooner
    assert tuning.mma_split(1, 63, 528, least=1, most=16) == 1     # 2 slices would be under one step
    assert tuning.mma_rule(Shape(7000, 90, 1626), 132, split_ok=False)[1] == {"BM": 128, "BN": 128, "WM": 32, "WN": 64}  # a 16-bit C


@pytest.mark.parametrize("shape", [(129, 5001, 2048), (3079, 6638, 627), (1000, 1201, 4097), (2000, 1024, 7777),
                                   (4096, 4096, 4095), (1025, 1793, 128)])
def test_big_unaligned_shapes_take_wgmma_ws_on_aligned_copies(shape):
    for dtype in ("bf16", "fp16"):
        name, overrides, reason = tuning.tensor_rule(Shape(*shape), dtype, 132)
        assert (name, overrides) == ("wgmma_ws", {})
        assert reason.startswith("K or N is not a multiple of 16 bytes: A or B copied to aligned rows for TMA")
    assert tuning.tensor_rule(Shape(*shape), "tf32", 132)[0] == "mma"


@pytest.mark.parametrize("shape", [(128, 5001, 2048), (16381, 127, 15532), (633, 1249, 127), (250, 513, 1001),
                                   (242, 155, 7337), (3000, 160, 9001), (600, 1024, 7777), (1024, 999, 1001)])
def test_narrow_short_or_few_tiled_unaligned_shapes_take_mma(shape):
    """Each condition alone sends a shape to mma: 128 rows or fewer, N or K under 128, fewer than SMs / 4
    tiles of 128 x 256 (250 x 513 has 2 x 3 = 6, 3000 x 160 has 24, 1024 x 999 has 32 of the 33 asked)."""
    assert tuning.tensor_rule(Shape(*shape), "bf16", 132)[0] == "mma"


def test_keys():
    assert tuning.key(Shape(1, 2, 3)) == "1x2x3" and tuning.key(Shape(1, 2, 3), "tf32") == "1x2x3 tf32"
    assert tuning._parse("1x2x3") == ((1, 2, 3), "fp32") and tuning._parse("1x2x3 bf16") == ((1, 2, 3), "bf16")


def test_the_cache_file_is_sorted_and_indented(monkeypatch, tmp_path):
    """A file people read and diff: keys sorted, two spaces an indent."""
    tuning.save_best("GPU", Shape(8, 16, 32), {"variant": "tiled", "params": {"TILE": 16}, "ms": 2.0, "tflops": 3.0})
    data = json.loads(tuning.path().read_text())
    assert tuning.path().read_text() == json.dumps(data, indent=2, sort_keys=True)
    assert tuning.path().read_text().startswith('{\n  "GPU": {\n    "8x16x32": {\n      "date": ')


@pytest.mark.parametrize("shape,variant,params", [
    ((896, 4352, 4096), "spread", {}),  # 119 tiles of 128 x 256: 90.2% of 132 SMs' waves (89.5% of 133)
    ((385, 8192, 4096), "spread", {}),  # 4 rows of 128 x 256 tiles, the last of one row of C
    ((33, 3072, 3072), "pipelined", {"SPLIT_K": 16}),  # 33 rows: no longer skinny
    ((2, 3096, 4096), "skinny_async", {"BM": 2, "SPLIT_K": 16}),  # 25 blocks of 128 columns, the last of 24
])
def test_the_rule_for_132_sms_by_default(shape, variant, params):
    name, overrides, _ = tuning.rule(Shape(*shape))
    assert name == variant and all(overrides[k] == x for k, x in params.items())
    assert name != "spread" or overrides == {}


@pytest.mark.parametrize("shape,variant,split", [
    ((1024, 4097, 4096), "spread64", None),  # a 17th column of 128 x 256 tiles, nearly empty: 64 x 128 fills better
    ((65, 8192, 4096), "spread64", None),    # two rows of 64 x 128 tiles
    ((512, 2049, 4096), "pipelined", 4),     # 17 columns of 64 x 128 tiles: 136 of them
    ((65, 2048, 4096), "pipelined", 16),     # 2 x 16 tiles
    ((129, 1025, 4096), "pipelined", 16),    # 3 x 9 tiles
    ((1025, 3072, 4096), "pipelined", 1),    # 17 x 24 tiles: 3 an SM already, K whole
])
def test_a_partial_tile_counts_as_a_tile(shape, variant, split):
    name, overrides, _ = tuning.rule(Shape(*shape))
    assert ("spread64" if name == "spread" and overrides.get("BM") == 64 else name) == variant
    assert overrides.get("SPLIT_K") == split


def test_the_tensor_rule_for_132_sms_by_default():
    assert tuning.tensor_rule(Shape(64, 8448, 4096), "bf16")[1]["BN"] == 128  # 66 tiles of 128: half of 132


def test_choose_passes_on_the_sms_and_the_type():
    cat = gemmlab.catalog()
    assert tuning.choose(cat, "GPU", Shape(1152, 256, 4096), sms=10)[2] == "rule: 128 x 256 tiles fill 90% of the SMs' waves"
    assert tuning.choose(cat, "GPU", Shape(896, 4352, 4096))[1]["BM"] == 128  # 132 SMs unless told: spread's big tile
    tuning.save_best("GPU", Shape(256, 256, 256), {"variant": "mma", "params": {"BM": 128}, "ms": 1.0, "tflops": 1.0,
                                                   "dtype": "fp16"})
    v, params, how = tuning.choose(cat, "GPU", Shape(256, 256, 256), dtype="fp16")
    assert (v.name, params["BM"], params["DTYPE"]) == ("mma", 128, "fp16") and how.startswith("tuning cache")


def test_the_cache_file_name_and_other_types_skipped():
    from gemmlab.templates import data_dir
    assert tuning.path() == data_dir() / "tuning.json"
    s = Shape(1024, 1024, 1024)
    tuning.save_best("GPU", Shape(1000, 1024, 1024), {"variant": "mma", "params": {}, "ms": 1.0, "tflops": 1.0,
                                                       "dtype": "bf16"})
    tuning.save_best("GPU", s, {"variant": "tiled", "params": {}, "ms": 1.0, "tflops": 1.0})
    assert list(tuning.load()["GPU"]) == ["1000x1024x1024 bf16", "1024x1024x1024"]
    assert tuning.cached("GPU", s)[0]["variant"] == "tiled"  # past the bf16 entry, read before it
    v, params, _ = tuning.choose(gemmlab.catalog(), "GPU", Shape(128, 16896, 4096), sms=100, dtype="bf16")
    assert (v.name, params["BN"]) == ("wgmma_ws", 128)  # 264 tiles of 64 x 128: a second wave on 100 SMs


@pytest.mark.parametrize("shape,rows,ksplit", [
    ((1, 2, 403), 1, 8),        # one row, K of 256 or more: K over the block's 8 warps
    ((177, 1, 111), 1, 1),      # K under 256: one warp a row
    ((237, 3, 1915), 1, 8),     # 30 blocks of 8 rows would leave most SMs idle
    ((900, 5, 10000), 1, 8),    # 113 blocks: under 2 an SM, K long
    ((4000, 1, 400), 1, 1),     # 500 blocks: enough; 8 times as many split would cost more than they gain
    ((1000, 3, 500), 1, 1),     # 125 blocks but K too short for 4 steps of 256 a block
    ((5772, 2, 12358), 1, 1),   # A streamed one warp a row
    ((8000, 6, 3001), 2, 1),    # 4 columns or more and 500 blocks of 2 rows a warp: a chunk of B serves 2 rows
    ((4000, 6, 3001), 1, 1),    # 250 blocks of 2 rows a warp would be under 2 an SM
    ((1, 8, 4096), 1, 8),       # 8 aligned columns, a few rows: still gemv_n (gemv's tiles are 1024 wide)
    ((64, 8, 4096), 1, 8),
])
def test_up_to_8_columns_of_c_take_gemv_n(shape, rows, ksplit):
    for dtype in ("bf16", "fp16"):
        name, overrides, why = tuning.tensor_rule(Shape(*shape), dtype, 132)
        assert (name, overrides) == ("gemv_n", {"ROWS": rows, "KSPLIT": ksplit})
        assert why == (f"{shape[1]} column(s) of C: a stream of A, {rows} row(s) a warp"
                       + (", K over the 8 warps of a block" if ksplit > 1 else ""))
    assert tuning.tensor_rule(Shape(*shape), "tf32", 132)[0] != "gemv_n"   # 16-bit inputs only
    assert tuning.tensor_rule(Shape(*shape), "bf16", 132, out_dtype="bf16")[0] != "gemv_n"  # it writes an FP32 C


def test_eight_aligned_columns_and_many_rows_stay_on_the_tensor_cores():
    """With N = 8, K a multiple of 8 and more than 128 rows, gemv_n's 16 FMAs and conversions per element of A
    fell behind cuBLAS (16000 x 8 x 4000: 0.42x): the tensor-core rules keep those; unaligned ones and 9
    columns or more are not gemv_n's either."""
    assert tuning.tensor_rule(Shape(16000, 8, 4000), "bf16", 132)[0] == "wgmma_ws"
    assert tuning.tensor_rule(Shape(16000, 8, 4001), "bf16", 132)[0] == "gemv_n"
    assert tuning.tensor_rule(Shape(16000, 9, 4001), "bf16", 132)[0] == "mma"


@pytest.mark.parametrize("shape,variant", [
    ((576, 16314, 3), "pipelined"),     # short K, N % 4 == 2
    ((652, 16015, 7), "pipelined"),     # N odd
    ((3603, 770, 239), "pipelined"),
    ((1024, 4097, 4096), "spread"),     # 64 x 128 spread
])
def test_rows_at_any_alignment_stage_c_through_shared_memory(shape, variant):
    """N % 4 != 0 with K whole: auto's pipelined and spread write C through shared memory in whole sectors
    (STAGED_C); with N a multiple of 4 the same rule renders the kernel without it, as it was."""
    catalog = gemmlab.catalog()
    name, overrides, why = tuning.rule(Shape(*shape))
    assert name == variant and overrides["STAGED_C"] is True and why.endswith("C through shared memory (N % 4 != 0)")
    assert "store_staged<" in render(catalog.get(name), catalog.get(name).resolve(overrides)).source
    aligned = Shape(shape[0], shape[1] + (-shape[1]) % 4, shape[2])
    name, overrides, why = tuning.rule(aligned)
    params = catalog.get(name).resolve(overrides)
    assert name == variant and "STAGED_C" not in overrides and params["STAGED_C"] is False
    assert "store_staged<" not in render(catalog.get(name), params).source


@pytest.mark.parametrize("shape", [(1450, 129, 12454), (921, 1062, 623)])
def test_split_k_keeps_its_atomics_at_any_alignment(shape):
    """Split K's atomics through shared memory were no faster (921 x 1062 x 623 in 4 slices on an H100): none."""
    name, overrides, _ = tuning.rule(Shape(*shape))
    assert name == "pipelined" and overrides["SPLIT_K"] > 1 and "STAGED_C" not in overrides
