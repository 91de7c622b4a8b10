"""The run history and its deltas, the --out file, --json/--csv and --watch's loop, all without a GPU."""

import csv
import io
import json
import sqlite3
import threading
import time

import pytest

from gemmlab.results import history

from gemmlab.present import export
from gemmlab.files import write_atomic
from gemmlab.cli.measure import _watch
from gemmlab.watch import wait_for_change
from test_cli import invoke

SHAPE = {"M": 64, "N": 32, "K": 16}


def row(variant="tiled", ms=2.0, params=None, source_hash="aaaa", status="PASS", samples_ms=None):
    return {"variant": variant, "params": params or {"TILE": 32}, "source_hash": source_hash,
            "source": "kernels/fp32/03_tiled.cu.j2", "status": status, "ms": ms if status == "PASS" else None,
            "tflops": 1.0, "rel_err": 1e-7, "error": None if status == "PASS" else "boom",
            "samples_ms": samples_ms}


def test_first_run_then_deltas():
    assert history.record("run", row(ms=2.0), SHAPE, "H100", "abc") is None
    prev = history.record("run", row(ms=1.0), SHAPE, "H100", "abc")
    d = history.delta(row(ms=1.0), prev)
    assert d["vs_last"] == pytest.approx(2.0) and d["changed"] == ""
    assert history.delta_text(d) == "100.0% faster (noise unknown)"  # rows without samples
    prev = history.record("run", row(ms=1.25, source_hash="bbbb"), SHAPE, "H100", "abc")
    assert history.delta_text(history.delta(row(ms=1.25, source_hash="bbbb"), prev)) == \
        "20.0% slower (noise unknown), template changed"
    prev = history.record("run", row(ms=1.25, params={"TILE": 16}), SHAPE, "H100", "abc")
    assert history.delta(row(ms=1.25, params={"TILE": 16}), prev)["changed"] == "params changed"
    assert history.delta_text(history.delta(row(), None)) == "first run"


def test_compares_only_like_with_like():
    history.record("run", row(ms=2.0), SHAPE, "H100", None)
    assert history.record("run", row(ms=1.0), dict(SHAPE, K=17), "H100", None) is None  # another shape
    assert history.record("run", row(ms=1.0), SHAPE, "A100", None) is None  # another device
    assert history.record("run", row("naive", ms=1.0), SHAPE, "H100", None) is None  # another variant


def test_a_failed_run_is_recorded_but_not_compared_against():
    history.record("run", row(ms=2.0), SHAPE, "H100", None)
    history.record("run", row(status="CRASHED"), SHAPE, "H100", None)
    prev = history.record("run", row(ms=1.0), SHAPE, "H100", None)
    assert prev["ms"] == 2.0  # the last run with a time, not the crash
    assert [r["status"] for r in history.runs()] == ["PASS", "CRASHED", "PASS"]


def test_runs_filter_and_limit():
    for i in range(5):
        history.record("compare", row("tiled" if i % 2 else "naive", ms=1.0 + i), SHAPE, "H100", None)
    assert [r["ms"] for r in history.runs(limit=2)] == [4.0, 5.0]  # the newest, oldest first
    assert [r["ms"] for r in history.runs("tiled")] == [2.0, 4.0]
    assert history.runs("tiled")[0]["params"] == {"TILE": 32}


def test_history_command_formats():
    history.record("run", row(ms=2.0), SHAPE, "H100", "abc")
    r = invoke("history")
    assert r.exit_code == 0 and "tiled" in r.output and "H100" in r.output
    data = json.loads(invoke("history", "--json").output)
    assert data["rows"][0]["variant"] == "tiled" and data["rows"][0]["M"] == 64
    rows = list(csv.DictReader(io.StringIO(invoke("history", "--csv", "--variant", "tiled").output)))
    assert rows[0]["params"] == "TILE=32" and rows[0]["status"] == "PASS"
    assert invoke("history", "--where").output.strip() == str(history.path())


def test_history_is_where_it_says(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_HISTORY", str(tmp_path / "h.sqlite"))
    history.record("run", row(), SHAPE, "H100", None)
    assert (tmp_path / "h.sqlite").exists() and history.path() == tmp_path / "h.sqlite"


def test_empty_history():
    r = invoke("history")
    assert r.exit_code == 0 and "no runs recorded yet" in r.output


def test_a_damaged_history_is_a_clear_error(tmp_path, monkeypatch):
    bad = tmp_path / "h.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("GEMMLAB_HISTORY", str(bad))
    r = invoke("history")
    assert r.exit_code == 1 and "cannot be used" in r.output
    with pytest.raises(history.GemmlabError):
        history.record("run", row(), SHAPE, "H100", None)
    assert bad.read_bytes().startswith(b"this is not a database")  # left as it was


def test_record_is_one_transaction():
    history.record("run", row(), SHAPE, "H100", None)
    con = sqlite3.connect(history.path())
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_csv_flattens_rows():
    text = export.csv_text([{"variant": "x", "params": {"A": 1, "B": True}, "grid": [4, 2, 1], "ms": None},
                            {"variant": "y", "params": {}, "extra": 3}])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0] == {"variant": "x", "params": "A=1 B=true", "grid": "4 2 1", "ms": "", "extra": ""}
    assert rows[1]["extra"] == "3"


def test_results_file_is_replaced_whole(tmp_path):
    p = tmp_path / "r.json"
    write_atomic(p, "one")
    write_atomic(p, "two")
    assert p.read_text() == "two" and [f.name for f in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("cmd", [["build", "--variant", "tiled", "--arch", "sm_90"], ["list"], ["explain"],
                                 ["show", "--variant", "tiled", "--what", "resources", "--arch", "sm_90"],
                                 ["report", "benchmarks/h100-compare-1024.json"]])
def test_json_and_csv_everywhere(cmd, monkeypatch):
    from conftest import ROOT
    monkeypatch.chdir(ROOT)
    js = invoke(*cmd, "--json")
    assert js.exit_code == 0, js.output
    data = json.loads(js.output)
    cs = invoke(*cmd, "--csv")
    assert cs.exit_code == 0, cs.output
    rows = list(csv.DictReader(io.StringIO(cs.output)))
    assert len(rows) == (len(data) if isinstance(data, list) else len(data.get("rows", [data]))) > 0
    assert invoke(*cmd, "--json", "--csv").exit_code == 1


def test_out_never_overwrites(tmp_path):
    existing = tmp_path / "results.json"
    existing.write_text("mine")
    r = invoke("run", "--variant", "tiled", "--out", existing)
    assert r.exit_code == 1 and "already exists" in r.output and existing.read_text() == "mine"


def test_wait_for_change_sees_content_not_timestamps(tmp_path):
    f = tmp_path / "t.cu.j2"
    f.write_text("a")

    def edit():
        time.sleep(0.3)
        f.write_text("a")  # saved, unchanged
        time.sleep(0.3)
        f.unlink()         # an editor's save by rename: gone for a moment
        f.write_text("b")

    threading.Thread(target=edit).start()
    t0 = time.monotonic()
    assert wait_for_change(f, poll_s=0.05)
    assert time.monotonic() - t0 >= 0.55 and f.read_text() == "b"
    assert not wait_for_change(f, poll_s=0.05, timeout_s=0.3)


def test_watch_reruns_on_each_edit_and_survives_errors(tmp_path):
    from gemmlab.errors import GemmlabError
    f = tmp_path / "t.cu.j2"
    f.write_text("0")
    calls = []

    def once():
        calls.append(f.read_text())
        if len(calls) == 1:
            threading.Timer(0.3, lambda: f.write_text("1")).start()
            raise GemmlabError("does not compile")  # a broken edit: reported, and the watch goes on
        if len(calls) == 2:
            threading.Timer(0.3, lambda: f.write_text("2")).start()
            return 1
        return 130  # Ctrl-C during a run ends the watch

    _watch(f, once)
    assert calls == ["0", "1", "2"]


def test_noise_is_the_robust_spread_of_the_samples():
    assert history.noise(None) is None and history.noise([1.0, 1.0]) is None
    assert history.noise([1.0, 1.0, 1.0, 1.0]) == 0.0
    # one slow repetition does not widen it: median 1.0, absolute deviations 0, 0, 0.02, 0.02, 5
    assert history.noise([1.0, 1.02, 0.98, 1.0, 6.0]) == pytest.approx(1.4826 * 0.02)


@pytest.mark.parametrize("now,words", [
    ([0.980, 0.981, 0.979, 0.980, 0.982], "2.0% faster"),              # the shift is past both runs' noise
    ([0.996, 1.010, 0.985, 0.996, 1.005], "0.4% (within noise)"),  # this run's spread is ~1%
    ([1.030, 1.031, 1.029, 1.030, 1.030], "2.9% slower"),
])
def test_a_difference_counts_only_outside_the_noise(now, words):
    before = [1.000, 1.001, 0.999, 1.000, 1.002]
    history.record("run", row(ms=1.0, samples_ms=before), SHAPE, "H100", None)
    prev = history.record("run", row(ms=sorted(now)[2], samples_ms=now), SHAPE, "H100", None)
    assert prev["samples"] == before  # kept in the history
    d = history.delta(row(ms=sorted(now)[2], samples_ms=now), prev)
    assert history.delta_text(d) == words
    assert d["outside_noise"] == ("within" not in words)


def test_a_history_from_before_samples_gains_the_column(tmp_path, monkeypatch):
    import sqlite3
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript(history.SCHEMA.replace(",\n    samples     TEXT", "").split("CREATE INDEX")[0])
    con.close()
    monkeypatch.setenv("GEMMLAB_HISTORY", str(db))
    history.record("run", row(ms=1.0, samples_ms=[1.0, 1.0, 1.0]), SHAPE, "H100", None)
    assert history.runs()[-1]["samples"] == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------------------- reading, exactly


def test_noise_needs_three_samples_and_a_positive_median():
    assert history.noise([1.0, 2.0, 4.0]) == pytest.approx(1.4826 * 1 / 2)  # median 2, deviations 1, 0, 2
    assert history.noise([0.0, 0.0, 0.0]) is None


def test_reading_an_absent_history_creates_nothing():
    from gemmlab.results.model import Shape
    assert history.runs() == [] and history.measured("H100", "aaaa", Shape(64, 32, 16)) is None
    assert not history.path().exists()


def test_measured_finds_the_last_pass_of_that_source_and_type():
    from gemmlab.results.model import Shape
    history.record("run", row(ms=2.0), SHAPE, "H100", None)
    history.record("run", row(ms=3.0), SHAPE, "H100", None, dtype="bf16")
    history.record("run", row(status="FAIL"), SHAPE, "H100", None)
    assert history.measured("H100", "aaaa", Shape(64, 32, 16))["ms"] == 2.0  # fp32 unless told
    assert history.measured("H100", "aaaa", Shape(64, 32, 16), "bf16")["ms"] == 3.0
    assert history.measured("H100", "bbbb", Shape(64, 32, 16)) is None
    assert [r["dtype"] for r in history.runs()] == ["fp32", "bf16", "fp32"]


def test_runs_shows_the_last_20_unless_told():
    for i in range(22):
        history.record("run", row(ms=1.0 + i), SHAPE, "H100", None)
    assert [r["ms"] for r in history.runs()] == [3.0 + i for i in range(20)]


def test_a_history_that_cannot_be_read_says_where(monkeypatch, tmp_path):
    empty = tmp_path / "no-table.sqlite"  # no runs table: every query fails
    monkeypatch.setattr(history, "_connect", lambda create: sqlite3.connect(empty))
    with pytest.raises(history.GemmlabError, match=r"the run history at .* cannot be read: no such table: runs"):
        history.runs()


def test_the_history_file_and_its_lock_wait(monkeypatch):
    from gemmlab.templates import data_dir
    assert history.path() == data_dir() / "history.sqlite"
    seen = {}
    real = sqlite3.connect
    monkeypatch.setattr(history.sqlite3, "connect", lambda p, **kw: (seen.update(kw), real(p, **kw))[1])
    history.record("run", row(), SHAPE, "H100", None)
    assert seen == {"timeout": 10}  # another gemmlab writing: wait 10 s for its lock, not sqlite's 5


def test_a_damaged_history_says_what_to_do(tmp_path, monkeypatch):
    (tmp_path / "h.sqlite").write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("GEMMLAB_HISTORY", str(tmp_path / "h.sqlite"))
    with pytest.raises(history.GemmlabError) as e:
        history.runs()
    assert e.value.message.startswith(f"the run history at {tmp_path / 'h.sqlite'} cannot be used: ")
    assert e.value.hint == "move the file away (gemmlab starts a new one), or set GEMMLAB_HISTORY to another path"


def test_a_recorded_row_in_full():
    history.record("run", row(), SHAPE, "H100", "abc")
    history.record("run", row(samples_ms=[1.0, 2.0]), SHAPE, "H100", None, dtype="bf16")
    first, second = history.runs()
    assert first["time"].endswith("+00:00") and len(first["time"]) == 25  # UTC, to the second
    assert {k: first[k] for k in ("command", "device", "variant", "source_hash", "template", "params", "M", "N", "K",
                                  "dtype", "status", "ms", "tflops", "rel_err", "error", "commit_id", "samples")} == {
        "command": "run", "device": "H100", "variant": "tiled", "source_hash": "aaaa",
        "template": "kernels/fp32/03_tiled.cu.j2", "params": {"TILE": 32}, "M": 64, "N": 32, "K": 16, "dtype": "fp32",
        "status": "PASS", "ms": 2.0, "tflops": 1.0, "rel_err": 1e-7, "error": None, "commit_id": "abc", "samples": None}
    assert second["samples"] == [1.0, 2.0] and second["dtype"] == "bf16"
    con = sqlite3.connect(history.path())
    assert con.execute("SELECT samples FROM runs ORDER BY id").fetchall() == [(None,), ("[1.0, 2.0]",)]  # SQL NULL


def test_delta_in_full():
    assert history.delta(row(), None) == {"vs_last": None, "changed": "first run"}
    history.record("run", row(ms=2.0, samples_ms=[2.0, 2.0, 2.0]), SHAPE, "H100", None)
    prev = history.runs()[-1]
    now = row(ms=1.0, samples_ms=[1.0, 1.0, 1.0])
    assert history.delta(now, prev) == {"vs_last": 2.0, "noise": 0.0, "outside_noise": True, "changed": "",
                                        "last_ms": 2.0, "last_id": prev["id"]}
    same = history.delta(row(ms=2.0, samples_ms=[2.0, 2.0, 2.0]), prev)  # no change, no noise: not outside
    assert same["outside_noise"] is False and history.delta_text(same) == "0.0% (within noise)"
    half = history.delta(row(ms=1.0), prev)  # one of them kept no samples: noise unknown
    assert (half["noise"], half["outside_noise"]) == (None, None)
    failed = history.delta(row(status="FAIL"), prev)
    assert (failed["vs_last"], failed["outside_noise"]) == (None, None)
    assert history.delta_text(failed) == "no time"


def test_delta_text_without_anything_to_say():
    assert history.delta_text({}) == "-"
    assert history.delta_text({"vs_last": None, "last_ms": 2.0, "changed": "params changed"}) == "no time, params changed"
