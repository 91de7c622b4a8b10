"""A new user's first hour, without a GPU: every step of the README works, every table reads at 80, 120
and 200 columns, and every error is one message (issue: "a new user's first hour")."""

import json
import re
import subprocess
import sys
import tomllib

import pytest

from gemmlab import suites
from gemmlab.present import lab_tables, markdown, tables

from gemmlab.results import records
from gemmlab.results.model import Result, Shape
from gemmlab.templates import builtin_dir
from conftest import ROOT


# ---------------------------------------------------------------------------- results hold no machine paths

def test_result_rows_name_templates_without_this_machines_directories(tmp_path, monkeypatch):
    builtin = records.row(Result("naive", {}, Shape(8, 8, 8), source=str(builtin_dir() / "fp32/01_naive.cu.j2")), 1e12)
    assert builtin["source"] == "kernels/fp32/01_naive.cu.j2"
    example = records.row(Result("oob", {}, Shape(8, 8, 8), source=str(ROOT / "examples/broken/oob.cu.j2")), 1e12)
    assert example["source"] == "examples/broken/oob.cu.j2"
    mine = tmp_path / "elsewhere" / "mytiled.cu.j2"
    monkeypatch.chdir(ROOT)
    assert records.row(Result("mytiled", {}, Shape(8, 8, 8), source=str(mine)), 1e12)["source"] == "mytiled.cu.j2"
    assert records.row(Result("cuBLAS", {}, Shape(8, 8, 8), source="cupy.matmul"), 1e12)["source"] == "cupy.matmul"


def test_result_files_carry_the_command_line_that_made_them():
    import click
    from click.testing import CliRunner
    from gemmlab.cli.common import Cli
    seen = []
    group = Cli()

    @group.command()
    @click.option("--shapes")
    def probe(shapes):
        seen.append(records.meta("probe"))

    assert CliRunner().invoke(group, ["probe", "--shapes", "my model.toml"]).exit_code == 0
    assert seen[0]["command_line"] == "gemmlab probe --shapes 'my model.toml'"
    elsewhere = "/nowhere/of/ours/llm.toml"  # this machine's directories stay out of a file that gets shared
    assert CliRunner().invoke(group, ["probe", "--shapes", elsewhere]).exit_code == 0
    assert CliRunner().invoke(group, ["probe", f"--shapes={ROOT / 'kernels/shapes/llm.toml'}"]).exit_code == 0
    assert seen[1]["command_line"] == "gemmlab probe --shapes llm.toml"
    assert seen[2]["command_line"].startswith("gemmlab probe --shapes=") and "=/" not in seen[2]["command_line"]
    assert "command_line" not in records.meta("api")  # a later Python call is not that command

def test_committed_results_hold_no_absolute_paths():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.json"], capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    for name in tracked:
        text = (ROOT / name).read_text()
        found = re.findall(r'"(?:source|template)": "(/[^"]*)"', text)
        assert not found, f"{name} holds this machine's paths: {found[:2]}"


# ---------------------------------------------------------------------------- license and metadata

def test_the_project_says_its_license_and_authors():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert project["authors"] and all(a.get("name") for a in project["authors"])
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    # The SPDX license string needs setuptools 77; the test extra brings it, so that the wheel-building
    # install test runs (and is not skipped) in a fresh `python3 -m venv`, whose setuptools is older.
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in meta["build-system"]["requires"])
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in project["optional-dependencies"]["test"])


def test_ci_installs_as_the_readme_says_and_lets_no_cpu_test_skip():
    """CI upgraded pip and setuptools before the README's command, so it never saw a fresh venv's
    setuptools 65 skip the install test."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "--upgrade" not in ci and "python3 -m venv" in ci
    assert "a reason other than a missing GPU" in ci


# ---------------------------------------------------------------------------- tables read at 80, 120 and 200 columns

def _doc(name):
    return json.loads((ROOT / "benchmarks" / name).read_text())


def _tables():
    """(name, table) for every table gemmlab prints, filled from committed results where there are some."""
    from gemmlab import catalog
    compare = _doc("h100-compare-4096.json")
    history = [{"id": i, "time": "2026-11-23T10:00:00.123456+00:00", "command": "compare", "variant": r["variant"],
                "params": r["params"], "M": 4096, "N": 4096, "K": 4096, "status": r["status"], "ms": r["ms"],
                "tflops": r["tflops"], "source_hash": "0123456789abcdef", "device": "NVIDIA H100 80GB HBM3",
                "commit_id": "3b8026dea382-dirty"} for i, r in enumerate(compare["rows"], 1)]
    build = [{"variant": r["variant"], "params": r["params"], "arch": "sm_90", "registers": 255, "smem": 98304,
              "stack": 0, "spills": 8 * (i % 2), "compile_ms": 1234.5, "cached": i % 3 == 0, "result": "ok"}
             for i, r in enumerate(compare["rows"][:-1])]
    build.append({"variant": "typo", "params": {"TILE": 16}, "arch": "sm_90", "result": "FAIL", "error": "x"})
    cat = catalog((ROOT / "examples" / "kernels",))
    resources = dict(variant="wgmma", params={"DTYPE": "bf16", "BM": 128}, arch="sm_90a", threads=384,
                     registers=168, smem=0, stack=0, spill_stores=0, spill_loads=0, barriers=1,
                     compile_ms=812.0, cached=False)
    yield "compare", tables.results_table(compare["rows"], tables.title_for(compare), speedups=True)
    faults = _doc("h100-faults.json")
    yield "faults", tables.results_table(faults["rows"], tables.title_for(faults), speedups=True)
    bf16 = _doc("h100-tensor-bf16-4096.json")
    yield "bf16", tables.results_table(bf16["rows"], tables.title_for(bf16), speedups=True)
    yield "suite", lab_tables.suite_table(_doc("h100-suite.json"))
    scan = _doc("h100-problem-scan.json")  # its 2^28 rows as `suite --problem scan` shows them
    rows = [suites.annotate_problem(dict(r), suites.Entry(Shape(1, 1 << 28, 1)), "scan") for r in scan["rows"]]
    yield "problem suite", lab_tables.suite_table(dict(scan, command="suite", suite={"name": "scan"}, rows=rows))
    yield "problem summary", lab_tables.suite_summary_table(dict(scan, summary=suites.summary(rows)))
    yield "scaling", lab_tables.scaling_table(_doc("h100-scaling.json"))
    yield "occupancy", lab_tables.occupancy_table(_doc("h100-occupancy.json"))
    yield "sanitize", tables.findings_table(_doc("h100-sanitize-racecheck.json"))
    yield "profile", lab_tables.profile_table(_doc("h100-profile-pipelined.json"))
    yield "device", tables.device_table(_doc("h100-device.json"))
    yield "history", tables.history_table(history, "last 20 runs")
    yield "build", tables.build_table(build, "sm_90")
    yield "build-summary", tables.build_summary_table(build * 40, "sm_90")
    yield "list", tables.variants_table(cat.ladder(), cat.broken, "gemmlab variants (ladder order)")
    yield "explain", tables.explain_table(markdown.predictions(cat.ladder(), compare), "h100-compare-4096.json")
    yield "resources", tables.resources_table(resources)


TABLES = list(_tables())


@pytest.mark.parametrize("width", [80, 120, 200])
@pytest.mark.parametrize("name,table", TABLES, ids=[n for n, _ in TABLES])
def test_every_table_reads_at_the_common_widths(name, table, width):
    import io
    from rich.console import Console
    console = Console(width=width, file=io.StringIO(), record=True, highlight=False)
    console.print(table)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text and "..." not in text, f"a cell was cut at {width} columns:\n{text}"
    shown, widths = table.layout(width)
    headers = [table.columns[j] for j in shown]
    assert any(c.priority == 0 for c in headers) and all(
        c in headers for c in table.columns if c.priority == 0), "a column that is always shown was left out"
    for row in table.cells:  # a number, a status or a name (every column that is not wrapped) reads whole
        for j in shown:
            for part in row[j].plain.split("\n") if not table.columns[j].wrap else ():
                assert any(part in line for line in lines), f"{part!r} is not whole at {width}"
    if len(shown) < len(table.columns):
        assert "--wide shows every column" in " ".join(text.split())  # the caption says what is left out
    if width == 200 and name in ("compare", "suite", "history"):
        assert len(shown) >= len(table.columns) - 2  # at 200 almost everything fits


def test_tables_fit_the_terminal_and_wide_shows_every_column():
    from click.testing import CliRunner
    from gemmlab.cli import cli
    f = ROOT / "benchmarks" / "h100-compare-4096.json"
    narrow = CliRunner().invoke(cli, ["report", str(f)], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0 and max(map(len, narrow.output.splitlines())) <= 80
    naive_ms = f"{json.loads(f.read_text())['rows'][0]['ms']:.3f}"  # the first row's time, read in full
    assert naive_ms in narrow.output and "…" not in narrow.output
    wide = CliRunner().invoke(cli, ["report", "--wide", str(f)], env={"COLUMNS": "80"})
    assert wide.exit_code == 0 and max(map(len, wide.output.splitlines())) > 200
    for header in ("compile ms", "blocks / SM", "spills", "rel err", "x first"):
        assert header in wide.output


def test_list_header_shows_its_brackets():
    from click.testing import CliRunner
    from gemmlab.cli import cli
    r = CliRunner().invoke(cli, ["list"])
    assert "parameters (default [choices])" in r.output and "TILE=32 [8, 16, 32]" in r.output


# ---------------------------------------------------------------------------- errors: one line each

def invoke(*args, env=None):
    from click.testing import CliRunner
    from gemmlab.cli import cli
    r = CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=True)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


COMPARE = ROOT / "benchmarks" / "h100-compare-4096.json"


@pytest.mark.parametrize("args,message", [
    (["show", "--variant", "tiled", "--tile", "16", "-p", "TILE=32"], "--tile 16 and -p TILE=32 disagree"),
    (["show", "--variant", "tiled", "-p", "TILE=16", "-p", "TILE=32"], "-p TILE=16 and -p TILE=32 disagree"),
    (["explain", "--markdown", "--json"], "do not go together"),
    (["report", "--markdown", "--csv", COMPARE], "do not go together"),
    (["report", "--versus", "tiled", "--json", COMPARE], "does not go with --json"),
    (["compare", "--variants", ""], "--variants takes names separated by commas"),
    (["compare", "--variants", "tiled,,naive"], "--variants takes names separated by commas"),
    (["suite", "--variants", "auto,"], "--variants takes names separated by commas"),
    (["scaling", "--sizes", "256,,512"], "--sizes takes names separated by commas"),
    (["history", "--where", "--variant", "tiled"], "takes no --variant"),
    (["show", "--variant", "tiled", "--csv"], "--csv is for --what resources"),
    (["report", "--versus", "nosuch", COMPARE], "no file has a row of nosuch"),
])
def test_conflicting_options_are_refused_in_one_message(args, message):
    r = invoke(*args)
    assert r.exit_code == 1 and message in r.output, r.output
    assert r.output.count("error:") == 1 and len(r.output.strip().splitlines()) <= 2  # the message and a hint


def test_the_same_value_twice_is_no_conflict_and_json_is_honoured():
    r = invoke("show", "--variant", "tiled", "--tile", "16", "-p", "TILE=16")
    assert r.exit_code == 0 and "As[16][16]" in r.output
    doc = json.loads(invoke("show", "--variant", "tiled", "--json").output)
    assert doc["variant"] == "tiled" and "__global__" in doc["text"]
    ptx = json.loads(invoke("show", "--variant", "tiled", "--what", "ptx", "--arch", "sm_90", "--json").output)
    assert ptx["arch"] == "sm_90" and ".entry gemm" in ptx["text"]
    where = json.loads(invoke("history", "--where", "--json").output)
    assert where["history"].endswith("history.sqlite")


@pytest.mark.parametrize("args", [["run", "--variant", "tiled", "--size", "0"], ["bogus"], ["list", "--nosuch"],
                                  ["run"], ["--nosuch"]])
def test_usage_errors_are_one_line_and_the_readme_says_so(args):
    r = invoke(*args)
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "--help" in lines[0], r.output
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "gives one message and exit status `2`" in readme


def test_show_resources_names_the_target_it_built():
    r = invoke("show", "--variant", "wgmma", "--what", "resources", "--arch", "sm_90", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["arch"] == "sm_90a"
    table = invoke("show", "--variant", "wgmma", "--what", "resources", "--arch", "sm_90")
    assert "for sm_90a" in table.output


def test_list_json_includes_the_broken_templates(user_dir):
    from conftest import GOOD_BODY, write_template
    write_template(user_dir, "nohead", GOOD_BODY).write_text("no header at all")
    data = json.loads(invoke("list", "--json", "--kernels-dir", user_dir).output)
    broken = [d for d in data if d["broken"]]
    assert [d["name"] for d in broken] == ["nohead"] and broken[0]["error"]
    assert "nohead" in invoke("list", "--csv", "--kernels-dir", user_dir).output


@pytest.mark.parametrize("name,needle", [("h100-device.json", "NVIDIA H100 80GB HBM3"),
                                         ("h100-profile-pipelined.json", "not_selected")])
def test_report_shows_the_device_and_profile_files_gemmlab_wrote(name, needle):
    f = ROOT / "benchmarks" / name
    r = invoke("report", f)
    assert r.exit_code == 0 and needle in r.output
    rows = json.loads(invoke("report", "--json", f).output)
    assert rows


def test_no_driver_is_said_in_words(monkeypatch):
    from gemmlab.gpu import driver as device
    monkeypatch.setattr(device, "_driver_version", lambda: None)
    e = Exception("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")
    assert device._why_no_cuda(e) == "no NVIDIA driver found (libcuda.so.1 cannot be loaded)"
    monkeypatch.setattr(device, "_driver_version", lambda: 12040)
    assert "supports CUDA up to 12.4" in device._why_no_cuda(e)
    assert "sees no GPU" in device._why_no_cuda(Exception("cudaErrorNoDevice: no CUDA-capable device"))


# ---------------------------------------------------------------------------- places that cannot be written

def _unwritable(tmp_path):
    """A directory this process cannot write in: read-only for a user; /proc for root, whom modes do not stop."""
    import os
    if os.geteuid() == 0:
        return "/proc"
    d = tmp_path / "read-only"
    d.mkdir()
    d.chmod(0o555)
    return str(d)


def test_new_into_a_place_that_cannot_be_written_says_so(tmp_path):
    r = invoke("new", "mytiled", "--from", "tiled", "--dir", _unwritable(tmp_path))
    assert r.exit_code == 1 and "cannot write" in r.output and "--dir" in r.output
    r = invoke("new", "mytiled", "--from", "tiled", "--dir", "/proc/no/such")
    assert r.exit_code == 1 and "cannot write" in r.output
    r = invoke("new", "mytiled", "--from", "tiled", env={"XDG_DATA_HOME": "/proc/gemmlab-data"})
    assert r.exit_code == 1 and "cannot write" in r.output


@pytest.mark.parametrize("args", [["run", "--variant", "tiled"], ["compare", "--variants", "tiled"],
                                  ["sweep", "--variant", "tiled", "--param", "TILE=8,16"], ["suite"]])
def test_out_is_checked_before_anything_runs(tmp_path, args):
    r = invoke(*args, "--out", f"{_unwritable(tmp_path)}/results.json")
    assert r.exit_code == 1 and "--out" in r.output and "cannot write" in r.output and "GPU" not in r.output


# ---------------------------------------------------------------------------- every hint is a command that works

def test_the_compile_error_hint_is_a_command_that_works(tmp_path):
    import shlex
    from conftest import GOOD_BODY, write_template
    mine = tmp_path / "my kernels"
    mine.mkdir()
    write_template(mine, "typo", GOOD_BODY.replace("acc += A[", "acc += AA["))
    r = invoke("show", "--variant", "typo", "-p", "TILE=8", "--what", "resources", "--arch", "sm_90",
               "--kernels-dir", mine)
    assert r.exit_code == 1
    hint = next(line for line in r.output.splitlines() if "see the rendered source:" in line)
    command = shlex.split(hint.split("see the rendered source:", 1)[1])
    assert command[:2] == ["gemmlab", "show"] and "--kernels-dir" in command and "TILE=8" in command
    again = invoke(*command[1:])
    assert again.exit_code == 0 and "gemmlab variant typo" in again.output and "TILE=8" in again.output


def test_new_prints_commands_that_find_the_template(tmp_path):
    mine = tmp_path / "my kernels"
    r = invoke("new", "mytiled", "--from", "tiled", "--dir", mine)
    assert r.exit_code == 0, r.output
    import shlex
    line = next(line for line in r.output.splitlines() if "gemmlab compare" in line)
    command = shlex.split(line.split(":", 1)[1])
    assert command[:2] == ["gemmlab", "compare"] and str(mine) in command
    shown = invoke("show", *command[command.index("--kernels-dir"):], "--variant", "mytiled")
    assert shown.exit_code == 0 and "gemmlab variant mytiled" in shown.output


# ---------------------------------------------------------------------------- run --watch without a GPU

def test_watch_without_a_gpu_stops_with_the_error():
    from conftest import gpu_available
    if gpu_available():
        pytest.skip("checks the machine without a GPU")
    try:
        p = subprocess.run([sys.executable, "-m", "gemmlab", "run", "--variant", "tiled", "--watch"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("run --watch without a GPU waited instead of stopping")
    assert p.returncode == 1 and "no CUDA GPU" in p.stderr and "watching" not in p.stderr


# ---------------------------------------------------------------------------- the API tour

def test_the_api_tour_renders_and_compiles_without_a_gpu(tmp_path):
    from conftest import gpu_available
    size = ["--size", "256"]
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "api_tour.py"), *size], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "rendered" in p.stdout and "registers" in p.stdout
    if not gpu_available():
        assert "running it needs an NVIDIA GPU" in p.stdout
    else:
        assert "check: PASS" in p.stdout


# ---------------------------------------------------------------------------- long builds and the cache

def _many_configs(directory, n=600):
    """A template with n valid configurations (no constraints), cheap to count."""
    from conftest import GOOD_BODY, write_template
    extra = "[params.X]\ndefault = 0\nchoices = [" + ", ".join(map(str, range(n // 2))) + "]\n"
    return write_template(directory, "many", GOOD_BODY, header_extra=extra)


def test_a_large_build_says_how_many_and_asks_for_a_limit(user_dir):
    _many_configs(user_dir)
    r = invoke("build", "--variant", "many", "--all-configs", "--arch", "sm_90", "--kernels-dir", user_dir)
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "600 configurations" in text and "up to about" in text and "--limit N" in text and "--yes" in text


def test_limit_takes_each_variants_defaults_first_and_variant_takes_a_list():
    from gemmlab import catalog
    r = invoke("build", "--variant", "tiled,regblock", "--all-configs", "--limit", "4", "--arch", "sm_90", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output[r.output.index("{"):])["rows"]
    cat = catalog()
    assert [x["variant"] for x in rows] == ["tiled", "tiled", "regblock", "regblock"]
    assert rows[0]["params"] == cat.get("tiled").defaults() and rows[2]["params"] == cat.get("regblock").defaults()
    again = invoke("build", "--variant", "tiled", "--variant", "regblock", "--arch", "sm_90", "--json")
    assert [x["variant"] for x in json.loads(again.output[again.output.index("{"):])["rows"]] == ["tiled", "regblock"]


def test_build_compiles_in_parallel_and_says_so_first(tmp_path, monkeypatch):
    # tiled's 6 configurations, in a cache of their own: compiled here, 2 processes at a time (regblock's
    # 21 took 8 s of CPU more, for the same code path; test_cli builds those in the shared cache)
    from gemmlab.cli import inspect as cli_module
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path / "cache"))
    r = invoke("build", "--variant", "tiled", "--all-configs", "--arch", "sm_90", "--jobs", "2")
    assert r.exit_code == 0, r.output
    assert "6 configurations of 1 variant for sm_90, 2 at a time: up to about" in " ".join(r.output.split())
    assert r.output.count(" ok ") == 6
    stats = json.loads(invoke("cache", "--json").output)
    assert stats["entries"] == 6 and stats["bytes"] > 0 and stats["directory"] == str(tmp_path / "cache")
    monkeypatch.setattr(cli_module, "BUILD_TABLE_ROWS", 5)  # a large build: one line per variant
    summary = invoke("build", "--variant", "tiled", "--all-configs", "--arch", "sm_90")
    assert summary.exit_code == 0 and "6 configurations, one row per variant" in summary.output
    assert summary.output.count("tiled") == 1 and "6" in summary.output


def test_cache_clear_and_the_size_limit(tmp_path, monkeypatch):
    import os
    import time
    from gemmlab import cache as comp
    d = tmp_path / "cache"
    d.mkdir()
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(d))
    now = time.time()
    for i in range(10):  # ten entries of 100 KiB + 1 KiB, entry 0 the least recently used
        (d / f"k{i}.cubin").write_bytes(b"x" * 100 * 1024)
        (d / f"k{i}.json").write_bytes(b"{" + b" " * 1022 + b"}")
        os.utime(d / f"k{i}.json", (now - 100 + i, now - 100 + i))
    (d / "mine.txt").write_text("not the cache's")
    monkeypatch.setenv("GEMMLAB_CACHE_MAX_MB", str(500 / 1024))  # 500 KiB
    removed, _ = comp.prune_cache()
    left = sorted(p.stem for p in d.glob("*.cubin"))
    assert removed == 6 and left == ["k6", "k7", "k8", "k9"]  # under 90% of the limit, the newest kept
    r = invoke("cache")
    assert r.exit_code == 0 and str(d) in r.output and "GEMMLAB_CACHE_MAX_MB" in r.output
    cleared = json.loads(invoke("cache", "--clear", "--json").output)
    assert cleared["cleared_entries"] == 4 and not list(d.glob("*.cubin")) and (d / "mine.txt").exists()
    monkeypatch.setenv("GEMMLAB_CACHE_MAX_MB", "lots")
    assert "size in MB" in invoke("cache").output
