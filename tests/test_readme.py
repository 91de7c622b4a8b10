"""The README stays true: its ladder tables are the committed H100 results, and the results say where
and when they were measured."""

import json

import pytest

from gemmlab import report
from conftest import ROOT

RESULTS = sorted((ROOT / "benchmarks").glob("h100-compare-*.json"))
LADDER_TABLES = [p for p in RESULTS if p.name in ("h100-compare-4096.json", "h100-compare-1024.json")]


def test_results_exist_for_4096_and_1024():
    assert {p.name for p in RESULTS} >= {"h100-compare-4096.json", "h100-compare-1024.json"}


@pytest.mark.parametrize("path", LADDER_TABLES, ids=[p.name for p in LADDER_TABLES])
def test_readme_table_is_the_committed_result(path):
    doc = json.loads(path.read_text())
    assert "H100" in doc["device"]["name"] and doc["date"] and doc["commit"]
    assert all(r["status"] == "PASS" for r in doc["rows"])
    table = report.markdown(doc)
    assert table in (ROOT / "README.md").read_text(), (
        f"README's table for {path.name} differs from the file: paste `gemmlab report --markdown {path}`")
    assert f"commit `{doc['commit']}`" in (ROOT / "README.md").read_text()


def test_readme_names_the_ci_test_command():
    text = (ROOT / "README.md").read_text()
    after = text.split("<!-- test-command -->", 1)[1]
    assert "python3 -m pytest" in after.split("```")[1]


def test_readme_versus_cublas_and_predictions_are_the_committed_results():
    from gemmlab.templates import discover
    docs = [json.loads(p.read_text()) for p in RESULTS]
    assert all(d["commit"] == docs[0]["commit"] and all(r["status"] == "PASS" for r in d["rows"]) for d in docs)
    readme = (ROOT / "README.md").read_text()
    assert report.versus_markdown(docs, "spread") in readme, "paste `gemmlab report --versus spread ...`"
    doc = json.loads((ROOT / "benchmarks" / "h100-compare-4096.json").read_text())
    assert report.predictions_markdown(report.predictions(discover().ladder(), doc)) in readme, (
        "paste `gemmlab explain --results benchmarks/h100-compare-4096.json --markdown`")


def test_readme_fault_and_sanitizer_tables_are_the_committed_results():
    readme = (ROOT / "README.md").read_text()
    faults = json.loads((ROOT / "benchmarks" / "h100-faults.json").read_text())
    assert [r["status"] for r in faults["rows"]] == ["PASS", "CRASHED", "TIMEOUT", "PASS", "PASS"]
    assert report.markdown(faults) in readme, "paste `gemmlab report --markdown benchmarks/h100-faults.json`"
    assert f"commit `{faults['commit']}`" in readme
    for tool in ("racecheck", "memcheck"):
        found = json.loads((ROOT / "benchmarks" / f"h100-sanitize-{tool}.json").read_text())
        assert found["tool"] == tool and found["findings"]
        assert report.findings_markdown(found) in readme, f"paste `gemmlab report --markdown benchmarks/h100-sanitize-{tool}.json`"


def test_readme_suite_table_is_the_committed_result():
    doc = json.loads((ROOT / "benchmarks" / "h100-suite.json").read_text())
    assert len({r["shape"] for r in doc["rows"]}) == 12 and doc["bandwidth_tbs"] > 1
    readme = (ROOT / "README.md").read_text()
    assert report.suite_markdown(doc) in readme and f"commit `{doc['commit']}`" in readme


def test_readme_occupancy_table_is_the_committed_result():
    doc = json.loads((ROOT / "benchmarks" / "h100-occupancy.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert report.occupancy_markdown(doc) in readme and f"commit `{doc['commit']}`" in readme


def test_readme_scaling_table_is_the_committed_result():
    doc = json.loads((ROOT / "benchmarks" / "h100-scaling.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert report.scaling_markdown(doc) in readme and f"commit `{doc['commit']}`" in readme


def test_readme_tensor_tables_are_the_committed_results():
    readme = (ROOT / "README.md").read_text()
    paths = sorted((ROOT / "benchmarks").glob("h100-tensor-*.json"))
    docs = {p.name: json.loads(p.read_text()) for p in paths}
    assert {f"h100-tensor-{d}-4096.json" for d in ("bf16", "fp16", "tf32")} <= set(docs)
    for name, doc in docs.items():
        assert doc["dtype"] in name and all(r["status"] == "PASS" and r["dtype"] == doc["dtype"] for r in doc["rows"])
        assert f"commit `{doc['commit']}`" in readme
        if name.endswith("-4096.json"):
            assert report.markdown(doc) in readme, f"paste `gemmlab report --markdown benchmarks/{name}`"
    sixteen = [d for d in docs.values() if d["dtype"] in ("bf16", "fp16")]
    assert report.versus_markdown(sixteen, "wgmma_ws") in readme, (
        "paste `gemmlab report --versus wgmma_ws benchmarks/h100-tensor-*16-*.json`")


def test_readme_head_to_head_tables_are_the_committed_results():
    """The speed goals' runs (benchmarks/versus.sh): each rung alone with cuBLAS, in the README as measured."""
    readme = (ROOT / "README.md").read_text()
    docs = [json.loads(p.read_text()) for p in sorted((ROOT / "benchmarks").glob("h100-versus-*.json"))]
    assert {d["dtype"] for d in docs} == {"bf16", "fp16", "tf32"} and all(d["rounds"] == 20 for d in docs)
    assert all(r["status"] == "PASS" for d in docs for r in d["rows"])
    assert report.versus_markdown([d for d in docs if d["dtype"] != "tf32"], "wgmma_ws") in readme
    assert report.versus_markdown([d for d in docs if d["dtype"] == "tf32"], "wgmma_tf32") in readme
