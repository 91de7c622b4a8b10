"""The tuning cache and `--variant auto`: the best configuration measured for a shape on this GPU,
else a rule from the shape.

`gemmlab sweep --save-best` writes the winner of a sweep here (JSON in the user's data directory,
`tuning.json`, keyed by GPU name, then shape); gemmlab also ships the winners of its own H100 sweeps
(kernels/tuning.json). `auto` takes the entry of the same shape, else of the nearest shape measured
(distance in log2 of M, N and K, at most 0.5 in each), else the rule. Entries are per input type: an
FP32 entry is keyed by the shape ("4096x4096x4096"), another type's by shape and type ("... bf16").
Nothing here needs a GPU.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path

from ..errors import GemmlabError
from ..files import write_atomic
from ..limits import DEFAULTS
from ..templates import builtin_dir, data_dir

# A cached shape within a factor of 1.41 in each of M, N and K counts as near. A factor of 2 let 512^3
# take 256x256x1024's splitk winner: 7.8 TFLOP/s where the rule's choice gives 12.7
# (docs/journal.md, "Any shape").
NEAR = 0.5


def path() -> Path:
    if os.environ.get("GEMMLAB_TUNING"):
        return Path(os.environ["GEMMLAB_TUNING"])
    return data_dir() / "tuning.json"


def _read(p: Path) -> dict:
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except (OSError, ValueError) as e:
        raise GemmlabError(f"the tuning cache {p} cannot be read: {e}",
                           hint="move it away (a sweep with --save-best starts a new one)") from None


def load() -> dict:
    """The user's cache (what --save-best wrote)."""
    return _read(path())


def shipped() -> dict:
    """The winners of the sweeps gemmlab's authors ran on an H100 (docs/journal.md), shipped beside the
    templates: a fresh install on the same GPU starts from measured choices."""
    return _read(builtin_dir() / "tuning.json")


def key(shape, dtype: str = "fp32") -> str:
    """The cache's key of a shape and input type."""
    return f"{shape.M}x{shape.N}x{shape.K}" + ("" if dtype == "fp32" else f" {dtype}")


def _parse(k: str) -> tuple[tuple[int, int, int], str]:
    shape, _, dtype = k.partition(" ")
    return tuple(int(x) for x in shape.split("x")), dtype or "fp32"


def save_best(device: str, shape, row: dict) -> dict | None:
    """Record `row` (a passing result) as the best for this device, shape and input type, if it beats what
    is there. Returns None when it was recorded, else the faster entry that was kept."""
    data = load()
    key_ = key(shape, row.get("dtype", "fp32"))
    entries = data.setdefault(device, {})
    old = entries.get(key_) or shipped().get(device, {}).get(key_)  # only a better one is worth keeping
    if old and old["ms"] <= row["ms"]:
        return old
    entries[key_] = {"variant": row["variant"], "params": row["params"], "ms": row["ms"], "tflops": row["tflops"],
                    "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    path().parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path(), json.dumps(data, indent=2, sort_keys=True))
    return None


def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return max(abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b))


def cached(device: str, shape, dtype: str = "fp32") -> tuple[dict, str] | None:
    """(entry, the key it was measured at) for the nearest cached shape of this input type, or None."""
    entries = {**shipped().get(device, {}), **load().get(device, {})}  # the user's own sweeps win
    want = (shape.M, shape.N, shape.K)
    best = None
    for k, entry in entries.items():
        got, got_dtype = _parse(k)
        if got_dtype != dtype:
            continue
        d = _distance(want, got)
        if d <= NEAR and (best is None or d < best[0]):
            best = (d, entry, k)
    return (best[1], best[2]) if best else None


# pipelined's 64 x 128 tile: the best medium tile in its sweeps at 1024^3 and 3072^3 (docs/journal.md).
MEDIUM = {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8}
# spread takes it with BK=32 in three buffers, so that three blocks share an SM (H100, interleaved with
# cuBLAS: 1.09x at 3072^3, 1.13x at 1024^3; BK=64 in two: 0.99x at 3072^3; docs/journal.md)
SPREAD_MEDIUM = dict(MEDIUM, BK=32, STAGES=3)


def wave_efficiency(tiles: int, sms: int) -> float:
    """The share of the last wave's SM slots that have work: 288 tiles on 132 SMs make 3 waves, the
    last one 24/132 full, so 288 / (3 * 132) = 0.73 of the time the SMs are busy."""
    return tiles / (math.ceil(tiles / sms) * sms)


# pipelined's 64 x 64 tile (4 warps of 32 x 32): half the columns of MEDIUM, for a narrow N or few tiles.
SMALL = {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TM": 8, "TN": 4}
# Split K for few tiles: slices until the blocks fill SPLIT_SLOTS blocks an SM (SMALL's tile; 3 for MEDIUM's,
# which take more registers), each slice at least 2 x SPLIT_LEAST rows of K before it halves. On the tuning
# shapes of benchmarks/anyshape-fp32-tuning.toml (H100): 250 x 700 x 900 (44 tiles of 64 x 64) ran 18.1 us in
# 8 slices, 22.3 in 4, where the old rule's floor of 128 rows a slice gave 4 slices of 64 x 128 tiles, 23.9;
# 200 x 40 x 600 8.9 us in 16 slices of 38 rows, 13.5 in 4 (cuBLAS 12.6); 4000 x 20 x 5000 (63 tiles) 85.8 us in
# 16, 96.1 in 4, 150 for the old rule.
SPLIT_SLOTS, SPLIT_LEAST = 4, 32
# K this short leaves spread's 32- and 64-deep K steps mostly padding, and a tile's pipeline never fills:
# pipelined's 8-deep steps take it (6000 x 5000 x 3: 43 us against spread's 94 and cuBLAS's 56; 5000 x 2000 x
# 100: 65 against 80 and 67; 2500 x 6000 x 200: 168 against 232 for spread's 128 x 256 tile and 155).
SHORT_K = 256
# gemv_n_fp32 (a stream of A) for up to 8 columns of C; with K over a block's 8 warps where one warp a row
# leaves fewer than 2 blocks an SM and K has 256 or more (2000 x 3 x 6000: 27.8 us split, 35.8 whole, cuBLAS
# 47.1; 600 x 2 x 9000 17.8 against 40.8; 20000 x 1 x 1000, 2500 blocks, 39.1 whole, 61.1 split), and for
# small C of up to 16 columns and K of 512 or more (150 x 12 x 1200: 8.1 us against 10.5 for 64 x 64 tiles in
# 16 slices; with 30 or 40 columns the tiles won: 80 x 30 x 2000 12.5 against 14.5).
GEMV_N_FP32_COLUMNS, GEMV_N_FP32_SMALL_COLUMNS, GEMV_N_FP32_SMALL_BLOCKS_PER_SM = 8, 16, 3


def gemv_n_fp32_rule(shape, sms: int) -> tuple[str, dict, str] | None:
    """gemv_n_fp32 for up to GEMV_N_FP32_COLUMNS columns of C (K over the warps where rows are few), and for
    small C of up to GEMV_N_FP32_SMALL_COLUMNS with rows x groups of 8 columns at most 3 blocks an SM and K of
    512 or more; else None."""
    M, N, K = shape.M, shape.N, shape.K
    if N <= GEMV_N_FP32_COLUMNS:
        ksplit = 8 if math.ceil(M / 8) < 2 * sms and K >= 256 else 1
    elif N <= GEMV_N_FP32_SMALL_COLUMNS and M * math.ceil(N / 8) <= GEMV_N_FP32_SMALL_BLOCKS_PER_SM * sms \
            and K >= 512:
        ksplit = 8
    else:
        return None
    return ("gemv_n_fp32", {"KSPLIT": ksplit}, f"{N} column(s) of C: a stream of A, one warp a row"
            + (", K over the 8 warps of a block" if ksplit > 1 else ""))


# N % 4 != 0: rows of C at every alignment, where pipelined's and spread's groups of 4 sums write 2 or 3 partial
# pieces of every sector; STAGED_C writes C through shared memory in whole sectors instead (kernels/lib/store.j2).
# H100, d6e7c0f, 3 rounds: 576 x 16314 x 3 27.1 -> 21.9 us (cuBLAS 21.5); N = 16316 19.5. Only with K whole: split
# K's atomics gained nothing (921 x 1062 x 623 in 4 slices 53.5 -> 54.6 us), so they keep add4's pieces. Aligned N
# keeps the kernels as they were (docs/journal.md, "FP32 stores at any alignment").
STAGED = {"STAGED_C": True}


def rule(shape, sms: int = 132) -> tuple[str, dict, str]:
    """The FP32 rule (_rule), with C through shared memory (STAGED_C) in pipelined and spread where N % 4 != 0
    and K is not split."""
    name, overrides, why = _rule(shape, sms)
    if name in ("pipelined", "spread") and shape.N % 4 and overrides.get("SPLIT_K", 1) == 1:
        return name, dict(overrides, **STAGED), why + "; C through shared memory (N % 4 != 0)"
    return name, overrides, why


def _rule(shape, sms: int = 132) -> tuple[str, dict, str]:
    """(variant, parameter overrides, why) from the shape alone: for C of up to 32 rows skinny_narrow or
    skinny_async (skinny_rule); for up to 8 columns (and small C of up to 16) gemv_n_fp32, a stream of A;
    with K of SHORT_K or more, spread's 128 x 256 tile where its blocks fill the SMs' waves, its 64 x 128
    tile where they fill them better, 90% of them or 60% with 2 an SM or more (with 165 tiles, 900 x 1300 x
    700, spread made 0.78x cuBLAS, pipelined in 4 slices 1.01x); else pipelined, with 64 x 128 tiles
    where there are as many as SMs and N is over 64, else 64 x 64 tiles, K split until the blocks fill
    the SMs (docs/journal.md, "Any shape")."""
    M, N, K = shape.M, shape.N, shape.K
    if M <= 32:
        return skinny_rule(shape, sms)
    columns = gemv_n_fp32_rule(shape, sms)
    if columns:
        return columns
    big = wave_efficiency(math.ceil(M / 128) * math.ceil(N / 256), sms)
    medium_tiles = math.ceil(M / 64) * math.ceil(N / 128)
    medium = wave_efficiency(medium_tiles, sms)
    if K >= SHORT_K:
        if big >= 0.9:
            return "spread", {}, f"128 x 256 tiles fill {big:.0%} of the SMs' waves"
        if medium > big and (medium >= 0.9 or medium >= 0.6 and medium_tiles >= 2 * sms):
            return ("spread", dict(SPREAD_MEDIUM),
                    f"64 x 128 tiles fill {medium:.0%} of the SMs' waves (128 x 256: {big:.0%})")
    wide = N > 64 and medium_tiles >= sms
    tile, per_sm = (MEDIUM, 3) if wide else (SMALL, SPLIT_SLOTS)
    tiles = math.ceil(M / tile["BM"]) * math.ceil(N / tile["BN"])
    split = 1
    while split < 64 and tiles * split < per_sm * sms and K // (2 * split) >= SPLIT_LEAST:
        split *= 2
    what = "short K" if K < SHORT_K and tiles >= sms else "small or skinny C"
    return ("pipelined", dict(tile, SPLIT_K=split),
            f"{what} ({tiles} tiles of {tile['BM']} x {tile['BN']}): K split {split} ways, so that every SM gets work")


def skinny_rule(shape, sms: int) -> tuple[str, dict, str]:
    """For one row of C with N wide enough for a band of 32 columns per half SM: skinny_narrow at its
    defaults (K whole, no zeroing of C: the winner at 1 x 3072 x 3072). Otherwise skinny_async for M <=
    32: BM rounded up from M, at most 16 (more rows take more 16-row blocks, which read B again from
    L2), and K split until there are about 6 blocks of 2 warps an SM. This reproduces the winners at 16
    and 32 x 3072 x 3072 (SPLIT_K 32 and 16; docs/journal.md)."""
    bands = math.ceil(shape.N / 32)
    if shape.M == 1 and 2 * bands >= sms:
        return ("skinny_narrow", {}, f"one row of C: {bands} bands of 32 columns, each over all of K (no split)")
    bm = next(b for b in (1, 2, 4, 8, 16) if b >= min(shape.M, 16))
    blocks = math.ceil(shape.N / 128) * math.ceil(shape.M / bm)
    split = 1  # while each of the SPLIT_K x 2 warps' slices keeps at least 2 stages of 8 rows
    while split < 64 and blocks * split * 2 <= 6 * sms and shape.K // (2 * split * 2) >= 16:
        split *= 2
    return ("skinny_async", {"BM": bm, "SPLIT_K": split},
            f"{shape.M} row(s) of C: a stream of B, {blocks} block(s) of {bm} x 128, K in {split} slice(s)")


# Rows of A and B that TMA can read start 16-byte aligned: K and N multiples of 16 bytes' elements.
TMA_ELEMENTS = {"tf32": 4, "fp16": 8, "bf16": 8, "e4m3": 16, "e5m2": 16}


def split_k(blocks: int, K: int, step: int, most: int, slots: int) -> int:
    """Slices of K (a power of 2) until `blocks` C tiles fill `slots` block slots of the GPU, each slice
    keeping at least 4 K steps of `step` (and at most `most` slices)."""
    split = 1
    while split < most and blocks * split * 2 <= slots and K // (step * split * 2) >= 4:
        split *= 2
    return split


# mma's tile for a shape TMA cannot read: 128 x 128 in 8 warps of 32 x 64. On the sweeps of two unaligned
# shapes (3000 x 160 x 9001 and 7000 x 90 x 1626, H100, benchmarks/anyshape-bf16-tuning.toml) it beat 4
# warps of 64 x 64 and the 64-wide tiles at every K split; a tile as wide as a narrow N reads A once.
MMA_TILE = {"BM": 128, "BN": 128, "WM": 32, "WN": 64}
# Where M or N is 64 or less, half of that tile (and of its warps) would compute past C's edge: 64 x 64
# tiles of 2 warps, several blocks an SM (4 with the staging words of odd rows). On 300 x 10 x 1500,
# 2500 x 7 x 6000, 4000 x 1 x 400 and 50 x 1400 x 250 they ran 1.1-1.3x faster than 128 x 128 tiles.
MMA_SMALL_TILE, MMA_SMALL_PER_SM = {"BM": 64, "BN": 64, "WM": 32, "WN": 64}, 4
# What a block costs besides its K steps, in K steps: the pipeline's start and C's stores; with K split, as
# much again for slice 0's zeros and the atomic adds of every slice into C.
MMA_BLOCK_STEPS, MMA_SPLIT_STEPS = 4, 4


# The small tile's slices may be as short as one K step (others: 4), up to 64 of them. On the
# small C of benchmarks/small-c-bf16-tuning.toml (H100, 1 to 16 tiles of 64 x 64, 750 to 4001 deep) a step
# of these tiles took 0.5-1.1 us (the copies' latency, not the tensor cores) and the split about 3 steps
# more, so thinner slices kept paying: 40 x 27 x 1001 (32 steps) 41.0 us whole and 28.1 in 2 slices
# (first run), 18.0 in 4, 12.8 in 8, 10.7 in 16 (cuBLAS 10.9); 100 x 50 x 750 20.1 whole, 13.1 in 4 (the
# floor of 4 steps a slice), 10.5 in 16 (cuBLAS 9.5); 16 slices were the fastest measured on all 11 shapes
# tried with 4, 8 and 16 (32 and 64 were not measured there). Capped at 16, 23 x 60 x 16265 ran 16 slices
# of 32 steps in 37.3 us against cuBLAS's 18.3 (benchmarks/h100-random-bf16-small-c-rule.json), where 64
# slices of 8 steps come out at 8 + 8 steps in this model, not 32 + 8.
MMA_SMALL_LEAST_STEPS, MMA_SMALL_MOST_SLICES = 1, 64


def mma_split(tiles: int, K: int, slots: int, step: int = 32, most: int = 64, least: int = 4) -> int:
    """Slices of K (a power of 2) for `tiles` C tiles on `slots` block slots: the fewest slices that bring
    the time, waves of blocks times the K steps of one slice plus MMA_BLOCK_STEPS (and MMA_SPLIT_STEPS
    once split), to its least; each slice at least `least` K steps of `step`. 48 tiles and 282 steps on
    132 slots: 8 slices (3 waves of 36 steps, where 16 make 6 of 18); 55 tiles and 51 steps: 2 (one wave
    of 26, where 4 make two of 13)."""
    steps = math.ceil(K / step)
    best, best_time, split = 1, None, 1
    while split <= most and (split == 1 or K // split >= least * step):
        time = math.ceil(tiles * split / slots) * (math.ceil(steps / split) + MMA_BLOCK_STEPS
                                                   + (MMA_SPLIT_STEPS if split > 1 else 0))
        if best_time is None or time < best_time:
            best, best_time = split, time
        split *= 2
    return best


def mma_rule(shape, sms: int, split_ok: bool = True) -> tuple[str, dict, str]:
    """mma for K or N not a multiple of 16 bytes: MMA_TILE, one block an SM (8 warps of 165 registers), or
    MMA_SMALL_TILE where M or N is 64 or less, with K split where that ends sooner (mma_split; the small
    tile's slices down to one K step), unless not `split_ok` (a 16-bit C, which split K's FP32 atomics
    cannot add into)."""
    M, N, K = shape.M, shape.N, shape.K
    small = min(M, N) <= 64
    tile, slots = (MMA_SMALL_TILE, MMA_SMALL_PER_SM * sms) if small else (MMA_TILE, sms)
    tiles = math.ceil(M / tile["BM"]) * math.ceil(N / tile["BN"])
    least, most = (MMA_SMALL_LEAST_STEPS, MMA_SMALL_MOST_SLICES) if small else (4, 64)
    split = mma_split(tiles, K, slots, most=most, least=least) if split_ok else 1
    params = dict(tile)
    if split > 1:
        params["SPLIT_K"] = split
    return ("mma", params, f"K or N is not a multiple of 16 bytes: cp.async (TMA cannot read the rows), "
            f"{tiles} tiles of {tile['BM']} x {tile['BN']}" + (f", K in {split} slices" if split > 1 else ""))


def gemv_tiles(N: int) -> tuple[int, int]:
    """gemv's tiles of C's columns: (how many, how wide): 1024 columns a block of 4 warps, 992 where N is
    not a multiple of 8 (a warp's lane 31 then only lends its chunk to lane 30)."""
    width = 992 if N % 8 else 1024
    return math.ceil(N / width), width


def gemv_rule(shape, sms: int) -> tuple[str, dict, str]:
    """gemv for up to 4 rows of C: BM the rows of C rounded up to a power of 2 (B is read once), 16 rows of
    B in flight per lane, and K split until there are 4 blocks of 4 warps an SM, each slice at least 2
    groups of rows. Rows of A or B that do not start 16-byte aligned (K or N not a multiple of 8) take
    ANY_OFFSET, with tiles of 992 columns where N is not (a warp's lane 31 only lends its chunk). From
    about 8 rows on, gemv's FMAs on the CUDA cores, 2 x BM per element of B, cannot keep up with memory
    (16 rows: 0.4x cuBLAS on the llm suite), so the tensor cores take over."""
    M, N, K = shape.M, shape.N, shape.K
    bm = next(b for b in (1, 2, 4, 8, 16) if b >= M)
    rows = 16
    tiles, width = gemv_tiles(N)
    split = 1
    while split < 128 and tiles * split < 4 * sms and K // (rows * split * 2) >= 2:
        split *= 2
    params = {"BM": bm, "ROWS": rows, "SPLIT_K": split}
    unaligned = bool(N % 8 or K % 8)
    if unaligned:
        params["ANY_OFFSET"] = True
    return ("gemv", params, f"{M} row(s) of C: a stream of B, {tiles} tile(s) of {bm} x {width}, K in {split} slice(s)"
            + (", rows at any offset (K or N not a multiple of 8)" if unaligned else ""))


# gemv_n takes C of up to 8 columns: a stream of A, each row's dot products on the CUDA cores.
GEMV_N_COLUMNS = 8
# ... and small unaligned C of up to 48 columns (6 groups of 8, each a pass over A) with rows x groups of at
# most 5 blocks an SM and K of 512 or more, with K over a block's 8 warps: one launch, no zeros, no atomics,
# where mma's 64 x 64 tiles wait on their copies' latency at every K step. On
# benchmarks/small-c-bf16-tuning.toml (H100, us: gemv_n / mma at its fastest measured split / cuBLAS):
# 40 x 27 x 1001 7.3 / 10.7 / 10.9; 60 x 20 x 3001 10.7 / 14.2 / 13.5; 3 x 45 x 2501 10.2 / 13.3 / 14.7;
# 100 x 30 x 750 (400 blocks) 8.2 / 10.7 / 9.5; 150 x 30 x 750 (600) 9.5 / 10.7 / 9.8. Past that mma won
# or tied: 100 x 50 x 750 (700) 10.7 / 10.5, 150 x 50 x 750 (1050) 12.1 / 10.5, 30 x 120 x 1201 13.1 /
# 11.3, 400 x 40 x 1500 29.3 / 11.2; and with few blocks and long K, 2 x 64 x 4001 (16) 21.5 / 14.8.
# Each block walks all of K over its 8 columns of B, so the launch's work is blocks x K: the wins above
# are at most 540 thousand (60 x 3 x 3001); at 68 x 48 x 14725 (6 million) gemv_n took 114 us against
# cuBLAS's 18 (random BF16 draw, 2026-11-27), where mma splits K over blocks instead. On ten long-K
# shapes (benchmarks/h100-gemv-n-long-k/) gemv_n won up to 720 thousand and lost from 900 thousand on;
# judged on 14 shapes of the region drawn at run time, one more lost with few blocks and a long K
# (4 x 28 x 12526: 0.48x), as 10 x 17 x 30001 had (0.41x, mma 0.88x): each block walks all of K alone.
GEMV_N_SMALL_COLUMNS, GEMV_N_SMALL_BLOCKS_PER_SM, GEMV_N_SMALL_LEAST_K = 48, 5, 512
GEMV_N_SMALL_MOST_WORK, GEMV_N_SMALL_MOST_K = 800_000, 8192  # blocks x K; K (wins up to 5947)


def gemv_n_rule(shape, sms: int) -> tuple[str, dict, str]:
    """gemv_n for up to GEMV_N_COLUMNS columns of C, any K: one warp a row of A (two from 4 columns on, where
    a chunk of B then serves two rows, when there are rows enough for 2 blocks an SM), and K split over the
    8 warps of a block where one warp a row would leave the SMs with fewer than 2 blocks each and K has
    1024 elements or more (4 steps of 256), or where M is at most 2 blocks an SM anyway and K has 256 or
    more. On benchmarks/few-columns-bf16-tuning.toml (H100): 40 x 4 x 16000 in 9.5 us with K split, 41 without;
    with many short rows the split's 8 times as many blocks cost more than they gain (4000 x 1 x 400: 7.9
    us whole, 20 split)."""
    M, N, K = shape.M, shape.N, shape.K
    rows = 2 if N >= 4 and math.ceil(M / 16) >= 2 * sms else 1
    few = math.ceil(M / (8 * rows)) < 2 * sms and K >= 1024 or M <= 2 * sms and K >= 256
    ksplit = 8 if few and rows == 1 else 1
    params = {"ROWS": rows, "KSPLIT": ksplit}
    return ("gemv_n", params, f"{N} column(s) of C: a stream of A, {rows} row(s) a warp"
            + (", K over the 8 warps of a block" if ksplit > 1 else ""))


# GEMV_ANY_OFFSET: up to 4 rows of C with K or N not a multiple of 8 (issue 45) take gemv with ANY_OFFSET,
# as aligned ones take gemv: a stream of B. Before, they took mma's 64 x 64 tiles, which compute 64 rows
# to use M of them: on the random BF16 draw at d1624f3 (H100) 1 x 14003 x 8075 ran 231 us there against
# cuBLAS's 131 (0.57x), where B's 226 MB take about 75 us at the copy's bandwidth. Small C of up to 48
# columns and K of 512 or more stays on gemv_n (above), a 16-bit C on mma without split K.
# Measured at dc6a2be (H100, benchmarks/h100-unaligned-decode-bf16-tuning.json, us, gemv / cuBLAS):
# 1 x 9001 x 4097 43.8 / 42.4 (640 blocks: 10 tiles of 992 columns x 64 slices), 2 x 12345 x 3001 49.4 /
# 75.8 (832), 4 x 5003 x 8191 75.7 / 137.6 (768), 1 x 8192 x 4095 33.7 / 39.9 (512; only A's rows shifted,
# 2.0 TB/s, as aligned gemv streams B at that size). But with one tile of C the slices cannot fill the SMs
# (at most 128 blocks of 4 warps) and each block waits on its rows group after group: 3 x 777 x 20001,
# 128 blocks, 48.9 / 43.2, and on that commit's random draw 3 x 55 x 826, 16 blocks, 18.7 / 12.5 (0.67x),
# where mma's small tiles in 32 or 64 slices had run narrow decode shapes at 1.2-1.7x on earlier draws
# (2 x 74 x 8315, 3 x 228 x 9609, 3 x 400 x 8575; 1 x 721 x 2432 in 16 slices 0.85x). So gemv takes them
# where its blocks make at least 2 an SM (264 on an H100), mma the others as before: neither was measured
# between 128 and 512 blocks, nor mma on those two shapes.
GEMV_ANY_OFFSET_BLOCKS_PER_SM = 2


# Decode on the tensor cores (5 to 128 rows of C, rows TMA can read): 64-row tiles, K split so that the
# blocks stream all of B at once. Tuned on projections of Qwen2-7B, Mistral-Nemo, Llama-2-13B and CodeLlama-34B
# (none of Llama-3's, which judge the rule) at 16 to 128 rows, beside cuBLAS:
# - A B of more than 64 MB (H100, 1f5aa88, benchmarks/h100-decode-bf16-tuning.txt): wgmma's 64 x 128 tiles
#   with 4 stages, 2 blocks an SM (4 stages beat 6 nearly everywhere), and K split only until the tiles of
#   each 64-row band make half an SM's worth of blocks or more (split_k with one slot an SM and band):
#   slices cost their zeros and atomic adds, and more blocks bought nothing once B streamed from every SM
#   (16 x 3584 x 18944: 28 tiles in 4 slices 60.9 us, in 8 63.6, 64 x 64 tiles 63.7; cuBLAS 62.4). With more
#   than 64 rows, a second wave of 64 x 128 tiles (more than 2 an SM) cost up to 14% (128 x 18944 x 3584:
#   296 tiles 82.7 us); there wgmma_ws's 128 x 128 tiles with stream-K over the last wave take it (72.6;
#   its default 128 x 256 tiles in clusters of 2: 85.2; cuBLAS 61.1).
# - A B of 64 MB or less, where the whole product takes 15 to 30 us (H100, 59eea3f, 4 shapes at each of 16,
#   64 and 128 rows, 24 configurations each, benchmarks/h100-decode-ws-bf16-tuning.json by
#   benchmarks/decode-ws-sweep.py): wgmma_ws with 64-row tiles (one consumer warpgroup beside the TMA
#   producer) and a deep ring of copies, one block an SM, K split only while the blocks stay in one wave.
#   Geomean against cuBLAS at the split this rule takes (wgmma's 64-row tiles, the rule before, in
#   brackets): 16 rows 64 x 128 tiles and 6 stages 0.952x (0.902x); 64 rows 64 x 64 tiles and 10 stages
#   1.009x (0.865x); 128 rows 64 x 128 tiles and 8 stages 0.978x (0.816x). A second wave of blocks cost
#   10-25% (16 x 4608 x 3584 in 4 slices: 144 blocks, 0.76x; 64 x 5120 x 4096 in 2: 160 blocks, 0.76x).
WGMMA_DECODE_STAGES, WGMMA_DECODE_SMALL_B = 4, 64 << 20
WS_DECODE_TILES = ((32, 128, 6), (64, 64, 10), (128, 128, 8))  # (most rows, BN, STAGES) for a small B


def wgmma_decode_rule(shape, sms: int, smem_per_sm: int, split_ok: bool = True) -> tuple[str, dict, str]:
    """5 to 128 rows of C (the constants above): for a B of at most WGMMA_DECODE_SMALL_B bytes, wgmma_ws's
    64-row tiles (WS_DECODE_TILES), K split while the blocks stay within one an SM; for a larger B wgmma's
    64 x 128 tiles, K split until the tiles of a 64-row band reach half the SMs, or wgmma_ws with stream-K
    where more than 64 rows make a second wave of them. No split for a 16-bit C (not `split_ok`)."""
    M, N, K = shape.M, shape.N, shape.K
    bands = math.ceil(M / 64)
    if N * K * 2 <= WGMMA_DECODE_SMALL_B:
        bn, stages = next((bn, st) for rows, bn, st in WS_DECODE_TILES if M <= rows)
        tiles = bands * math.ceil(N / bn)
        split = split_k(tiles, K, 64, 32, sms) if split_ok else 1
        params = {"BM": 64, "BN": bn, "STAGES": stages, "CLUSTER_M": 1, "STREAM_K": False, "GPC_ORDER": False}
        if split > 1:  # the slices add into C with atomics, not through the staged store
            params.update(SPLIT_K=split, STAGED_STORE=False)
        slices = f", K in {split} slices" if split > 1 else ""
        return ("wgmma_ws", params, f"{M} row(s) of C: warp-specialised wgmma, 64 x {bn} tiles ({tiles} of them"
                f"{slices}), B streamed {stages} stages deep")
    tiles = bands * math.ceil(N / 128)
    # blocks an SM holds: wgmma's launch.smem at BM 64 (STAGES * (BM + BN) * 64 * 2 + 1024), 1 KB the system keeps
    per_sm = smem_per_sm // (WGMMA_DECODE_STAGES * (64 + 128) * 128 + 2048)
    if bands > 1 and tiles > per_sm * sms:
        return ("wgmma_ws", {"BN": 128, "CLUSTER_M": 1},
                f"{M} rows of C: {tiles} tiles of 64 x 128 would make a second wave: warp-specialised wgmma, "
                "128 x 128 tiles, stream-K over the last wave")
    split = split_k(tiles, K, 64, 32, bands * sms) if split_ok else 1
    params = {"BM": 64, "BN": 128, "STAGES": WGMMA_DECODE_STAGES}
    if split > 1:
        params["SPLIT_K"] = split
    slices = f", K in {split} slices" if split > 1 else ""
    return ("wgmma", params, f"{M} row(s) of C: 64 x 128 tiles ({tiles} of them{slices}), "
            f"B streamed {WGMMA_DECODE_STAGES} stages deep")


def tensor_rule(shape, dtype: str, sms: int = 132, smem_per_sm: int = DEFAULTS["sm_90"].SMEM_PER_SM,
                out_dtype: str = "fp32") -> tuple[str, dict, str]:
    """(variant, parameter overrides, why) for the tensor-core types. Where TMA cannot read the rows (K or
    N not a multiple of 16 bytes), FP16 and BF16 with more than 128 rows, N and K of 128 or more and
    at least SMs / 4 tiles of 128 x 256 take wgmma_ws on copies of A or B with aligned rows (on 13 such shapes
    0.5-3.7x cuBLAS, whose own kernels for them are slow, where mma made 0.3-1.0x:
    benchmarks/h100-unaligned-tuning-bf16.json; narrower, shorter or fewer tiles lost to cuBLAS by up to
    7x on the random shapes of benchmarks/h100-random-bf16-unaligned-rule.json); the others, and TF32,
    take mma (mma_rule), whose cp.async copies fall back to narrower ones at an unaligned row; TF32
    otherwise wgmma_tf32. Small unaligned FP16 and BF16 C of up to 48 columns and K of 512 or more takes
    gemv_n with K over a block's warps (GEMV_N_SMALL_*). FP16 and BF16 with up to 4 rows of C (decode: a stream of
    B) take gemv (gemv_rule), with rows at any offset too where its blocks fill the SMs (GEMV_ANY_OFFSET);
    with up to 128, 64-row tiles (wgmma_decode_rule: wgmma_ws's for a B of up to 64 MB, wgmma's above),
    tuned on other models' projections than Llama-3's, which judge them. The rest go to wgmma_ws (128 x 256
    tiles, stream-K over the last wave).
    A 16-bit C (`out_dtype`) takes neither gemv nor split K, which add partial sums into an FP32 C."""
    M, N, K = shape.M, shape.N, shape.K
    if dtype in ("e4m3", "e5m2"):  # one FP8 rung, not tuned per shape yet (docs/fp8.md)
        return "wgmma_ws_fp8", {}, "FP8: the one FP8 rung, warp-specialised wgmma with promotion every 128 of K"
    step, split_ok = TMA_ELEMENTS[dtype], out_dtype == "fp32"
    # gemv_n for a few columns, except with 8 aligned ones and many rows, where its CUDA cores' 16 FMAs and
    # conversions per element of A fall behind (16000 x 8 x 4000: 144 us, cuBLAS 61) and the tensor cores keep up
    aligned8 = N % step == 0 and K % step == 0 and M > 128
    if N <= GEMV_N_COLUMNS and dtype in ("fp16", "bf16") and out_dtype == "fp32" and not aligned8:
        return gemv_n_rule(shape, sms)
    if K % step or N % step:
        # wgmma_ws's 128 x 256 tiles and 64-deep K steps, behind a copy of A or B: worth it where the tiles are
        # mostly full and fill a quarter of the SMs at least; a narrow N or short K leaves most of each tile
        # idle and the copy a large part of the time, and with fewer tiles mma splitting K ends sooner
        # (3000 x 160 x 9001, 24 tiles: wgmma_ws 0.56x cuBLAS, mma in 8 slices 1.07x)
        big = M > 128 and N >= 128 and K >= 128 and 4 * math.ceil(M / 128) * math.ceil(N / 256) >= sms
        if not big and dtype in ("fp16", "bf16") and split_ok and N <= GEMV_N_SMALL_COLUMNS \
                and M * math.ceil(N / 8) <= GEMV_N_SMALL_BLOCKS_PER_SM * sms and K >= GEMV_N_SMALL_LEAST_K \
                and K <= GEMV_N_SMALL_MOST_K and M * math.ceil(N / 8) * K <= GEMV_N_SMALL_MOST_WORK:
            return ("gemv_n", {"ROWS": 1, "KSPLIT": 8},
                    f"small C ({M} x {N}), K or N not a multiple of 16 bytes: a stream of A for each 8 columns, "
                    "K over the 8 warps of a block")
        # up to 4 rows of C: gemv, shifting rows that start at any offset, where its blocks fill the SMs
        # (GEMV_ANY_OFFSET above)
        if M <= 4 and dtype in ("fp16", "bf16") and split_ok:
            name, params, why = gemv_rule(shape, sms)
            if gemv_tiles(N)[0] * params["SPLIT_K"] >= GEMV_ANY_OFFSET_BLOCKS_PER_SM * sms:
                return name, params, why
        if not big or dtype not in ("fp16", "bf16"):
            return mma_rule(shape, sms, split_ok)
        return ("wgmma_ws", {}, "K or N is not a multiple of 16 bytes: A or B copied to aligned rows for TMA "
                "(inside the time), then warp-specialised wgmma, 128 x 256 tiles")
    if dtype == "tf32":
        return "wgmma_tf32", {}, "TMA and wgmma, 256 x 128 tiles"
    if M <= 4 and split_ok:
        return gemv_rule(shape, sms)
    if M <= 128:
        return wgmma_decode_rule(shape, sms, smem_per_sm, split_ok)
    return "wgmma_ws", {}, "warp-specialised wgmma, 128 x 256 tiles, stream-K over the last wave"


def choose(catalog, device: str, shape, sms: int = 132, dtype: str = "fp32",
           out_dtype: str = "fp32") -> tuple[object, dict, str]:
    """(variant, params, how it was chosen) for `--variant auto`, this input type and C's type."""
    hit = cached(device, shape, dtype) if out_dtype == "fp32" else None  # the cache holds FP32 C's winners
    if hit:
        entry, at = hit
        try:
            v = catalog.get(entry["variant"])
            return v, v.resolve(v.for_dtype(dtype, entry["params"])), f"tuning cache ({at} on {device})"
        except GemmlabError:
            pass  # the template changed since: fall back on the rule
    name, overrides, why = (rule(shape, sms) if dtype == "fp32"
                            else tensor_rule(shape, dtype, sms, out_dtype=out_dtype))
    v = catalog.get(name)
    return v, v.resolve(v.for_dtype(dtype, overrides, out_dtype)), f"rule: {why}"
