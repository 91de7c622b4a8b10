"""On a GPU: user templates that write out of bounds, never end, race or step past the edges. compare
reports each one and finishes with the other variants' results intact; the sanitizer points at the
template line; history shows the change from run to run. Skipped without a GPU."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import GOOD_BODY, ROOT, write_template

pytestmark = pytest.mark.gpu

BROKEN = ROOT / "examples" / "broken"  # oob, hang, edge, racy: each broken in one way, on purpose


def gemmlab(*args, timeout=600):
    p = subprocess.run([sys.executable, "-m", "gemmlab", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    return p


def line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_compare_survives_a_crash_and_a_hang(tmp_path):
    out = tmp_path / "results.json"
    t0 = time.monotonic()
    p = gemmlab("compare", "--variants", "naive,oob,hang,tiled", "--kernels-dir", BROKEN, "--size", 256,
                "--timeout", 5, "--json", "--out", out)
    assert p.returncode == 1, p.stderr
    assert time.monotonic() - t0 < 120
    rows = {r["variant"]: r for r in json.loads(p.stdout)["rows"]}
    assert [rows[n]["status"] for n in ("naive", "oob", "hang", "tiled", "cuBLAS")] == \
        ["PASS", "CRASHED", "TIMEOUT", "PASS", "PASS"]
    assert "illegal" in rows["oob"]["error"].lower() and rows["oob"]["ms"] is None
    assert "no progress for 5 s" in rows["hang"]["error"] and rows["hang"]["ms"] is None
    assert rows["naive"]["ms"] > 0 and rows["tiled"]["ms"] > 0 and rows["tiled"]["pct_cublas"] > 0
    assert "CRASHED oob" in p.stderr and "TIMEOUT hang" in p.stderr
    saved = json.loads(out.read_text())  # the --out file has every row too
    assert [r["status"] for r in saved["rows"]] == ["PASS", "CRASHED", "TIMEOUT", "PASS", "PASS"]
    hist = json.loads(gemmlab("history", "--json", "--limit", 5).stdout)["rows"]
    assert [r["status"] for r in hist] == ["PASS", "PASS", "CRASHED", "TIMEOUT", "PASS"]  # cuBLAS first


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, "-m", "gemmlab", "compare", "--variants", "tiled,hang,naive",
                             "--kernels-dir", str(BROKEN), "--size", "256", "--timeout", "120", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until tiled is measured and the hang is under way
        if out.exists() and any(r["variant"] == "tiled" for r in json.loads(out.read_text())["rows"]):
            break
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert "tiled" in stdout and "cuBLAS" in stdout
    saved = json.loads(out.read_text())
    assert saved["interrupted"] is True
    assert [(r["variant"], r["status"]) for r in saved["rows"]] == [("tiled", "PASS"), ("cuBLAS", "PASS")]


def test_sanitizer_points_at_the_template_line():
    edge = BROKEN / "edge.cu.j2"
    p = gemmlab("run", "--variant", "edge", "--kernels-dir", BROKEN, "--sanitize", "--json")
    assert p.returncode == 1, p.stderr
    found = json.loads(p.stdout)
    assert found["tool"] == "memcheck" and found["shape"] == {"M": 257, "N": 131, "K": 97}
    # Rows past M read past the end of A before they reach the store: memcheck stops the kernel there.
    first = found["findings"][0]
    assert first["where"].endswith(f"edge.cu.j2:{line_of(edge, 'acc += A[')}"), found["findings"]
    assert first["what"].startswith("Invalid __global__ read") and "after the nearest allocation" in first["detail"]
    assert first["code"] == "acc += A[row * K + k] * B[k * N + col];"


def test_racecheck_finds_the_missing_barrier():
    racy = BROKEN / "racy.cu.j2"
    p = gemmlab("run", "--variant", "racy", "--kernels-dir", BROKEN, "--sanitize", "racecheck", "--json")
    assert p.returncode == 1, p.stderr
    found = json.loads(p.stdout)["findings"]
    assert found and all("racy.cu.j2:" in f["where"] for f in found)
    assert any(f"racy.cu.j2:{line_of(racy, 'acc += As')}" in f["where"] for f in found), found


def test_sanitizer_passes_a_correct_kernel():
    p = gemmlab("run", "--variant", "tiled", "--sanitize", "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    found = json.loads(p.stdout)
    assert found["findings"] == [] and found["check"]["status"] == "PASS"
    assert found["summary"] == "ERROR SUMMARY: 0 errors"


def test_history_shows_the_change_and_an_edited_template(user_dir):
    mine = write_template(user_dir, "mine", GOOD_BODY)

    def run():
        p = gemmlab("run", "--variant", "mine", "--kernels-dir", user_dir, "--size", 512, "--json")
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)["rows"][0]

    assert run()["changed"] == "first run"
    again = run()
    assert again["vs_last"] > 0 and again["changed"] == ""
    mine.write_text(mine.read_text().replace("float acc = 0.0f;", "float acc = 0.0f;  // edited"))
    assert run()["changed"] == "template changed"
    p = gemmlab("run", "--variant", "mine", "--kernels-dir", user_dir, "--size", 512, "--wide")
    said = " ".join(p.stdout.split())
    assert "vs last run" in said and any(w in said for w in ("faster", "slower", "(within noise)")), p.stdout


def test_out_of_memory_through_the_cli_is_one_message():
    p = gemmlab("run", "--variant", "tiled", "-M", 40000, "-N", 40000, "-K", 53000, "--check", "fp64")
    assert p.returncode == 1 and "GiB of GPU memory" in p.stderr


def test_watch_reruns_after_an_edit_and_survives_a_broken_one(user_dir):
    mine = write_template(user_dir, "mine", GOOD_BODY)
    proc = subprocess.Popen([sys.executable, "-m", "gemmlab", "run", "--variant", "mine", "--kernels-dir",
                             str(user_dir), "--size", "256", "--watch", "--no-cublas", "--csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    history_rows = lambda: json.loads(gemmlab("history", "--json").stdout)["rows"]  # noqa: E731

    def wait_for(n):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(history_rows()) < n:
            time.sleep(0.5)
        assert len(history_rows()) >= n

    try:
        wait_for(1)
        mine.write_text(mine.read_text().replace("float acc = 0.0f;", "float acc = 0.0f  // broken"))
        time.sleep(3)  # the broken edit: an error, no run, and the watch goes on
        mine.write_text(mine.read_text().replace("float acc = 0.0f  // broken", "float acc = 0.0f;  // fixed"))
        wait_for(2)
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in stderr
    assert "does not compile" in stderr and stderr.count("watching") >= 3
    assert stdout.count("variant,") == 2 and "template changed" in stdout
