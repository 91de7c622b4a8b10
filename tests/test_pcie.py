"""`gemmlab pcie` without a GPU: its sizes, the PCIe link's rate, the plateau, the worker's request, and
the command's table, JSON, --out file, report and plot from measurements made up here. The measurement
itself (on a GPU) is test_pcie_copies_are_measured_and_carry_their_bytes."""

import json
from types import SimpleNamespace

import pytest

import gemmlab.cli.lab
import gemmlab.gpu.pcie
from gemmlab.errors import GemmlabError
from gemmlab.gpu import pcie
from gemmlab.present import pcie_tables
from gemmlab.worker import GpuJobs
from conftest import gpu_available
from test_cli import invoke

GEN5_X16 = 32e9 * 16 * 128 / 130 / 8  # 63.015 GB/s


def test_sizes_are_read_in_binary_units():
    assert [pcie.parse_size(t) for t in ("4096", "1KB", "64 mb", "1GB", "3B")] == [4096, 1024, 64 << 20, 1 << 30, 3]
    for bad in ("1TB", "abc", "0", "1.5MB", ""):
        with pytest.raises(GemmlabError) as e:
            pcie.parse_size(bad)
        assert e.value.message == f"'{bad}' is not a size: give bytes, or a number with KB, MB or GB (1 KB = 1024 bytes)"
    assert [pcie.size_text(n) for n in (1024, 256 << 20, 1 << 30, 1000, 3 << 10)] == ["1 KB", "256 MB", "1 GB", "1000 B", "3 KB"]


def test_the_sizes_go_from_1_kb_to_1_gb_in_powers():
    assert pcie.sizes(1 << 10, 1 << 30, 4) == [1 << (10 + 2 * k) for k in range(11)]
    assert len(pcie.sizes(1 << 10, 1 << 30, 2)) == 21 and pcie.sizes(4096, 4096, 4) == [4096]
    with pytest.raises(GemmlabError) as e:
        pcie.sizes(1 << 10, 3 << 20, 4)
    assert e.value.message == "3 MB is not 1 KB times a power of 4" and e.value.hint == "the sizes go 256 KB, 1 MB, 4 MB"
    with pytest.raises(GemmlabError) as e:
        pcie.sizes(1 << 20, 1 << 10, 4)
    assert e.value.message == "the largest size (1 KB) is below the smallest (1 MB)"


def test_the_link_rate_is_lanes_times_transfers_less_the_encoding():
    assert pcie.link_rate(1, 1) == pytest.approx(250e6)      # 2.5 GT/s x 8/10 / 8 bits
    assert pcie.link_rate(2, 16) == pytest.approx(8e9)       # 5 GT/s x 16 x 8/10 / 8
    assert pcie.link_rate(3, 16) == pytest.approx(8e9 * 16 * 128 / 130 / 8)
    assert pcie.link_rate(4, 8) == pytest.approx(16e9 * 8 * 128 / 130 / 8)
    assert pcie.link_rate(5, 16) == pytest.approx(GEN5_X16) and round(GEN5_X16 / 1e9, 2) == 63.02
    with pytest.raises(GemmlabError) as e:
        pcie.link_rate(6, 16)
    assert e.value.message == "gemmlab does not know the rate of PCIe generation 6"


def test_the_link_is_unknown_without_nvml_and_worked_out_with_it():
    assert pcie.link_doc(None) == {"rate_gbs": None, "why": "NVML is not available (pip install nvidia-ml-py)"}
    got = pcie.link_doc({"max_gen": 5, "max_width": 16, "gen": 5, "width": 16, "bus_id": "x"})
    assert got["rate_gbs"] == pytest.approx(GEN5_X16 / 1e9)
    assert got["how"] == "PCIe gen 5 x16: 32 GT/s x 16 lanes x 128/130 / 8"
    assert pcie.link_doc({"max_gen": 7, "max_width": 16})["why"] == "gemmlab does not know the rate of PCIe generation 7"


def measured(pinned_gbs=55.0, pageable_gbs=20.0):
    """Rows as the worker sends them: 1 KB to 1 GB by 4; the small copies slower (latency-bound)."""
    rows = []
    for n in pcie.sizes(1 << 10, 1 << 30, 4):
        for d in pcie.DIRECTIONS:
            for m, gbs in (("pageable", pageable_gbs), ("pinned", pinned_gbs)):
                rate = gbs if n >= 1 << 20 else gbs * n / (1 << 21)
                rate *= 0.9 if d == "D2H" else 1.0
                rows.append({"bytes": n, "size": pcie.size_text(n), "direction": d, "memory": m,
                             "ms": n / (rate * 1e9) * 1e3, "min_ms": 0, "max_ms": 0, "reps": 10})
    return rows


def test_the_plateau_is_the_median_from_1_mb_up_against_the_link():
    rows = pcie.rows_with_link(measured(), GEN5_X16 / 1e9)
    assert rows[0]["gbs"] == pytest.approx(20.0 / 2048) and rows[-1]["pct_link"] == pytest.approx(100 * 55 * 0.9e9 / GEN5_X16)
    got = {(p["direction"], p["memory"]): p for p in pcie.plateau(rows, GEN5_X16 / 1e9)}
    assert list(got) == [("H2D", "pageable"), ("H2D", "pinned"), ("D2H", "pageable"), ("D2H", "pinned")]
    h2d = got[("H2D", "pinned")]
    assert h2d["sizes"] == 6 and h2d["gbs"] == pytest.approx(55.0) and h2d["from_bytes"] == 1 << 20
    assert h2d["pct_link"] == pytest.approx(100 * 55e9 / GEN5_X16) and h2d["within_10pct"] is False  # 87.3%
    faster = {(p["direction"], p["memory"]): p for p in pcie.plateau(pcie.rows_with_link(measured(57.0), GEN5_X16 / 1e9),
                                                                    GEN5_X16 / 1e9)}
    assert faster[("H2D", "pinned")]["within_10pct"] is True and faster[("D2H", "pinned")]["within_10pct"] is False
    unknown = pcie.plateau(pcie.rows_with_link(measured(), None), None)
    assert all(p["pct_link"] is None and p["within_10pct"] is None for p in unknown)
    assert unknown[1]["gbs"] == pytest.approx(55.0)


def test_the_worker_measures_then_reads_the_link(monkeypatch):
    monkeypatch.setattr("gemmlab.gpu.problem.Problem", lambda *a, **k: None)
    jobs = GpuJobs("shape", 7, False)
    calls = []
    monkeypatch.setattr(gemmlab.gpu.pcie, "measure", lambda sizes, reps, phase: calls.append(("measure", sizes, reps)) or ["row"])
    monkeypatch.setattr(gemmlab.gpu.pcie, "link", lambda: calls.append(("link",)) or {"max_gen": 5})
    assert jobs.handle(("pcie", [1024, 4096], 3)) == (["row"], {"max_gen": 5})
    assert calls == [("measure", [1024, 4096], 3), ("link",)]  # the link after the copies, while it is awake


@pytest.fixture
def fake_gpu(monkeypatch):
    """`gemmlab pcie` with the worker's answer made up: the 1 KB to 1 GB rows and a gen 5 x16 link."""
    asked = []
    dev = SimpleNamespace(to_json=lambda: {"name": "Test GPU"})

    def on_gpu(request, what):
        asked.append(request)
        sizes = set(request[1])
        return dev, ([r for r in measured() if r["bytes"] in sizes],
                     {"max_gen": 5, "max_width": 16, "gen": 5, "width": 16, "bus_id": "00000000:18:00.0"})
    monkeypatch.setattr(gemmlab.cli.lab, "_on_gpu", on_gpu)
    return asked


def test_pcie_prints_the_rates_and_the_plateau(fake_gpu):
    r = invoke("pcie")
    assert r.exit_code == 0, r.output
    assert fake_gpu == [("pcie", pcie.sizes(1 << 10, 1 << 30, 4), 10)]
    lines = r.output.splitlines()
    assert any(line.split() == ["│", "1", "MB", "│", "20.00", "│", "55.00", "│", "18.00", "│", "49.50", "│"]
               for line in lines), r.output
    assert any(line.split() == ["│", "H2D", "│", "pinned", "│", "6", "│", "55.00", "│", "87.3", "│", "no", "│"]
               for line in lines), r.output
    assert "link 63.02 GB/s each way (PCIe gen 5 x16: 32 GT/s x 16 lanes x 128/130 / 8)" in r.output


def test_pcie_json_out_report_and_plot(fake_gpu, tmp_path):
    out, png = tmp_path / "pcie.json", tmp_path / "pcie.png"
    r = invoke("pcie", "--min-size", "1MB", "--max-size", "16MB", "--factor", "2", "--reps", "3", "--json",
               "--out", out, "--plot", png)
    assert r.exit_code == 0, r.output
    assert fake_gpu == [("pcie", [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20], 3)]
    doc = json.loads(r.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["command"] == "pcie" and doc["reps"] == 3 and doc["device"] == {"name": "Test GPU"}
    assert [x["size"] for x in doc["rows"][:4]] == ["1 MB"] * 4 and len(doc["rows"]) == 12  # 1, 4, 16 MB: measured() has no 2 or 8
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    md = invoke("report", "--markdown", out).stdout.splitlines()
    assert md[:3] == ["| size | H2D pageable GB/s | H2D pinned GB/s | D2H pageable GB/s | D2H pinned GB/s |",
                      "|---:|---:|---:|---:|---:|", "| 1 MB | 20.00 | 55.00 | 18.00 | 49.50 |"]
    assert "| D2H | pinned | 49.50 | 78.6 | **no** |" in md
    assert md[-1] == ("link 63.02 GB/s each way (PCIe gen 5 x16: 32 GT/s x 16 lanes x 128/130 / 8); "
                      "NVML read gen 5 x16 just after the copies.")
    assert invoke("report", out).exit_code == 0


def test_pcie_without_nvml_says_the_rate_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(gemmlab.cli.lab, "_on_gpu", lambda request, what: (
        SimpleNamespace(to_json=lambda: {"name": "Test GPU"}), (measured(), None)))
    r = invoke("pcie", "--out", tmp_path / "p.json", "--plot", tmp_path / "p.png")
    assert r.exit_code == 0 and "link rate unknown: NVML is not available (pip install nvidia-ml-py)" in r.output
    md = invoke("report", "--markdown", tmp_path / "p.json").stdout
    assert "| H2D | pinned | 55.00 | - | - |" in md
    assert (tmp_path / "p.png").stat().st_size > 10_000


@pytest.mark.parametrize("args,message", [
    (["--max-size", "3MB"], "error: 3 MB is not 1 KB times a power of 4"),
    (["--min-size", "1 PB"], "error: '1 PB' is not a size"),
    (["--factor", "3"], "Invalid value for '--factor'"),
])
def test_bad_pcie_input_is_one_line_before_any_gpu_work(fake_gpu, args, message):
    r = invoke("pcie", *args)
    assert r.exit_code in (1, 2) and message in r.output and fake_gpu == []


@pytest.mark.skipif(gpu_available(), reason="checks the message shown on a machine without a GPU")
def test_pcie_says_there_is_no_gpu():
    r = invoke("pcie", "--max-size", "4KB")
    assert r.exit_code == 1 and r.output.startswith("error: no CUDA GPU is available")


@pytest.mark.gpu
def test_pcie_copies_are_measured_and_carry_their_bytes():
    rows = pcie.measure(pcie.sizes(1 << 10, 1 << 20, 4), reps=3)
    assert [(r["size"], r["direction"], r["memory"]) for r in rows[:4]] == [
        ("1 KB", "H2D", "pageable"), ("1 KB", "H2D", "pinned"), ("1 KB", "D2H", "pageable"), ("1 KB", "D2H", "pinned")]
    assert len(rows) == 24 and all(r["ms"] > 0 and r["min_ms"] <= r["ms"] <= r["max_ms"] for r in rows)
