"""Rows of A that arrive while one GEMM launch runs: the host's side of a template's ARRIVAL parameter
(kernels/lib/arrival.j2 has the kernel's).

    arrival = Arrival(flags, rank=r, ranks=P, chunks=c, piece_rows=m // c)   # flags: c uint32, zeros
    launch = prepared.bind(A, B, C, arrival=arrival)
    arrival.epoch += 1            # before each launch: the flags the kernel waits for hold this value
    ...the comm stream writes arrival.epoch into flags[i] once chunk i has landed...
    launch()

A is gathered chunk by chunk: chunk i holds piece i (piece_rows rows) of every rank's block, rank after
rank, and the product of piece (i, p) goes to C's rows p * m + i * piece_rows onwards. The epoch is read
when launch() is called, so one bound launch serves every repetition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import GemmlabError


@dataclass
class Arrival:
    flags: object          # device array of `chunks` uint32 (numpy on the CPU stand-ins)
    rank: int
    ranks: int
    chunks: int
    piece_rows: int
    epoch: int = 0

    @property
    def rows(self) -> int:
        """A's rows (and C's): every rank's block."""
        return self.ranks * self.chunks * self.piece_rows

    def check(self, M: int, tile_m: int) -> None:
        """The layout against a launch of M rows whose tiles are tile_m rows (BM times the cluster's blocks)."""
        if M != self.rows:
            raise GemmlabError(f"an arrival launch of {M} rows, and the chunks hold {self.rows} (a gemmlab bug)")
        if self.piece_rows % tile_m:
            raise GemmlabError(f"each chunk of a rank's block is {self.piece_rows} rows, and the kernel's tiles are "
                               f"{tile_m}: a tile would wait for two chunks",
                               hint=f"choose chunks so that M / P / chunks is a multiple of {tile_m}, or a smaller "
                                    "BM or CLUSTER_M")

    def argument(self) -> np.void:
        """The kernel's `const __grid_constant__ Arrival` (arrival.j2): the flags' address, then the epoch,
        rank, ranks, chunks and piece_rows as 32-bit words (32 bytes with the padding to 8)."""
        raw = np.zeros(32, dtype=np.uint8)
        raw[:8] = np.frombuffer(np.uint64(self.flags.data.ptr).tobytes(), dtype=np.uint8)
        words = np.array([self.epoch & 0xFFFFFFFF, self.rank, self.ranks, self.chunks, self.piece_rows],
                         dtype=np.uint32)
        raw[8:28] = np.frombuffer(words.tobytes(), dtype=np.uint8)
        return raw.view(np.dtype((np.void, 32)))[0]
