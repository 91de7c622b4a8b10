"""profile's ncu command and parsing (from output recorded on the H100), and occupancy's arithmetic:
no GPU, no ncu needed."""

import json
from pathlib import Path

import pytest

from gemmlab import profile
from gemmlab.gpu import occupancy
from gemmlab.errors import GemmlabError
from gemmlab.present.plots import occupancy_plot
from test_cli import invoke

DATA = Path(__file__).parent / "data"


def test_ncu_csv_is_parsed_for_the_gemm_launch():
    metrics = profile.parse((DATA / "ncu.txt").read_text())
    assert metrics["dram__bytes_read.sum"] == (2102272.0, "byte")  # "2,102,272" in the CSV
    assert metrics["smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"][0] == pytest.approx(0.96)
    rows, stalls = profile.summary(metrics)
    assert ("DRAM bytes read", 2102272.0, "byte") in rows
    assert stalls and all(r != "selected" for r, _ in stalls)
    assert [c for _, c in stalls] == sorted((c for _, c in stalls), reverse=True)


def test_no_gemm_in_the_output_is_nothing():
    assert profile.parse("==PROF== Disconnected\n") == {}


def test_ncu_command_profiles_one_gemm_launch():
    argv = profile.command("/x/ncu", ["--variant", "tiled"])
    assert argv[:2] == ["/x/ncu", "--csv"] and argv.count("--metrics") == 1
    assert argv[argv.index("--kernel-name") + 1] == "regex:^gemm$" and argv[argv.index("--launch-count") + 1] == "1"
    assert argv[-6:] == ["run", "--variant", "tiled", "--no-cublas", "--reps", "1"]


def test_profile_without_ncu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(profile, "find_ncu", lambda: (_ for _ in ()).throw(GemmlabError("ncu (Nsight Compute) was not found")))
    r = invoke("profile", "--variant", "tiled")
    assert r.exit_code == 1 and "ncu (Nsight Compute) was not found" in r.output
    assert invoke("profile", "--variant", "tiled", "--tile", "64").exit_code == 1  # bad input fails before ncu


def test_occupancy_plan_and_reserved_shared_memory():
    assert occupancy.plan(1, 64) == (32, 1) and occupancy.plan(32, 64) == (32, 32) and occupancy.plan(64, 64) == (64, 32)
    assert occupancy.plan(64, 48) is None
    smem_per_sm = 228 * 1024
    for blocks in (2, 4, 8, 16, 32):
        s = occupancy.smem_for(blocks, smem_per_sm)
        assert blocks * (s + 1024) <= smem_per_sm < (blocks + 1) * (s + 1024)  # exactly `blocks` fit


def test_littles_law():
    rows = [{"warps_per_sm": 1, "bandwidth": 312e9}, {"warps_per_sm": 64, "bandwidth": 2.8e12}]
    law = occupancy.littles_law(rows, sms=132, peak_bw=2.8e12)
    assert law["latency_ns"] == pytest.approx(512 * 132 / 312e9 * 1e9)
    assert law["warps_per_sm_needed"] == 9  # 2.8 TB/s x 217 ns = 607 KB = 8.98 warps of 512 B on 132 SMs


def test_occupancy_plot_from_the_h100_result(tmp_path):
    doc = json.loads((Path(__file__).parent.parent / "benchmarks" / "h100-occupancy.json").read_text())
    out = tmp_path / "occ.png"
    occupancy_plot(doc, out)
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 10_000


def test_numpy_baseline_is_checked_and_timed():
    from gemmlab.cpu import numpy_row
    r = numpy_row(64, 48, 40, min_reps=3, min_time_s=0.01)
    assert r["status"] == "PASS" and 0 <= r["rel_err"] < 1e-5 and r["ms"] > 0 and r["reps"] >= 3
    assert r["gflops"] == pytest.approx(2 * 64 * 48 * 40 / (r["ms"] * 1e-3) / 1e9)


def _scaling_doc():
    rows = [{"variant": v, "params": {}, "status": "PASS", "gflops": g * n / 256, "ms": 1.0, "size": n}
            for n in (256, 512, 1024) for v, g in (("pipelined", 5000), ("cuBLAS", 6000), ("numpy (CPU)", 100))]
    rows.append({"variant": "tiled", "params": {}, "status": "FAIL", "gflops": None, "ms": None, "size": 256})
    return {"device": {"name": "H100"}, "date": "2026-11-23", "commit": "x", "rows": rows}


def test_scaling_plot_and_table(tmp_path):
    from gemmlab.present import lab_tables, markdown
    from gemmlab.present.plots import scaling_plot
    out = tmp_path / "s.png"
    scaling_plot(_scaling_doc(), out)
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 10_000
    md = markdown.scaling_markdown(_scaling_doc())
    assert md.splitlines()[0] == "| N | pipelined | cuBLAS | numpy (CPU) | tiled |"
    assert "| 256 | 5,000 | 6,000 | 100 | FAIL |" in md and "| 1024 | 20,000 | 24,000 | 400 | - |" in md
    assert lab_tables.scaling_table(_scaling_doc()).row_count == 10


def test_scaling_bad_sizes():
    assert invoke("scaling", "--sizes", "a,b").exit_code == 1
    assert "positive" in invoke("scaling", "--sizes", "0").output


def _transpose_csv(conflicts_ld: int, wavefronts_ld: int) -> str:
    """ncu's CSV for one launch of `transpose` (as --csv prints it), with the shared-memory counts given."""
    head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",' \
           '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
    values = {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": conflicts_ld,
              "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": 0,
              "smsp__inst_executed_op_shared_ld.sum": 262144, "smsp__inst_executed_op_shared_st.sum": 262144,
              "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": wavefronts_ld,
              "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": 262144}
    rows = "".join(f'"0","1","python3","h","transpose","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",'
                   f'"Command line profiler metrics","{m}","","{v:,}"\n' for m, v in values.items())
    return "==PROF== Connected to process 1\n" + head + rows


def test_shared_memory_counts_are_per_request_for_a_problem_kernel():
    metrics = profile.parse(_transpose_csv(262144 * 31, 262144 * 32), kernel="transpose")
    assert profile.parse(_transpose_csv(0, 0)) == {}  # the gemm filter sees no gemm launch here
    rows, _ = profile.summary(metrics)
    per = {label: value for label, value, unit in rows if unit == "per request"}
    assert per == {"shared-load bank conflicts per request": 31.0, "shared-store bank conflicts per request": 0.0,
                   "shared-load wavefronts per request": 32.0, "shared-store wavefronts per request": 1.0}
    assert profile.command("/x/ncu", ["--variant", "smem_tile"], "transpose")[3] == "regex:^transpose$"


def test_profile_of_a_transpose_rung_runs_its_kernel_at_the_problems_shape(monkeypatch, tmp_path):
    asked = []

    def fake(args, kernel="gemm"):
        asked.append((args, kernel))
        metrics = profile.parse(_transpose_csv(0 if "padded_tile" in args else 262144 * 31,
                                               262144 if "padded_tile" in args else 262144 * 32), kernel)
        rows, stalls = profile.summary(metrics)
        return {"command": "ncu ...", "metrics": [{"metric": m, "value": v, "unit": u} for m, v, u in rows],
                "stalls": [], "run_exit_status": 0}
    monkeypatch.setattr(profile, "profile", fake)
    files = []
    for v in ("smem_tile", "padded_tile"):
        r = invoke("profile", "--problem", "transpose", "--variant", v, "--json")
        assert r.exit_code == 0, r.output
        files.append(tmp_path / f"{v}.json")
        files[-1].write_text(r.stdout)
    assert asked[0] == (["--variant", "smem_tile", "-N", "8192", "-M", "8192", "--timeout", "600", "-p", "ROWS=8"],
                        "transpose")
    md = invoke("report", "--markdown", *files).stdout.splitlines()
    assert md[0] == "| metric | smem_tile ROWS=8 | padded_tile ROWS=8 |"
    assert "| shared-load bank conflicts per request | 31.00 | 0.00 |" in md
    assert "| shared-load wavefronts per request | 32.00 | 1.00 |" in md
    assert "| shared-load requests | 262,144 | 262,144 |" in md
    invoke("profile", "--variant", "shfl", "--size", "1000", "--inputs", "small integers")
    assert asked[-1] == (["--variant", "shfl", "-N", "1000", "--inputs", "small integers", "--timeout", "600",
                          "-p", "BLOCK=256", "-p", "VEC=4"], "reduce")


@pytest.mark.parametrize("args,message", [
    (["--problem", "reduce", "--variant", "smem_tile"], "error: variant 'smem_tile' computes transpose, not reduce"),
    (["--variant", "smem_tile", "-K", "5"], "error: transpose has no K: give --size or -N and -M"),
    (["--variant", "tiled", "--inputs", "skewed"], "error: --inputs chooses the input set of a problem other than gemm"),
    (["--variant", "shfl", "--inputs", "skewed"], "error: reduce has no input set 'skewed'"),
])
def test_bad_profile_input_for_a_problem_is_one_line_before_ncu(monkeypatch, args, message):
    monkeypatch.setattr(profile, "profile", lambda *a, **k: pytest.fail("ncu must not run"))
    r = invoke("profile", *args)
    assert r.exit_code == 1 and r.output.startswith(message), r.output
