"""docs/adding-a-rung.md is true: the rung it writes, taken from the page itself, goes into a directory of
its own and is listed after its parent, built for sm_90, and run on the CPU (tests/emulate/) on odd
shapes, with no other change to gemmlab or its tests."""

import json

import pytest
from click.testing import CliRunner

import gemmlab
from gemmlab.cli import cli
from conftest import ROOT
from test_emulated import SHAPES, emulate

DOC = ROOT / "docs" / "adding-a-rung.md"
MARK = "<!-- adding-a-rung template -->"


def template() -> str:
    """The template the page shows: the ```cuda block right after its marker."""
    after = DOC.read_text().split(MARK, 1)[1]
    assert after.lstrip().startswith("```cuda\n"), f"{DOC.name}: a ```cuda block must follow {MARK}"
    return after.split("```cuda\n", 1)[1].split("\n```", 1)[0] + "\n"


@pytest.fixture
def rung_dir(tmp_path):
    d = tmp_path / "my-kernels"
    d.mkdir()
    (d / "tiled2.cu.j2").write_text(template())
    return d


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout  # (stderr has the progress lines)


def test_the_new_rung_is_listed_after_its_parent(rung_dir):
    rows = json.loads(invoke("list", "--kernels-dir", rung_dir, "--json"))
    names = [r["name"] for r in rows]
    assert "tiled2" in names and names.index("tiled2") > names.index("tiled")
    mine = rows[names.index("tiled2")]
    assert mine["parent"] == "tiled" and mine["params"]["TILE"]["choices"] == [8, 16, 32]
    v = gemmlab.catalog((rung_dir,)).get("tiled2")
    assert not v.builtin and v.predict_x == 1.2


def test_the_new_rung_builds_for_sm_90(rung_dir):
    rows = json.loads(invoke("build", "--arch", "sm_90", "--kernels-dir", rung_dir, "--variant", "tiled2",
                             "--all-configs", "--json"))["rows"]
    assert sorted(r["params"]["TILE"] for r in rows) == [8, 16, 32]
    assert all(r["result"] == "ok" and r["spills"] == 0 for r in rows), rows


def test_a_value_that_breaks_the_constraint_is_refused_with_its_reason(rung_dir):
    r = CliRunner().invoke(cli, ["show", "--kernels-dir", str(rung_dir), "--variant", "tiled2", "-p", "TILE=64"])
    assert r.exit_code == 1 and "a block holds at most MAX_THREADS threads [THREADS = 4096, MAX_THREADS = 1024]" in r.output


@pytest.mark.parametrize("tile", [8, 32])
def test_the_new_rung_computes_the_product_on_the_cpu(tmp_path, rung_dir, tile):
    v = gemmlab.catalog((rung_dir,)).get("tiled2")
    for shape, (err, unwritten) in emulate(tmp_path, v, v.resolve({"TILE": tile}), SHAPES).items():
        assert unwritten == 0, f"tiled2 TILE={tile} {shape}: {unwritten} elements of C not written"
        assert err < 1e-5, f"tiled2 TILE={tile} {shape}: relative error {err:.2e}"


def test_the_emulator_would_catch_a_wrong_new_rung(tmp_path, rung_dir):
    """The second output's column one tile short: the check above must be able to fail."""
    bug = ("col1 = col0 + {{ TILE }}", "col1 = col0 + {{ TILE }} - 1")
    (rung_dir / "tiled2.cu.j2").write_text(template().replace(*bug))
    v = gemmlab.catalog((rung_dir,)).get("tiled2")
    (err, unwritten), = emulate(tmp_path, v, v.defaults(), [(17, 70, 65)]).values()
    assert err > 1e-3 or unwritten > 0
