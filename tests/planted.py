"""Kernels written to be wrong, in the ways real edits go wrong: copies of built-in rungs with one change.

Each plant names a built-in template, a line of it (`anchor`, which must occur exactly once) and what
replaces that line. `write(directory)` puts every plant there as a template of its own (`planted_...`),
to run with `--kernels-dir`: tests/test_planted.py checks that each still applies (CPU; with
GEMMLAB_TESTS_FULL=1 that it compiles too) and that the check fails each one, saying where (GPU); the device run of issue 39 runs them at 4096^3 and
8192^3 through `gemmlab run --kernels-dir`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gemmlab.templates import name_of

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Plant:
    name: str
    base: str
    dtypes: tuple[str, ...]
    anchor: str
    replacement: str
    what: str
    clobbers: bool = False  # it writes into an input: the verdict must say which
    odd_only: bool = False  # wrong only where M or K is not a multiple of the tile (right at 4096^3)

    def source(self) -> str:
        text = next(p for p in (ROOT / "kernels").rglob("*.cu.j2") if name_of(p) == self.base).read_text()
        if text.count(self.anchor) != 1:
            raise AssertionError(f"plant {self.name}: its line of {self.base}.cu.j2 occurs "
                                 f"{text.count(self.anchor)} times: {self.anchor.strip()!r}")
        text = text.replace(self.anchor, self.replacement)
        text = re.sub(r'^name = "[^"]*"$', f'name = "{self.name}"', text, count=1, flags=re.M)
        return re.sub(r'^parent = "[^"]*"$', f'parent = "{self.base}"', text, count=1, flags=re.M)


_MMA_STORE = "                const float v = staged_c[r * {{ WN + 8 }} + q * 32 + lane];"
_TILED_STORE = "        C[row * N + col] = acc;\n}"

PLANTS = [
    Plant("planted_mma_zero_tile", "mma", ("bf16", "fp16", "tf32"), _MMA_STORE,
          "                const float v = row >= 64 && row < 96 && col >= 32 && col < 64  // planted: one 32 x 32 patch of zeros\n"
          "                    ? 0.0f : staged_c[r * {{ WN + 8 }} + q * 32 + lane];",
          "writes zeros into one 32 x 32 patch of C"),
    Plant("planted_mma_bf16_out", "mma", ("bf16", "fp16"), _MMA_STORE,
          "                const float v = __uint_as_float((__float_as_uint(staged_c[r * {{ WN + 8 }} + q * 32 + lane])"
          " + 0x8000u) & 0xFFFF0000u);  // planted: C rounded to bf16",
          "rounds C to bf16 before storing it"),
    Plant("planted_spread_cells", "spread", ("fp32",), "\n                C[row * N + col] = acc[i][j];",
          "\n                C[row * N + col] = (row < 1000 && col < 1000 && row % 257 == 3 && col % 263 == 5)\n"
          "                    ? acc[i][j] * 1.001f : acc[i][j];  // planted: 16 cells 0.1% off",
          "gets 16 cells of C 0.1% wrong"),
    Plant("planted_tiled_stomp", "tiled", ("fp32",), _TILED_STORE,
          "        C[row * N + col] = acc;\n"
          "    if (row == M - 1 && col == N - 1)  // planted: the last thread writes into its input\n"
          "        const_cast<float*>(A)[(size_t)M * K - 1] = 0.0f;\n}",
          "writes into one element of its input A", clobbers=True),
    Plant("planted_tiled_last_tile_row", "tiled", ("fp32",),
          "const bool row_ok = row < M, col_ok = col < N;",
          "const bool row_ok = row < M / {{ TILE }} * {{ TILE }}, col_ok = col < N;  // planted: whole tiles only",
          "skips the last, partial row of tiles at an odd M", odd_only=True),
    Plant("planted_tiled_k_tail", "tiled", ("fp32",), "for (int k0 = 0; k0 < K; k0 += {{ TILE }}) {",
          "for (int k0 = 0; k0 + {{ TILE }} <= K; k0 += {{ TILE }}) {  // planted: whole K steps only",
          "drops the tail of K", odd_only=True),
    Plant("planted_tiled_race", "tiled", ("fp32",),
          "        __syncthreads();  // everyone is done reading before the next step overwrites the tiles",
          "        // planted: no barrier here, so a fast warp overwrites the tiles a slow one still reads",
          "races: the barrier before the tiles are overwritten is gone"),
    Plant("planted_tiled_bf16_out", "tiled", ("fp32",), _TILED_STORE,
          "        C[row * N + col] = __uint_as_float(__float_as_uint(acc) & 0xFFFF0000u);  // planted: bf16 C\n}",
          "truncates C to bf16 precision"),
]

def write(directory: Path) -> list[Plant]:
    directory.mkdir(parents=True, exist_ok=True)
    for p in PLANTS:
        (directory / f"{p.name}.cu.j2").write_text(p.source())
    return PLANTS


if __name__ == "__main__":  # python tests/planted.py DIR: the plants as templates, for --kernels-dir
    import sys
    for p in write(Path(sys.argv[1])):
        print(p.name, " ".join(p.dtypes), p.what, sep="\t")
