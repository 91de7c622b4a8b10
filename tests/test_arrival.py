"""wgmma_ws's ARRIVAL parameter without a GPU: off, the kernel is the one it was (no argument, no code); on, it
compiles for sm_90a with its wait (an acquire load, then the proxy fence TMA needs), and its tile order, built
by g++ from the rendered source, takes every tile once, the rank's own first, then chunk by chunk, each
tile's rows of A and C where the all-gather put them (gemmlab/multigpu/execute.py's layout)."""

import re
import shutil
import subprocess

import numpy as np
import pytest

from gemmlab.compile import compile_rendered
from gemmlab.errors import GemmlabError
from gemmlab.gpu.arrival import Arrival
from gemmlab.render import render
from gemmlab.templates import discover
from conftest import sass


def rendered(**params):
    v = discover().get("wgmma_ws")
    p = v.resolve(v.for_dtype("bf16", params))
    return v, p, render(v, p).source


def test_off_adds_no_argument_and_no_code():
    v, p, source = rendered()
    assert p["ARRIVAL"] is False
    assert not re.search(r"Arrival|arrival_|arrival\)|ld\.acquire\.sys", source.split("\n", 1)[1])
    assert "arrival" not in v.arguments(p, v.geometry(p, 4096, 4096, 4096, 132))
    on = dict(p, ARRIVAL=True)
    assert v.arguments(on, v.geometry(on, 4096, 4096, 4096, 132))[-1] == "arrival"


@pytest.mark.parametrize("params", [{}, {"CLUSTER_M": 1, "STREAM_K": False, "GPC_ORDER": False}])
def test_on_compiles_with_the_wait_and_the_argument_last(params):
    v, p, source = rendered(ARRIVAL=True, **params)
    assert "const __grid_constant__ Arrival arrival)" in source
    assert "ld.acquire.sys.global.u32" in source and "fence.proxy.async.global;" in source
    # the wait comes before the tile's first copy, in the producer only
    producer = source[source.index("if (wg == 0) {"):source.index("} else {  // a consumer")]
    assert producer.index("arrival_wait(") < producer.index("tma_load(")
    assert source.count("arrival_wait(arrival") == 1
    compiled = compile_rendered(render(v, p), "sm_90a")
    assert compiled.resources.spill_stores == 0
    text = sass(compiled)
    assert re.search(r"LDG\.E\.STRONG\.SYS", text), "no system-scope strong load: the flag's acquire is gone"
    assert "FENCE.VIEW.ASYNC" in text


def origin_source() -> str:
    """struct Arrival and arrival_origin(), as the kernel has them, for the host."""
    _, _, source = rendered(ARRIVAL=True)
    start, end = source.index("struct Arrival {"), source.index("// Wait until chunk")
    return source[start:end]


HOST = r"""
#include <algorithm>
#include <cstdio>
using std::min;
#define __device__
#define __forceinline__ inline
%s
int main(int argc, char** argv) {
    int rank, ranks, chunks, piece_rows, N;
    while (scanf("%%d %%d %%d %%d %%d", &rank, &ranks, &chunks, &piece_rows, &N) == 5) {
        Arrival a{nullptr, 1u, rank, ranks, chunks, piece_rows};
        const int tiles = ranks * chunks * piece_rows / 256 * ((N + 255) / 256);
        for (int t = 0; t < tiles; ++t) {
            int am, cm, n0;
            const int c = arrival_origin(t, N, a, am, cm, n0);
            printf("%%d %%d %%d %%d\n", am, cm, n0, c);
        }
        printf("end\n");
    }
}
"""

CASES = [(0, 1, 1, 1024, 4096), (1, 2, 1, 1024, 4096), (2, 4, 1, 1024, 4096), (3, 4, 2, 512, 4096),
         (1, 4, 4, 256, 2048), (0, 3, 2, 768, 768), (2, 5, 3, 256, 1280), (1, 2, 2, 2048, 512)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_tile_order_takes_every_tile_once_own_rows_first(tmp_path):
    (tmp_path / "order.cpp").write_text(HOST % origin_source())
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(tmp_path / "order"), str(tmp_path / "order.cpp")],
                   check=True, capture_output=True)
    stdin = "".join(" ".join(map(str, c)) + "\n" for c in CASES)
    out = subprocess.run([str(tmp_path / "order")], input=stdin, capture_output=True, text=True, check=True).stdout
    blocks = out.split("end\n")[:-1]
    assert len(blocks) == len(CASES)
    for (rank, ranks, chunks, piece, N), block in zip(CASES, blocks):
        rows = np.array([list(map(int, line.split())) for line in block.splitlines()])
        am, cm, n0, chunk = rows.T
        m, T = chunks * piece, piece // 256
        assert len(rows) == ranks * m // 256 * -(-N // 256)
        assert len({(a, n) for a, n in zip(am, n0)}) == len(rows)  # every tile of A's rows once
        assert set(n0) == set(range(0, N, 256))
        c_of, p_of = am // piece // ranks, am // piece % ranks  # the piece (chunk, rank) A's row lies in
        assert np.array_equal(cm, p_of * m + c_of * piece + am % piece)  # ... and where its product goes in C
        assert np.array_equal(chunk, np.where(p_of == rank, -1, c_of))  # own rows wait for nothing
        assert np.all(np.diff(chunk) >= 0)  # own first, then chunk 0, 1, ...: the order the rows come in
        assert (chunk == -1).sum() == chunks * T * -(-N // 256)


def test_the_argument_and_the_layout_checks():
    class Flags:
        class data:
            ptr = 0x7F0012345600
    a = Arrival(Flags(), rank=3, ranks=4, chunks=2, piece_rows=512, epoch=7)
    raw = bytes(a.argument())
    assert len(raw) == 32 and int.from_bytes(raw[:8], "little") == 0x7F0012345600
    assert list(np.frombuffer(raw[8:28], dtype=np.uint32)) == [7, 3, 4, 2, 512]
    a.check(4096, 256)
    with pytest.raises(GemmlabError, match="each chunk of a rank's block is 512 rows, and the kernel's tiles are 384"):
        a.check(4096, 384)
    with pytest.raises(GemmlabError, match="a gemmlab bug"):
        a.check(2048, 256)
