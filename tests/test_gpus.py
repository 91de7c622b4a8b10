"""`--gpus N` for compare, sweep and suite on a CPU: one stand-in worker per GPU (tests/gpus_fake.py), each
seeing only its own GPU, every job measured once, on one of them, and the rows in one table."""

import json

import pytest
from click.testing import CliRunner

from gemmlab.cli import cli
from gemmlab.worker import GPU_JOBS_ENV, visible_device
from gemmlab.errors import GemmlabError


@pytest.fixture
def seen(monkeypatch, tmp_path):
    log = tmp_path / "seen.log"
    monkeypatch.setenv(GPU_JOBS_ENV, "gpus_fake:SeenGpu")
    monkeypatch.setenv("SEEN_GPU_LOG", str(log))
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return lambda: [line.split() for line in log.read_text().splitlines()]


def gemmlab(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_compare_spreads_its_jobs_over_the_gpus(seen, tmp_path):
    out = tmp_path / "c.json"
    r = gemmlab("compare", "--variants", "naive,coalesced,tiled,blocktile1d", "--size", 64, "--gpus", 2, "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert [x["variant"] for x in doc["rows"]] == ["naive", "coalesced", "tiled", "blocktile1d", "cuBLAS"]
    assert doc["gpus"] == 2 and {x["gpu"] for x in doc["rows"]} == {0, 1} and doc["rows"][-1]["gpu"] == 0
    log = seen()
    assert sorted(name for name, _ in log) == ["blocktile1d", "coalesced", "cuBLAS", "naive", "tiled"]  # each once
    assert {gpu for _, gpu in log} == {"0", "1"} and ["cuBLAS", "0"] in log
    assert all(str(x["gpu"]) == dict(log)[x["variant"]] for x in doc["rows"])  # the row says where it ran


def test_sweep_takes_gpus(seen):
    r = gemmlab("sweep", "--variant", "tiled", "--param", "TILE=8,16,32", "--size", 64, "--gpus", 2, "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["rows"]) == 4
    assert {gpu for _, gpu in seen()} == {"0", "1"}


def test_suite_deals_its_shapes_over_the_gpus(seen, tmp_path):
    """A suite's shape goes whole to one GPU (cuBLAS and its jobs there, so its x cuBLAS is one GPU's),
    the shapes dealt out in turn; rounds take turns on each GPU, so they go with --gpus here."""
    out = tmp_path / "s.json"
    shapes = ["256x256x256", "256x256x1024", "256x256x8192"]
    r = gemmlab("suite", "--variants", "tiled", "--only", ",".join(shapes), "--gpus", 2, "--rounds", 2,
                "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["gpus"] == 2 and doc["summary"]
    assert [(x["shape"], x["variant"], x["gpu"]) for x in doc["rows"]] == [
        ("256x256x256", "tiled", 0), ("256x256x256", "cuBLAS", 0), ("256x256x1024", "tiled", 1),
        ("256x256x1024", "cuBLAS", 1), ("256x256x8192", "tiled", 0), ("256x256x8192", "cuBLAS", 0)]
    log = seen()
    assert sorted(log) == sorted([name, gpu] for name in ("cuBLAS", "tiled") for gpu in "001" for _ in range(2))


def test_a_gpu_that_cannot_run_is_named_and_the_others_rows_kept(seen, monkeypatch, tmp_path):
    monkeypatch.setenv(GPU_JOBS_ENV, "gpus_fake:NoSecondGpu")
    out = tmp_path / "s.json"
    r = gemmlab("suite", "--variants", "tiled", "--only", "256x256x256,256x256x1024,256x256x8192", "--gpus", 2,
                "--out", out)
    assert r.exit_code == 1 and "GPU 1: GPU 1 has no room for the inputs" in r.output, r.output
    doc = json.loads(out.read_text())
    assert doc["fault"] == "GPU 1: GPU 1 has no room for the inputs"
    assert sorted({(x["shape"], x["gpu"]) for x in doc["rows"]}) == [("256x256x256", 0), ("256x256x8192", 0)]


@pytest.mark.parametrize("args,message", [
    (["--gpus", 2, "--rounds", 2], "--rounds takes turns on one GPU: it does not go with --gpus"),
    (["--gpus", 0], "'0' is not a number of GPUs (or all)"),
])
def test_gpus_mistakes(seen, args, message):
    r = gemmlab("compare", "--variants", "tiled", "--size", 64, *args)
    assert r.exit_code in (1, 2) and message in r.stderr, r.output


def test_the_gpu_a_worker_sees():
    assert visible_device(1, {}) == "1"
    assert visible_device(1, {"CUDA_VISIBLE_DEVICES": "3, 5"}) == "5"
    with pytest.raises(GemmlabError, match="GPU 2 is not one of the 2 that CUDA_VISIBLE_DEVICES=3,5 shows"):
        visible_device(2, {"CUDA_VISIBLE_DEVICES": "3,5"})
