"""The Python API is the CLI's own functions: gemmlab.run, compare, sweep, suite, scaling, show and
history, returning ResultSets. Run on a CPU through tests/handlers.py:FakeGpu (the `fake_gpu` fixture),
a real worker process included: the same rows as the CLI, records, the table, the command that
measures it again, and the CLI's error messages."""

import json
import shlex

import pytest

import gemmlab
from conftest import GOOD_BODY, write_template
from gemmlab import GemmlabError, ResultSet
from test_cli import invoke


def strip_run(doc):
    """A run's document without what differs between two runs of the same thing."""
    out = {k: v for k, v in doc.items() if k not in ("date", "rows", "command_line")}  # the CLI's alone says it
    out["rows"] = [{k: v for k, v in r.items() if k not in ("vs_last", "vs_last_text", "changed", "vs_last_noise",
                                                           "outside_noise", "compile_ms", "cached")}
                   for r in doc["rows"]]
    return out


def test_run_gives_the_rows_the_cli_gives(fake_gpu):
    rs = gemmlab.run("tiled", {"TILE": 16}, 64, seed=5, progress=False)
    assert isinstance(rs, ResultSet) and rs.command == "run" and rs.device == "Fake H100"
    assert [r["variant"] for r in rs] == ["tiled", "cuBLAS"] and len(rs) == 2
    assert rs[0]["params"] == {"TILE": 16, "PREFETCH": True} and rs[0]["status"] == "PASS" and rs[0]["ms"] == 1.0
    assert rs.exit_status == 0 and rs.failures == () and not rs.interrupted
    assert rs.reproduce == ("gemmlab run --variant tiled -p TILE=16 -p PREFETCH=true -M 64 -N 64 -K 64 --dtype fp32 "
                            "--reps 10 --seed 5")
    cli = invoke(*shlex.split(rs.reproduce)[1:], "--json")
    assert cli.exit_code == 0, cli.output
    assert strip_run(json.loads(cli.stdout)) == strip_run(rs.to_json())


def test_a_result_set_is_read_only_and_its_records_are_copies(fake_gpu):
    rs = gemmlab.run("tiled", {"TILE": 8}, (64, 32, 16), seed=1, progress=False)
    with pytest.raises(TypeError):
        rs[0]["ms"] = 0.0
    with pytest.raises(TypeError):
        rs[0]["params"]["TILE"] = 32
    rows = rs.to_dicts()
    rows[0]["ms"] = 0.0
    rows[0]["params"]["TILE"] = 32
    assert rs[0]["ms"] == 1.0 and rs[0]["params"]["TILE"] == 8
    assert rs.meta["shape"] == {"M": 64, "N": 32, "K": 16}
    doc = rs.to_json()
    assert set(doc) == set(rs.meta) | {"rows"} and json.loads(json.dumps(doc)) == doc


def test_a_result_set_shows_as_the_clis_table_in_html_and_in_rich(fake_gpu):
    from rich.console import Console
    rs = gemmlab.compare(["naive", "tiled"], 64, seed=3, progress=False)
    html = rs._repr_html_()
    assert html.startswith("<pre") and "naive" in html and "tiled" in html and "x prev" in html
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    console.print(rs)
    text = console.export_text()
    assert "compare 64x64x64 on Fake H100" in text and "cuBLAS" in text and "PASS" in text
    assert "compare: 3 rows on Fake H100, all passed" in repr(rs)


def test_compare_and_sweep_match_their_commands(fake_gpu, user_dir):
    rs = gemmlab.compare(["naive", "tiled"], 64, seed=3, progress=False)
    assert [r["variant"] for r in rs] == ["naive", "tiled", "cuBLAS"] and rs[1]["speedup_prev"] is not None
    assert rs.reproduce.startswith("gemmlab compare --variants naive,tiled -M 64")
    write_template(user_dir, "swept", GOOD_BODY)
    rs = gemmlab.sweep("swept", {"TILE": [8, 16]}, 64, kernels_dirs=(user_dir,), seed=2, progress=False)
    swept = [r for r in rs if r["variant"] == "swept"]
    assert rs.command == "sweep" and sorted(r["params"]["TILE"] for r in swept) == [8, 16]
    assert [r["ms"] for r in swept] == sorted(r["ms"] for r in swept)  # fastest first
    assert rs.meta["swept"] == ("TILE",) and rs.reproduce.split("--param ")[1].startswith("TILE=8,16")
    again = gemmlab.sweep("swept", ["TILE=8..16:8"], 64, kernels_dirs=(user_dir,), seed=2, progress=False)
    assert {r["reference"] for r in again if r["variant"] == "swept"} == {"history"}  # reused, not measured


def test_suite_and_scaling(fake_gpu):
    rs = gemmlab.suite(["tiled"], only=["256x256x256"], seed=1, progress=False)
    assert rs.command == "suite" and {r["shape"] for r in rs} == {"256x256x256"} and "pct_bound" in rs[0]
    assert rs.reproduce == "gemmlab suite --variants tiled --only 256x256x256 --dtype fp32 --reps 10 --seed 1"
    rs = gemmlab.scaling(["tiled"], [64, 32], progress=False)
    assert [r["size"] for r in rs if r["variant"] == "tiled"] == [32, 64]


def test_show_and_history_need_no_gpu(tmp_path):
    source = gemmlab.show("tiled", {"TILE": 8})
    assert "__global__" in source and source != gemmlab.show("tiled", {"TILE": 32})
    assert source.rstrip("\n") == invoke("show", "--variant", "tiled", "--tile", 8).stdout.rstrip("\n")
    assert gemmlab.history() == []


@pytest.mark.parametrize("call, message", [
    (lambda: gemmlab.run("nosuch", shape=64, progress=False), "unknown variant 'nosuch'"),
    (lambda: gemmlab.run("tiled", {"TILE": 7}, 64, progress=False), "TILE=7 is not allowed"),
    (lambda: gemmlab.run("auto", {"TILE": 8}, 64, progress=False), "--variant auto chooses the parameters itself"),
    (lambda: gemmlab.run("tiled", shape=(64, 0, 64), progress=False), "N must be a positive integer, not 0"),
    (lambda: gemmlab.run("tiled", shape="big", progress=False), "a shape is n, \\(M, N, K\\)"),
    (lambda: gemmlab.run("tiled", shape=64, reps=0, progress=False), "reps must be a positive integer, not 0"),
    (lambda: gemmlab.run("tiled", shape=64, check="fp16", progress=False), "check is 'cupy' or 'fp64'"),
    (lambda: gemmlab.compare([], 64, progress=False), "no variants to compare"),
    (lambda: gemmlab.sweep("tiled", {"DTYPE": ["fp32"]}, 64, progress=False), "a sweep runs one input type"),
    (lambda: gemmlab.sweep("tiled", {"TILE": 8}, 64, progress=False), "the grid's TILE takes a list"),
    (lambda: gemmlab.sweep("tiled", {"TILE": [64]}, 64, progress=False), "no point of the grid satisfies"),
    (lambda: gemmlab.suite(["tiled"], only=["1x2x3"], progress=False), "--only names shapes that are not"),
    (lambda: gemmlab.scaling(["tiled"], [0], progress=False), "sizes must be positive integers"),
    (lambda: gemmlab.show("tiled", what="cubin"), "what is source, ptx, sass or resources"),
])
def test_bad_input_raises_the_clis_message(call, message):
    with pytest.raises(GemmlabError, match=message):
        call()


def test_the_same_mistake_gives_the_same_line_in_the_cli():
    with pytest.raises(GemmlabError) as e:
        gemmlab.run("tiled", {"TILE": 7}, 64, progress=False)
    cli = invoke("run", "--variant", "tiled", "--tile", 7, "--size", 64)
    words = lambda text: text.split()  # noqa: E731 (the terminal may end a line where the message has a space)
    assert cli.exit_code == 1 and words(cli.stderr)[:len(words(e.value.message)) + 1] == words(f"error: {e.value.message}")


def test_an_out_file_that_exists_is_refused_before_any_work(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("mine")
    with pytest.raises(GemmlabError, match="already exists; gemmlab does not overwrite it"):
        gemmlab.run("tiled", shape=64, out=out, progress=False)
    assert out.read_text() == "mine"


def test_to_pandas_says_what_it_needs(fake_gpu, monkeypatch):
    import sys
    rs = gemmlab.run("tiled", {"TILE": 8}, 64, seed=1, progress=False, record=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(GemmlabError, match="to_pandas\\(\\) needs pandas"):
        rs.to_pandas()
    assert gemmlab.history() == []  # record=False: nothing went into the history


def test_every_example_in_docs_api_md_runs(fake_gpu, capsys):
    """docs/api.md stays true: its Python blocks run, in order, in one namespace (the stand-in GPU)."""
    import re
    from conftest import ROOT
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), flags=re.S)
    assert len(blocks) >= 5
    namespace = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "gemmlab run --variant tiled -p TILE=32" in printed and "PASS" in printed
    assert "TILE=7 is not allowed" in printed and "gemm" in printed
