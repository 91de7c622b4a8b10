"""compute-sanitizer's output, parsed and mapped to template lines, from recorded output (no GPU)."""

from pathlib import Path

import pytest

import gemmlab
from gemmlab import sanitize
from gemmlab.errors import GemmlabError
from gemmlab.render import render
from conftest import GOOD_BODY, write_template

DATA = Path(__file__).parent / "data"


BROKEN = Path(__file__).parent.parent / "examples" / "broken"  # the templates the recordings were made from


def rendered(directory, name):
    return render(gemmlab.catalog((directory,)).get(name))


def test_initcheck_findings_merge_and_map_to_the_template(user_dir):
    write_template(user_dir, "bad", GOOD_BODY)  # the recording names the rendered file bad.cu
    rendered_ = rendered(user_dir, "bad")
    findings, summary = sanitize.parse((DATA / "initcheck.txt").read_text(), rendered_)
    assert summary == "ERROR SUMMARY: 64 errors"
    assert len(findings) == 1  # two threads, one place: merged
    f = findings[0]
    assert f["what"] == "Uninitialized __global__ memory read of size 4 bytes" and f["count"] == 2
    path, line = rendered_.template_line(6)
    assert f["where"].endswith(f"bad.cu.j2:{line}") and f["rendered"] == "bad.cu:6"
    assert f["code"] == Path(path).read_text().splitlines()[line - 1].strip() != ""
    assert f["example"] == "thread (0,0,0) block (0,0,0)" and f["detail"] == "Address 0x7f932a800000"


def test_racecheck_names_both_places_and_adds_up_hazards():
    findings, summary = sanitize.parse((DATA / "racecheck.txt").read_text(), rendered(BROKEN, "racy"))
    assert summary == "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)"
    error, warning = findings
    assert error["what"] == "Race reported between Write access and Read access"
    assert error["rendered"] == "racy.cu:11, racy.cu:14"  # 16 reads on one line: one place
    assert error["count"] == 1_122_368  # the 16 lines' hazard counts added up
    assert "As[ty][tx] =" in error["code"] or "Bs[ty][tx] =" in error["code"]
    assert "acc += As[ty][k] * Bs[k][tx];" in error["code"]
    assert warning["what"].startswith("warning: Race reported") and warning["rendered"] == "racy.cu:10, racy.cu:14"


def test_memcheck_out_of_bounds_and_the_failed_calls_after_it():
    findings, summary = sanitize.parse((DATA / "memcheck.txt").read_text(), rendered(BROKEN, "edge"))
    assert summary == "ERROR SUMMARY: 4142 errors"
    oob, api = findings
    assert oob["what"] == "Invalid __global__ read of size 4 bytes" and oob["count"] == 2
    assert oob["code"] == "acc += A[row * K + k] * B[k * N + col];" and oob["example"] == "thread (0,1,0) block (7,16,0)"
    assert oob["detail"] == ("Access to 0x7f4881818584 is out of bounds and is 1 bytes after the nearest "
                             "allocation at 0x7f4881800000 of size 99,716 bytes")
    assert api["what"] == 'CUDA API calls failed: "unspecified launch failure"'
    assert api["count"] == 4 and api["where"] == "(host)"


def test_clean_output_has_no_findings():
    out = "========= COMPUTE-SANITIZER\nhello\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitize.parse(out) == ([], "ERROR SUMMARY: 0 errors")


def test_unknown_files_stay_as_reported():
    out = "========= Invalid __global__ write of size 4 bytes\n=========     at gemm+0x10 in other.cu:3\n"
    (f,), _ = sanitize.parse(out)
    assert f["where"] == "other.cu:3" and f["code"] == ""


def test_command_checks_only_our_kernel():
    argv = sanitize.command("/x/compute-sanitizer", "memcheck", Path("/tmp/job.pickle"))
    assert argv[:3] == ["/x/compute-sanitizer", "--tool", "memcheck"]
    assert "kne=gemm" in argv and "--padding" in argv and argv[-2:] == ["gemmlab.sanitize", "/tmp/job.pickle"]
    assert argv[argv.index("--report-api-errors") + 1] == "no"  # host API errors are not the kernel's findings
    assert "--padding" not in sanitize.command("cs", "racecheck", Path("j"))
    with pytest.raises(GemmlabError, match="unknown sanitizer tool 'nosuchtool'; choose one of memcheck, racecheck"):
        sanitize.command("cs", "nosuchtool", Path("j"))


def test_no_sanitizer_is_a_clear_error(monkeypatch):
    from test_cli import invoke
    monkeypatch.setattr("gemmlab.compile.find_tool", lambda name: None)
    r = invoke("run", "--variant", "tiled", "--sanitize")
    assert r.exit_code == 1 and "compute-sanitizer was not found" in r.output
    assert invoke("run", "--variant", "tiled", "--sanitize", "nosuch").exit_code == 2
