"""report's derived numbers, on rows made by hand: speed-ups rung over rung and over the first rung."""

import json

import pytest

from gemmlab.present import markdown

from gemmlab.results import metrics


def _rows(*ms):
    return [{"variant": f"k{i}", "ms": m} for i, m in enumerate(ms)] + [{"variant": "cuBLAS", "ms": 0.5}]


def test_speedups_over_the_previous_and_the_first_rung():
    rows = _rows(8.0, 4.0, 5.0)
    metrics.add_speedups(rows)
    assert [r["speedup_prev"] for r in rows[:3]] == [None, 2.0, 0.8]
    assert [r["speedup_first"] for r in rows[:3]] == [1.0, 2.0, 1.6]  # faster than the first: above 1
    assert "speedup_prev" not in rows[3] and "speedup_first" not in rows[3]  # cuBLAS is no rung


def test_a_failed_rung_is_skipped_not_a_new_start():
    rows = _rows(8.0, 4.0, None, 2.0)
    metrics.add_speedups(rows)
    assert rows[2]["speedup_prev"] is None and rows[2]["speedup_first"] is None
    assert rows[3]["speedup_prev"] == 2.0  # over k1, the last rung that has a time
    assert rows[3]["speedup_first"] == 4.0


def test_without_a_first_time_there_is_no_speedup_over_it():
    rows = _rows(None, 4.0, 2.0)
    metrics.add_speedups(rows)
    assert [r["speedup_first"] for r in rows[:3]] == [None, None, None]
    assert [r["speedup_prev"] for r in rows[:3]] == [None, None, 2.0]


def test_no_rungs_at_all():
    rows = [{"variant": "cuBLAS", "ms": 0.5}]
    metrics.add_speedups(rows)
    assert rows == [{"variant": "cuBLAS", "ms": 0.5}]


@pytest.mark.parametrize("x,text", [(None, "-"), (1.0, "1.00x"), (12.456, "12.46x")])
def test_speedup_text(x, text):
    assert markdown.speedup_text(x) == text


def test_predictions_measure_each_rung_over_its_parent():
    from types import SimpleNamespace as V
    ladder = [V(name="naive", parent=None, idea="", predict="", predict_x=None),
              V(name="tiled", parent="naive", idea="", predict="", predict_x=2.0),
              V(name="broken", parent="tiled", idea="", predict="", predict_x=1.5),
              V(name="after", parent="broken", idea="", predict="", predict_x=1.1)]
    doc = {"rows": [{"variant": "naive", "status": "PASS", "ms": 9.0}, {"variant": "tiled", "status": "PASS", "ms": 3.0},
                    {"variant": "broken", "status": "FAIL", "ms": None}, {"variant": "after", "status": "PASS", "ms": 1.0}]}
    got = {r["variant"]: r["measured_x"] for r in markdown.predictions(ladder, doc)}
    assert got == {"naive": None, "tiled": 3.0, "broken": None, "after": None}
    md = markdown.predictions_markdown(markdown.predictions(ladder, doc))
    assert md.splitlines()[2:] == ["| tiled | naive | 2.00x | 3.00x |", "| broken | tiled | 1.50x | - |",
                                   "| after | broken | 1.10x | - |"]


def test_results_files_keep_lists_of_numbers_on_one_line():
    """A suite's timing samples took a line each, most of a results file (the device carries at most
    64 MiB of the tree): lists of plain numbers go on one line, the rest stays indented, and the JSON reads
    back the same."""
    from gemmlab.present.export import dump
    doc = {"rows": [{"samples_ms": [0.176576, 0.17552, 1e-06], "params": {"BM": 128}, "listed": [[0, 1, 2]],
                     "names": ["a", "b"], "empty": [], "neg": [-1, -2.5e+20]}]}
    text = dump(doc)
    assert json.loads(text) == doc
    assert '"samples_ms": [0.176576, 0.17552, 1e-06],' in text and '"neg": [-1, -2.5e+20]' in text
    assert '"listed": [\n' in text and '[0, 1, 2]' in text and '"names": [\n' in text
