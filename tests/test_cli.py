"""The command line through click's runner, without a GPU: help, list, show, build, new, report, errors."""

import json

import pytest
from click.testing import CliRunner

from gemmlab.cli import cli
from conftest import GOOD_BODY, ROOT, gpu_available, write_template


def invoke(*args, env=None):
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=True)
    # No path may end in a Python traceback: a user sees one message and an exit status.
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.mark.parametrize("cmd", [[], ["list"], ["run"], ["compare"], ["show"], ["build"], ["device"],
                                 ["new"], ["report"], ["explain"], ["history"], ["sweep"], ["suite"],
                                 ["scaling"], ["occupancy"], ["profile"]])
def test_help(cmd):
    r = invoke(*cmd, "--help")
    assert r.exit_code == 0 and "Usage:" in r.output


def test_list():
    r = invoke("list")
    assert r.exit_code == 0
    ladder = ["naive", "coalesced", "tiled", "blocktile1d", "regblock", "vectorized", "bankfree", "warptile", "pipelined", "lean", "spread",
              "splitk", "splitk_atomic", "skinny", "skinny_async", "skinny_narrow", "wmma", "mma", "wgmma", "gemv", "gemv_n", "gemv_n_fp32", "wgmma_ws", "wgmma_pingpong", "wgmma_tf32", "wgmma_ws_fp8"]
    for name in ladder:
        assert name in r.output
    data = json.loads(invoke("list", "--json").output)
    assert [d["name"] for d in data] == ladder
    assert data[2]["params"]["TILE"] == {"default": 32, "choices": [8, 16, 32], "help": data[2]["params"]["TILE"]["help"]}


def test_show_source_is_the_rendered_kernel():
    r = invoke("show", "--variant", "tiled", "--tile", "16")
    assert r.exit_code == 0
    assert "__shared__ float As[16][16];" in r.output and "{{" not in r.output


@pytest.mark.parametrize("what,needle", [("ptx", ".entry gemm("), ("sass", "FFMA"), ("resources", "registers")])
def test_show_compiled_without_gpu(what, needle):
    r = invoke("show", "--variant", "regblock", "-p", "REG=4", "-p", "TILE=64", "--what", what, "--arch", "sm_90")
    assert r.exit_code == 0 and needle in r.output


def test_build_all_configs():
    # tiled's 6: regblock's 21 (test_templates counts them) took 8 s of CPU more to compile, which no other
    # test needs since test_compile compiles a sample of them
    r = invoke("build", "--variant", "tiled", "--arch", "sm_90", "--all-configs")
    assert r.exit_code == 0, r.output
    assert r.output.count(" ok ") == 6  # every valid configuration of tiled


def test_build_fails_on_a_template_that_does_not_compile(user_dir):
    write_template(user_dir, "typo", GOOD_BODY.replace("acc += A[", "acc += AA["))
    # typo between two that build (every variant would be 20 s of compiles that test_compile does anyway)
    r = invoke("build", "--arch", "sm_90", "--kernels-dir", user_dir, "-v", "naive", "-v", "typo", "-v", "tiled", "--json")
    assert r.exit_code == 1
    rows = json.loads(r.stdout)["rows"]
    assert [(x["variant"], x["result"]) for x in rows] == [("naive", "ok"), ("typo", "FAIL"), ("tiled", "ok")]
    assert f"{user_dir / 'typo.cu.j2'}:" in rows[1]["error"] and "error" in r.stderr  # the others were still built


@pytest.mark.parametrize("args,message", [
    (["show", "--variant", "tiledd"], "did you mean tiled"),
    (["show", "--variant", "tiled", "--tile", "64"], "4096"),
    (["show", "--variant", "tiled", "--reg", "4"], "has no parameter REG"),
    (["show", "--variant", "tiled", "-p", "TILE"], "NAME=VALUE"),
    (["show", "--variant", "tiled", "-p", "TILE=big"], "integer"),
    (["show", "--variant", "tiled", "--what", "ptx", "--arch", "sm_9000"], "cannot compile for sm_9000"),
    (["list", "--kernels-dir", "/no/such/dir"], "no such directory"),
])
def test_bad_input_gives_one_clear_message(args, message):
    r = invoke(*args)
    assert r.exit_code == 1
    assert "error:" in r.output and message in r.output


def test_bad_sizes_are_usage_errors():
    r = invoke("run", "--variant", "tiled", "--size", "0")
    assert r.exit_code == 2 and "--size" in r.output


@pytest.mark.skipif(gpu_available(), reason="checks the message shown on a machine without a GPU")
@pytest.mark.parametrize("cmd", [["run", "--variant", "tiled"], ["compare"], ["device"]])
def test_gpu_commands_say_there_is_no_gpu(cmd):
    r = invoke(*cmd)
    assert r.exit_code == 1 and "no CUDA GPU" in r.output


def test_compile_error_shows_template_line(user_dir):
    path = write_template(user_dir, "typo", GOOD_BODY.replace("acc += A[", "acc += AA["))
    line = next(i for i, l in enumerate(path.read_text().split("\n"), 1) if "AA[" in l)
    r = invoke("show", "--variant", "typo", "--what", "resources", "--arch", "sm_90", "--kernels-dir", user_dir)
    assert r.exit_code == 1 and f"typo.cu.j2:{line}: error" in r.output
    assert "acc += AA[row * K + k] * B[k * N + col];" in r.output  # brackets are text, not rich markup


def test_new_copies_a_template_and_never_overwrites(user_dir):
    r = invoke("new", "mytiled", "--from", "tiled", "--kernels-dir", user_dir)
    assert r.exit_code == 0, r.output
    path = user_dir / "mytiled.cu.j2"
    text = path.read_text()
    assert 'name = "mytiled"' in text and 'parent = "tiled"' in text
    lst = invoke("list", "--kernels-dir", user_dir)
    assert "mytiled" in lst.output
    path.write_text(text + "// my edit\n")
    again = invoke("new", "mytiled", "--from", "tiled", "--kernels-dir", user_dir)
    assert again.exit_code == 1 and "already exists" in again.output
    assert path.read_text().endswith("// my edit\n")  # the user's edit survived
    bad = invoke("new", "bad-name", "--from", "tiled", "--kernels-dir", user_dir)
    assert bad.exit_code == 1 and "'bad-name' is not a valid variant name: use letters, digits and _" in bad.output


def test_new_default_directory_is_found_without_flags(tmp_path):
    r = invoke("new", "tiled", "--from", "tiled")  # shadows the built-in one, in the per-user directory
    assert r.exit_code == 0 and "shadows the built-in" in r.output
    lst = invoke("list")
    assert "shadows" in lst.output
    src = invoke("show", "--variant", "tiled")
    assert "gemmlab variant tiled" in src.output


def test_report_renders_saved_results(tmp_path):
    doc = {"command": "compare", "date": "2026-11-23T00:00:00+00:00", "commit": "abc",
           "device": {"name": "Test GPU", "peak_fp32_tflops": 66.9}, "shape": {"M": 8, "N": 8, "K": 8},
           "rows": [{"variant": "tiled", "params": {"TILE": 32}, "status": "PASS", "error": None,
                     "rel_err": 1e-7, "ms": 1.0, "tflops": 1.0, "pct_peak": 1.5, "pct_cublas": 20.0,
                     "speedup_prev": None, "registers": 32, "smem_static": 8192, "smem_dynamic": 0,
                     "spills": 0, "blocks_per_sm": 2, "compile_ms": 40.0, "cached": False, "user": False}]}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    r = invoke("report", f)
    assert r.exit_code == 0 and "tiled" in r.output and "Test GPU" in r.output
    md = invoke("report", "--markdown", f)
    assert "| tiled | TILE=32 | 1.000 | 1.00 | 1.5 | 20.0 |" in md.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = invoke("report", bad)
    assert r.exit_code == 1 and f"{bad} is not a gemmlab results file (a `--json` output)" in r.output


@pytest.mark.parametrize("name,lines", [
    ("h100-suite.json", ["| M x N x K | variant | TFLOP/s | % of peak | FLOP/B | bound | % of bound | x cuBLAS | target |",
                         "| 3072x3072x3072 | spread | 48.80 | 72.9 | 512.0 | compute | 72.9 | 1.08 | 40% met |",
                         "| 3072x3072x3072 | cuBLAS | 45.02 | 67.3 | 512.0 | compute | 67.3 | 1.00 | 40% |"]),
    ("h100-scaling.json", ["| N | pipelined | tiled | regblock | cuBLAS | numpy (CPU) | spread |",
                           "| 256 | 3,427 | 2,826 | 587 | 2,709 | 462 | - |"]),
    ("h100-occupancy.json", ["| warps / SM | occupancy | GB/s | % of best |", "| 1 | 1.6% | 312 | 11.0 |"]),
])
def test_report_shows_suite_scaling_and_occupancy_files_in_their_own_columns(name, lines):
    f = ROOT / "benchmarks" / name
    r = invoke("report", f)
    assert r.exit_code == 0, r.output
    md = invoke("report", "--markdown", f)
    assert md.exit_code == 0 and all(line in md.stdout.splitlines() for line in lines), md.stdout


def test_example_template_builds_beside_the_builtins():
    # the example and its parent (every built-in is test_compile's: 50 s more here)
    r = invoke("build", "--arch", "sm_90", "--kernels-dir", ROOT / "examples" / "kernels", "-v", "tiled_nounroll",
               "-v", "tiled", "--json")
    assert r.exit_code == 0, r.output
    assert [(x["variant"], x["result"]) for x in json.loads(r.stdout)["rows"]] == [("tiled_nounroll", "ok"), ("tiled", "ok")]
    lst = invoke("list", "--kernels-dir", ROOT / "examples" / "kernels")
    assert "tiled_nounroll" in lst.output


def test_explain_shows_predictions_beside_measurements():
    results = ROOT / "benchmarks" / "h100-compare-4096.json"
    r = invoke("explain", "--results", str(results), "--markdown")
    assert r.exit_code == 0, r.output
    doc = json.loads(results.read_text())
    ms = {row["variant"]: row["ms"] for row in doc["rows"]}
    line = next(l for l in r.output.splitlines() if l.startswith("| tiled |"))
    assert line == f"| tiled | coalesced | 1.50x | {ms['coalesced'] / ms['tiled']:.2f}x |"
    r = invoke("explain")
    assert r.exit_code == 0 and "pipelined" in r.output and "cp.async" in r.output


def test_explain_rejects_a_file_that_is_not_results(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    r = invoke("explain", "--results", str(bad))
    assert r.exit_code == 1 and "not a gemmlab results file" in r.output and "Traceback" not in r.output


def test_report_versus_cublas():
    files = sorted(str(p) for p in (ROOT / "benchmarks").glob("h100-compare-*.json"))
    r = invoke("report", "--versus", "regblock", *files)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("| M x N x K | regblock TFLOP/s | cuBLAS TFLOP/s |")
    assert "| 4096x4096x4096 |" in r.output


def test_report_versus_another_row_and_fp8_scales(tmp_path):
    """--against picks the reference row; an FP8 row's label names its scales, and a reference that
    failed shows its status, not a ratio."""
    def doc(scale, mine, ref, ref_status="PASS"):
        return {"command": "run", "shape": {"M": 64, "N": 64, "K": 64}, "dtype": "e4m3",
                "rows": [{"variant": "wgmma_ws_fp8", "params": {"SCALE": scale}, "status": "PASS", "tflops": mine},
                         {"variant": "cuBLASLt", "params": {}, "status": ref_status, "tflops": ref}]}
    files = []
    for i, d in enumerate([doc("block", 80.0, 100.0), doc("tensor", 110.0, 100.0), doc("row", 90.0, 1.0, "CRASHED")]):
        f = tmp_path / f"{i}.json"
        f.write_text(json.dumps(d))
        files.append(str(f))
    r = invoke("report", "--versus", "wgmma_ws_fp8", "--against", "cuBLASLt", *files)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        "| M x N x K | wgmma_ws_fp8 TFLOP/s | cuBLASLt TFLOP/s | wgmma_ws_fp8 / cuBLASLt |", "|---|---:|---:|---:|",
        "| 64x64x64 e4m3, tensor scales | 110.00 | 100.00 | 1.100x |",
        "| 64x64x64 e4m3, row scales | 90.00 | CRASHED | - |",
        "| 64x64x64 e4m3, block scales | 80.00 | 100.00 | 0.800x |"]
    r = invoke("report", "--versus", "wgmma_ws_fp8", "--against", "Triton", *files)
    assert r.exit_code == 1 and "no file has a row of Triton" in r.output
    r = invoke("report", "--against", "cuBLASLt", *files)
    assert r.exit_code == 1 and "give --versus VARIANT too" in r.output
