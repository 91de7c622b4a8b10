"""The README and docs/ stay true: their tables are the committed H100 results as `gemmlab report` and
`gemmlab explain` print them (benchmarks/README.md says which command makes which), the results say where
and when they were measured, and the README's only measured numbers are those tables and their captions."""

import json
import re

import pytest
from click.testing import CliRunner

from gemmlab.cli import cli
from conftest import ROOT

BENCH = ROOT / "benchmarks"
RESULTS = sorted(BENCH.glob("h100-compare-*.json"))
# Each ladder table, and the page it is on.
LADDER_TABLES = {"h100-compare-4096.json": "README.md", "h100-compare-1024.json": "docs/ladder.md"}


def page(name: str) -> str:
    return (ROOT / name).read_text()


def load(name: str) -> dict:
    return json.loads((BENCH / name).read_text())


def gemmlab(*args) -> str:
    """What the command prints: the tables are pasted from exactly this."""
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    out = r.stdout.rstrip("\n")
    assert out.startswith("| ") and out.count("\n") >= 2, out  # a markdown table, not nothing
    return out


def table(name: str) -> str:
    """`gemmlab report --markdown benchmarks/NAME`."""
    return gemmlab("report", "--markdown", BENCH / name)


def versus(variant: str, pattern: str) -> str:
    """`gemmlab report --versus VARIANT benchmarks/PATTERN`."""
    return gemmlab("report", "--versus", variant, *sorted(BENCH.glob(pattern)))


def stamp(doc: dict, commit: bool = True) -> str:
    """Where and when a result was measured, as the README's captions say it."""
    return f"{doc['device']['name']}, {doc['date'][:10]}" + (f", commit `{doc['commit']}`" if commit else "")


def test_results_exist_for_4096_and_1024():
    assert {p.name for p in RESULTS} >= set(LADDER_TABLES)


@pytest.mark.parametrize("name,where", LADDER_TABLES.items())
def test_ladder_tables_are_the_committed_results(name, where):
    doc = load(name)
    assert "H100" in doc["device"]["name"] and doc["date"] and doc["commit"]
    assert all(r["status"] == "PASS" for r in doc["rows"])
    text = page(where)
    assert table(name) in text, (
        f"{where}'s table for {name} differs from the file: paste `gemmlab report --markdown benchmarks/{name}`")
    assert f"commit `{doc['commit']}`" in text


def test_readme_says_where_and_when_its_ladder_was_measured():
    assert stamp(load("h100-compare-4096.json")) in page("README.md")


def test_readme_names_the_ci_test_command():
    text = page("README.md")
    after = text.split("<!-- test-command -->", 1)[1]
    assert "python3 -m pytest" in after.split("```")[1]


def test_readme_is_read_in_five_minutes():
    assert len(page("README.md").splitlines()) <= 250


def test_versus_cublas_and_predictions_are_the_committed_results():
    docs = [json.loads(p.read_text()) for p in RESULTS]
    assert all(d["commit"] == docs[0]["commit"] and all(r["status"] == "PASS" for r in d["rows"]) for d in docs)
    assert versus("spread", "h100-compare-*.json") in page("README.md"), (
        "paste `gemmlab report --versus spread benchmarks/h100-compare-*.json`")
    assert gemmlab("explain", "--results", BENCH / "h100-compare-4096.json", "--markdown") in page("docs/ladder.md"), (
        "paste `gemmlab explain --results benchmarks/h100-compare-4096.json --markdown` into docs/ladder.md")


def test_fault_and_sanitizer_tables_are_the_committed_results():
    text = page("docs/writing-a-template.md")
    faults = load("h100-faults.json")
    assert [r["status"] for r in faults["rows"]] == ["PASS", "CRASHED", "TIMEOUT", "PASS", "PASS"]
    assert table("h100-faults.json") in text, "paste `gemmlab report --markdown benchmarks/h100-faults.json`"
    assert stamp(faults) in text
    for tool in ("racecheck", "memcheck"):
        found = load(f"h100-sanitize-{tool}.json")
        assert found["tool"] == tool and found["findings"]
        assert table(f"h100-sanitize-{tool}.json") in text, (
            f"paste `gemmlab report --markdown benchmarks/h100-sanitize-{tool}.json`")


@pytest.mark.parametrize("name", ["h100-suite.json", "h100-scaling.json", "h100-occupancy.json"])
def test_journal_tables_are_the_committed_results(name):
    doc = load(name)
    if name == "h100-suite.json":
        assert len({r["shape"] for r in doc["rows"]}) == 12 and doc["bandwidth_tbs"] > 1
    text = page("docs/journal.md")
    assert table(name) in text, f"paste `gemmlab report --markdown benchmarks/{name}` into docs/journal.md"
    assert f"commit `{doc['commit']}`" in text


def test_tensor_tables_are_the_committed_results():
    text = page("docs/ladder.md")
    docs = {p.name: json.loads(p.read_text()) for p in sorted(BENCH.glob("h100-tensor-*.json"))}
    assert {f"h100-tensor-{d}-4096.json" for d in ("bf16", "fp16", "tf32")} <= set(docs)
    for name, doc in docs.items():
        assert doc["dtype"] in name and all(r["status"] == "PASS" and r["dtype"] == doc["dtype"] for r in doc["rows"])
        assert f"commit `{doc['commit']}`" in text
        if name.endswith("-4096.json"):
            assert table(name) in text, f"paste `gemmlab report --markdown benchmarks/{name}`"
    assert versus("wgmma_ws", "h100-tensor-*16-*.json") in text, (
        "paste `gemmlab report --versus wgmma_ws benchmarks/h100-tensor-*16-*.json`")


def head_to_head() -> list[str]:
    """The README's head-to-head tables of the tensor-core rungs, and their caption's round count."""
    docs = [json.loads(p.read_text()) for p in sorted(BENCH.glob("h100-versus-*.json"))]
    return [versus("wgmma_ws", "h100-versus-*16-*.json"), versus("wgmma_tf32", "h100-versus-tf32-*.json"),
            f"{docs[0]['rounds']} rounds taken in turn"] + [stamp(d, commit=False) for d in docs]


def fp8_modes() -> list[str]:
    """The README's FP8 table, one row per scaling mode and shape against cuBLASLt in the same run, and its caption."""
    docs = [json.loads(p.read_text()) for p in sorted(BENCH.glob("h100-fp8-modes/*.json"))]
    return [gemmlab("report", "--versus", "wgmma_ws_fp8", "--against", "cuBLASLt", *sorted(BENCH.glob("h100-fp8-modes/*.json"))),
            f"{docs[0]['rounds']} rounds"] + [stamp(d) for d in docs]


def test_readme_fp8_table_is_the_committed_results():
    """Issue 43's README table: every scaling mode of e4m3 at the three shapes, each file one run with cuBLASLt."""
    docs = [json.loads(p.read_text()) for p in sorted(BENCH.glob("h100-fp8-modes/*.json"))]
    assert len(docs) == 9 and {d["commit"] for d in docs} == {docs[0]["commit"]}
    assert {r["params"]["SCALE"] for d in docs for r in d["rows"] if r["variant"] == "wgmma_ws_fp8"} == {"tensor", "row", "block"}
    assert all(r["status"] == "PASS" for d in docs for r in d["rows"])
    assert all(part in page("README.md") for part in fp8_modes()), (
        "paste `gemmlab report --versus wgmma_ws_fp8 --against cuBLASLt benchmarks/h100-fp8-modes/*.json` into the README")


def test_readme_head_to_head_tables_are_the_committed_results():
    """The speed goals' runs (benchmarks/regenerate.sh versus): each rung alone with cuBLAS, in the README as measured."""
    docs = [json.loads(p.read_text()) for p in sorted(BENCH.glob("h100-versus-*.json"))]
    assert {d["dtype"] for d in docs} == {"bf16", "fp16", "tf32"} and all(d["rounds"] == 20 for d in docs)
    assert all(r["status"] == "PASS" for d in docs for r in d["rows"])
    readme = page("README.md")
    assert all(part in readme for part in head_to_head()), (
        "paste `gemmlab report --versus wgmma_ws benchmarks/h100-versus-*16-*.json` and the wgmma_tf32 one")


# The README's judgement of `auto` (issue 45): random FP32 and BF16 shapes, Llama-3's projections, the lab's 12.
SUITES = ["h100-random-fp32-88a3c05.json", "h100-random-bf16-88a3c05.json", "h100-llm-bf16-88a3c05.json",
          "h100-suite-88a3c05.json"]


def random_suites() -> list[str]:
    """The README's summary of `auto` on shapes nobody tuned for: `report --suites` over the files, and the
    caption's stamp (one run: one commit, one date)."""
    return [gemmlab("report", "--suites", *(BENCH / n for n in SUITES)), stamp(load(SUITES[0]))]


def test_readme_random_suites_are_the_committed_results():
    docs = [load(n) for n in SUITES]
    assert {d["commit"] for d in docs} == {docs[0]["commit"]} and all(d["rounds"] == 3 for d in docs)
    assert [d["suite"]["name"] for d in docs] == ["random", "random", "llm", "lab"]
    assert [d["dtype"] for d in docs] == ["fp32", "bf16", "bf16", "fp32"]
    assert all(d["command_line"].startswith("gemmlab suite ") for d in docs)  # the command that made it, in the file
    assert all(part in page("README.md") for part in random_suites()), (
        "paste `gemmlab report --suites benchmarks/" + " benchmarks/".join(SUITES) + "` into the README")


def dist_tables() -> list[str]:
    """The README's table of several GPUs, and its caption's stamp."""
    return [table("h100x4-dist-ce-16384.json"), stamp(load("h100x4-dist-ce-16384.json"))]


def test_readme_dist_table_is_the_committed_result():
    doc = load("h100x4-dist-ce-16384.json")
    assert doc["gpus"] == 4 and all(r["status"] == "PASS" for r in doc["rows"])
    assert all(part in page("README.md") for part in dist_tables()), (
        "paste `gemmlab report --markdown benchmarks/h100x4-dist-ce-16384.json` into the README")


@pytest.mark.parametrize("name", ["h100x2-dist-measure.json", "h100x2-dist-16384.json", "h100x2-dist-ring-shard.json",
                                  "h100x2-dist-ring-shard-n4096.json", "h100x4-dist-measure.json",
                                  "h100x4-dist-16384.json", "h100x4-dist-16384-2gpus.json",
                                  "h100x4-dist-ring-shard.json", "h100x4-dist-ring-shard-n4096.json",
                                  "h100x2-dist-ce-measure.json", "h100x2-dist-ce-shard.json",
                                  "h100x2-dist-ce-shard-n4096.json", "h100x2-dist-ce-16384.json",
                                  "h100x4-dist-ce-measure.json", "h100x4-dist-ce-shard.json",
                                  "h100x4-dist-ce-shard-n4096.json", "h100x4-dist-ce-16384.json"])
def test_dist_tables_are_the_committed_results(name):
    text = page("docs/dist.md")
    assert table(name) in text, f"paste `gemmlab report --markdown benchmarks/{name}` into docs/dist.md"
    assert f"commit `{load(name)['commit']}`" in text


# Numbers in the README's prose that are not measurements: Python's version, a size, the cache's default
# limit in MB, an exit status.
NOT_MEASURED = {"3.11", "1024^3", "2048", "1"}


def test_every_measured_number_in_the_readme_comes_from_a_committed_result():
    """Outside code blocks, the generated tables and their captions, the README has no numbers of its own:
    a number typed by hand would go stale when the results are measured again."""
    text = re.sub(r"```.*?```", "", page("README.md"), flags=re.S)
    generated = [table("h100-compare-4096.json"), stamp(load("h100-compare-4096.json")),
                 versus("spread", "h100-compare-*.json")] + head_to_head() + fp8_modes() + dist_tables() + random_suites() + best_rungs()
    for part in generated:
        text = text.replace(part, "")
    text = re.sub(r"\[[^\]]*\]\([^)]*\)|`[^`]*`", "", text)  # links and code name files and commands
    numbers = set(re.findall(r"(?<![\w.])\d[\w^]*(?:\.\w+)*", text)) - NOT_MEASURED
    assert not numbers, f"numbers in the README that no committed result makes: {sorted(numbers)}"


@pytest.mark.parametrize("name", LADDER_TABLES)
def test_ladder_numbers_follow_from_the_measured_times(name):
    """The ladder tables' rows, their rates worked out here from the times and the shape alone (not by
    report.markdown, which printed them): a wrong formula there cannot agree with itself here."""
    doc = json.loads((BENCH / name).read_text())
    M, N, K = (doc["shape"][k] for k in "MNK")
    peak = doc["device"]["peak_fp32_tflops"]
    cublas_ms = next(r["ms"] for r in doc["rows"] if r["variant"] == "cuBLAS")
    lines = page(LADDER_TABLES[name]).splitlines()
    prev = None
    for r in doc["rows"]:
        tflops = 2 * M * N * K / (r["ms"] * 1e-3) / 1e12
        params = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in r["params"].items()) or "-"
        x_prev = "-" if r["variant"] == "cuBLAS" or prev is None else f"{prev / r['ms']:.2f}"
        want = (f"| {r['variant']} | {params} | {r['ms']:.3f} | {tflops:.2f} | {100 * tflops / peak:.1f} | "
                f"{100 * cublas_ms / r['ms']:.1f} | {x_prev} |")
        assert want in lines, f"{LADDER_TABLES[name]} has no row {want}"
        if r["variant"] != "cuBLAS":
            prev = r["ms"]


PROBLEM_RESULTS = ["h100-problem-copy.json", "h100-problem-transpose.json", "h100-problem-reduce.json",
                   "h100-problem-scan.json", "h100-problem-histogram.json", "h100-problem-histogram-skewed.json"]


@pytest.mark.parametrize("name", PROBLEM_RESULTS)
def test_problem_tables_are_the_committed_results(name):
    """docs/problems.md: each ladder as `gemmlab report --markdown` prints its committed result."""
    doc = load(name)
    assert doc["problem"] in name and all(r["status"] == "PASS" for r in doc["rows"])
    text = page("docs/problems.md")
    assert table(name) in text, f"paste `gemmlab report --markdown benchmarks/{name}` into docs/problems.md"
    assert f"commit `{doc['commit']}`" in text and stamp(doc, commit=False).split(", ")[1] in text


def test_the_best_rung_of_each_problem_is_one_row_of_its_result():
    best = gemmlab("report", "--best", *(BENCH / n for n in PROBLEM_RESULTS)).splitlines()
    assert best[0] == "| problem | size | best rung | ms | GB/s | % of copy | x cupy |" and len(best) == 2 + len(PROBLEM_RESULTS)
    transpose = load("h100-problem-transpose.json")  # its fastest rung, taken from the file, not typed here
    fastest = min((r for r in transpose["rows"] if r["variant"] != "cupy"), key=lambda r: r["ms"])
    assert best[3].startswith(f"| transpose | 16384 x 16384 | {fastest['variant']} | {fastest['ms']:.3f} | ")
    assert best[-1].startswith("| histogram (skewed) | n = 268,435,456 | shared_atomic |")


def test_pcie_and_transpose_profile_tables_are_the_committed_results():
    """docs/problems.md: `gemmlab report --markdown` of the pcie result and of the two transpose profiles."""
    text = page("docs/problems.md")
    pcie = load("h100-pcie.json")
    assert pcie["link"]["rate_gbs"] and {(p["direction"], p["memory"]) for p in pcie["plateau"]} == {
        (d, m) for d in ("H2D", "D2H") for m in ("pageable", "pinned")}
    assert table("h100-pcie.json") in text, "paste `gemmlab report --markdown benchmarks/h100-pcie.json` into docs/problems.md"
    pinned = [p for p in pcie["plateau"] if p["memory"] == "pinned"]
    assert all(f"{p['pct_link']:.1f}%" in text for p in pinned)  # the goal's verdict quotes the plateau
    profiles = [BENCH / f"h100-profile-transpose-{v}.json" for v in ("smem_tile", "padded_tile")]
    assert gemmlab("report", "--markdown", *profiles) in text, (
        "paste `gemmlab report --markdown` of the two transpose profiles into docs/problems.md")
    for doc in [pcie] + [json.loads(p.read_text()) for p in profiles]:
        assert f"commit `{doc['commit']}`" in text and doc["date"][:10] in text


README_PROBLEMS = PROBLEM_RESULTS[1:]  # copy is the yardstick: its row is in docs/problems.md


def best_rungs() -> list[str]:
    """The README's table of each problem's fastest rung, and its caption's stamp."""
    return [gemmlab("report", "--best", *(BENCH / n for n in README_PROBLEMS)), stamp(load(README_PROBLEMS[0]))]


def test_readme_best_rungs_are_the_committed_results():
    assert len({load(n)["commit"] for n in README_PROBLEMS}) == 1  # one run, one stamp
    assert all(part in page("README.md") for part in best_rungs()), (
        "paste `gemmlab report --best` of benchmarks/h100-problem-{transpose,reduce,scan,histogram,histogram-skewed}.json")
