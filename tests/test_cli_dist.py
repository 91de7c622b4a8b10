"""`gemmlab dist` through the CLI on a CPU: stand-in ranks (tests/dist_ranks.py) and the stand-in GPU
worker for the one-GPU rows (tests/handlers.py:FakeGpu)."""

import json

import pytest
from click.testing import CliRunner

from gemmlab.cli import cli
from gemmlab.multigpu import comm, job as dist_job


@pytest.fixture
def fake_dist(fake_gpu, monkeypatch):
    monkeypatch.setenv(dist_job.RANK_MAIN_ENV, "dist_ranks:main")
    monkeypatch.setattr(comm, "unique_id", lambda: b"the-id")
    monkeypatch.setenv("DIST_SCENARIO", "fine")
    return monkeypatch


def gemmlab(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_a_run_with_its_baseline_and_one_gpu(fake_dist, tmp_path):
    out, plot = tmp_path / "ring.json", tmp_path / "ring.png"
    r = gemmlab("dist", "--gpus", 2, "-v", "tiled", "--shape", "96,96,64", "--dtype", "fp32", "--seed", 3,
                "--out", out, "--plot", plot)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    got = [(x["schedule"], x["kernel"], x["role"]) for x in doc["rows"]]
    assert got == [("ring", "tiled", "ours"), ("allgather", "cuBLAS", "baseline"),
                   ("one GPU", "tiled", "one GPU"), ("one GPU", "cuBLAS", "one GPU")]
    ring = doc["rows"][0]
    assert ring["x_baseline"] == 1.0 and ring["efficiency"] == pytest.approx(1.0 / (2 * 1.0))  # FakeGpu: 1 ms
    assert ring["exposed_ms"] == pytest.approx(0.2) and ring["sent_mb"] == 48 * 64 * 4 / 1e6
    assert plot.stat().st_size > 0 and "ring" in r.stdout and "allgather" in r.stdout
    md = gemmlab("report", "--markdown", out)
    assert md.exit_code == 0 and "| ring (overlap) | tiled | 2 | 1.000 |" in md.stdout
    assert md.stdout.rstrip().endswith("\n\ntiled TILE=32 PREFETCH=true")  # the parameters, once, under the table


def test_report_plots_time_against_gpus_over_several_dist_files(fake_dist, tmp_path):
    files = []
    for gpus in (2, 3):
        files.append(tmp_path / f"ring{gpus}.json")
        r = gemmlab("dist", "--gpus", gpus, "-v", "tiled", "--shape", "96,96,64", "--dtype", "fp32", "--seed", 3,
                    "--no-single", "--out", files[-1])
        assert r.exit_code == 0, r.output
    plot = tmp_path / "both.png"
    r = gemmlab("report", "--plot", plot, *files)
    assert r.exit_code == 0, r.output
    assert plot.read_bytes().startswith(b"\x89PNG") and "plot written to" in r.output
    again = gemmlab("report", "--plot", plot, *files)  # never over a file the user has
    assert again.exit_code == 1 and "already exists; gemmlab does not overwrite it" in again.output
    (tmp_path / "other.json").write_text(json.dumps({"command": "compare", "rows": []}))
    r = gemmlab("report", "--plot", tmp_path / "x.png", files[0], tmp_path / "other.json")
    assert r.exit_code == 1 and "--plot draws time against GPUs from `gemmlab dist --json` files" in r.output
    assert not (tmp_path / "x.png").exists()


def test_a_crash_is_one_line_naming_the_rank(fake_dist, tmp_path):
    fake_dist.setenv("DIST_SCENARIO", "crash:1")
    r = gemmlab("dist", "--gpus", 2, "-v", "tiled", "--shape", "96", "--dtype", "fp32", "--no-single")
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == ("error: rank 1 crashed (exit code 3) during 'ring with mine: check'; "
                                                 "the job was stopped")
    assert "Traceback" not in r.output


@pytest.mark.parametrize("args,message", [
    (["--schedule", "summa", "--gpus", "2"], "summa runs on a square grid of ranks, and 2 is not a square"),
    (["--schedule", "rign"], "no schedule 'rign'"),
    (["--shape", "1,2"], "--shape takes M,N,K or one size"),
    (["--gpus", "0"], "--gpus takes a number of GPUs or all"),
    (["--shape", "97", "--gpus", "2"], "ring splits M = 97 over 2 parts"),
    (["--schedule", "allgather,ring", "--timeline"],
     "--timeline follows an arrival step's barrier, chunks and GEMM, and allgather, ring has none"),
    (["--measure", "--timeline"], "--timeline follows a schedule's repetitions, and --measure runs none"),
])
def test_mistakes_are_one_line(fake_dist, args, message):
    r = gemmlab("dist", "-v", "tiled", "--dtype", "fp32", "--no-single", *args)
    assert r.exit_code == 1 and message in r.stderr, r.output
    assert "Traceback" not in r.output


def test_a_timeline_is_shown_under_the_table(fake_dist, tmp_path):
    """A row with a timeline (--timeline, saved) gets its own small table under the dist table: a rank a line."""
    out = tmp_path / "ring.json"
    r = gemmlab("dist", "--gpus", 2, "-v", "tiled", "--shape", "96", "--dtype", "fp32", "--no-single", "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    doc["rows"][0]["timeline"] = [{"rank": rank, "barrier_ms": 0.011, "chunks_ms": [0.031, 0.052],
                                   "gemm_start_ms": 0.002, "gemm_end_ms": 0.231 + rank} for rank in (0, 1)]
    saved = tmp_path / "timeline.json"
    saved.write_text(json.dumps(doc))
    shown = gemmlab("report", saved)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())  # the title folds at the console's width
    assert "ring with tiled: ms after a repetition's start on the comm stream, median of 4 repetitions" in text
    assert text.index("ring with tiled") > text.index("allgather")  # under the dist table
    for cell in ("barrier", "chunk 0", "chunk 1", "GEMM start", "GEMM end", "0.052", "1.231"):
        assert cell in text, text


def test_gemmlab_dist_is_the_function_after_the_package_is_imported():
    """A subpackage named like the API function would replace it on import (it was gemmlab/dist/)."""
    import gemmlab
    import gemmlab.multigpu.job  # noqa: F401
    assert callable(gemmlab.dist) and gemmlab.dist.__module__ == "gemmlab.api"


def test_all_schedules_are_those_that_run_on_this_hosts_gpus(fake_dist, monkeypatch, tmp_path):
    """summa needs a square number: on a host of 2 GPUs, `--schedule all` without --gpus leaves it out."""
    from gemmlab.multigpu import job
    monkeypatch.setattr(job, "gpu_count", lambda: 2)
    out = tmp_path / "all.json"
    r = gemmlab("dist", "--schedule", "all", "-v", "tiled", "--shape", "96", "--dtype", "fp32", "--no-single",
                "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["gpus"] == 2 and doc["schedules"] == ["allgather", "reduce_scatter", "ring"]
