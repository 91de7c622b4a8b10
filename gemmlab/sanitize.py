"""Run one variant under NVIDIA's compute-sanitizer and map what it finds back to the template's lines.

The sanitized process (`python -m gemmlab.sanitize JOB`) makes the inputs, launches the kernel once
and checks the result; it does not time anything (the tools slow kernels down 10-100x). Two details
make the findings trustworthy:
- cupy's memory pool is switched off there, so every array is its own allocation and an access past
  the end of C is outside any allocation, which memcheck reports (inside a pooled block it would be
  silent), and memcheck adds a padding zone after each allocation as well;
- only the kernel named `gemm` is checked (`--kernel-name kne=gemm`), not cuBLAS's reference kernel,
  and host API calls that return errors are not reported (`--report-api-errors no`): libraries probe
  the driver (cuGetProcAddress for entry points it lacks, 34 such calls in a wgmma run) and handle the
  answer, and after a kernel fault every later call fails; neither is a finding about the kernel.

Kernels are compiled with -lineinfo, so the tool reports `tiled.cu:42` (the rendered file), which the
render step's line map turns into `kernels/tiled.cu.j2:51`. The parsing is plain text work, tested
on a CPU with recorded output.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .compile import pretty_path
from .errors import GemmlabError

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
PREFIX = "========="
_LOCATION = re.compile(r"at (?:\S+?)\+0x[0-9a-f]+ in (\S+?):(\d+)")
_RACE_AND = re.compile(r"^and .* at \S+\+0x[0-9a-f]+ in ")  # racecheck's second access
_NOT_DETAIL = ("at ", "by thread ", "Saved host backtrace", "Host Frame", "Device Frame")
_API_ERROR = re.compile(r'^Program hit \S+ \(error \d+\) due to "(.*?)" on CUDA API call')
_SUMMARY = re.compile(rf"^{PREFIX} ((?:ERROR|RACECHECK|SYNCCHECK|INITCHECK|LEAK)[A-Z ]* SUMMARY: .*)$")


def command(exe: str, tool: str, job: Path) -> list[str]:
    if tool not in TOOLS:
        raise GemmlabError(f"unknown sanitizer tool '{tool}'; choose one of {', '.join(TOOLS)}")
    extra = ["--padding", "4096"] if tool == "memcheck" else []
    return [exe, "--tool", tool, "--kernel-name", "kne=gemm", "--show-backtrace", "no", "--report-api-errors", "no",
            "--print-limit", "10000", *extra, sys.executable, "-m", "gemmlab.sanitize", str(job)]


def _records(output: str) -> list[list[str]]:
    """The sanitizer's reports: a headline at the prefix, then indented lines that belong to it."""
    records: list[list[str]] = []
    for line in output.splitlines():
        if not line.startswith(PREFIX):
            continue  # the program's own output
        text = line[len(PREFIX):]
        if not text.strip() or _SUMMARY.match(line) or text.strip() == "COMPUTE-SANITIZER":
            continue
        if text.startswith("  ") and records:
            records[-1].append(text.strip())
        elif not text.startswith("  "):
            records.append([text.strip()])
    return records


def _what(rec: list[str], second: list[str]) -> str:
    """The kind of finding, without addresses, places and counts, so that equal ones merge."""
    head = rec[0]
    api = _API_ERROR.match(head)
    if api:  # only in output from runs without --report-api-errors no: one finding per error, not per call
        return f'CUDA API calls failed: "{api.group(1)}"'
    level = "warning: " if head.startswith("Warning: ") else ""
    text = " ".join([head.removeprefix("Error: ").removeprefix("Warning: ")] + second[:1])
    return level + re.sub(r"\s*\[\d+ hazards?\]", "", re.sub(r" at \S+\+0x[0-9a-f]+ in \S+", "", text))


def parse(output: str, rendered=None) -> tuple[list[dict], str | None]:
    """(findings, summary line). Identical findings (same report at the same places) are merged, with
    a count (racecheck's hazard counts added up) and the first thread and block that hit it."""
    merged: dict[tuple, dict] = {}
    for rec in _records(output):
        body = " ".join(rec)
        places = list({p["where"]: p for p in (_place(f, int(n), rendered) for f, n in _LOCATION.findall(body))}.values())
        # racecheck: "Race reported between Write access at gemm+0xf0 in t.cu:6" "and Read access at ..."
        second = [ln for ln in rec[1:] if _RACE_AND.match(ln)]
        what = _what(rec, second)
        key = (what, tuple(p["where"] for p in places))
        if key not in merged:
            thread = re.search(r"by thread (\(\S+\)) in block (\(\S+\))", body)
            detail = " ".join(ln for ln in rec[1:] if ln not in second and not ln.startswith(_NOT_DETAIL))
            merged[key] = {"what": what, "where": ", ".join(p["where"] for p in places) or "(host)",
                           "code": " | ".join(p["code"] for p in places if p["code"]),
                           "rendered": ", ".join(p["rendered"] for p in places),
                           "example": f"thread {thread.group(1)} block {thread.group(2)}" if thread else "",
                           "detail": detail, "count": 0}
        hazards = [int(h) for h in re.findall(r"\[(\d+) hazards?\]", body)]
        merged[key]["count"] += sum(hazards) if hazards else 1
    summary = next((m.group(1) for m in map(_SUMMARY.match, output.splitlines()) if m), None)
    return list(merged.values()), summary


def _place(file: str, line: int, rendered) -> dict:
    """`tiled.cu:42` as the template line it came from, with that line's text."""
    place = {"where": f"{file}:{line}", "rendered": f"{file}:{line}", "code": ""}
    if rendered is not None and file == rendered.name:
        origin = rendered.template_line(line)
        if origin:
            path, tline = origin
            place["where"] = f"{pretty_path(path)}:{tline}"
            try:
                place["code"] = Path(path).read_text().splitlines()[tline - 1].strip()
            except (OSError, IndexError):
                pass
    return place


def sanitize(variant, params: dict, shape, tool: str, opts) -> dict:
    """Run the variant once under `compute-sanitizer --tool TOOL`; findings mapped to template lines,
    the tool's summary line, and the result check of that run."""
    from .compile import find_tool  # looked up here, so tests can stand in for it
    from .jobs import fresh_seed
    from .render import render
    exe = find_tool("compute-sanitizer")
    if not exe:
        raise GemmlabError("compute-sanitizer was not found",
                           hint="it comes with the CUDA toolkit (for example /usr/local/cuda/bin); put it on PATH")
    rendered = render(variant, params)
    limit = opts.timeout * 10  # the tools are slow
    with tempfile.TemporaryDirectory(prefix="gemmlab-sanitize-") as d:
        job = Path(d) / "job.pickle"
        seed = opts.seed if opts.seed is not None else fresh_seed()
        job.write_bytes(pickle.dumps({"rendered": rendered, "shape": shape, "seed": seed}))
        argv = command(exe, tool, job)
        # Its own session, so that a timeout kills the sanitizer and the process it runs together.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=limit)
        except KeyboardInterrupt:  # its own session does not see the terminal's Ctrl-C: stop it here
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise GemmlabError(f"compute-sanitizer --tool {tool} did not finish in {limit:g} s; it was killed",
                               hint="a hang shows as TIMEOUT in `gemmlab run`; a smaller shape helps a slow tool") from None
        result_file = job.with_suffix(".json")
        if result_file.exists():
            check = json.loads(result_file.read_text())
        else:
            tail = "\n".join((stderr or stdout).strip().splitlines()[-5:])
            check = {"status": "CRASHED", "error": f"the sanitized process exited with status {proc.returncode}: {tail}"}
    findings, summary = parse(stdout, rendered)
    return {"tool": tool, "variant": variant.name, "params": params,
            "shape": {"M": shape.M, "N": shape.N, "K": shape.K}, "seed": seed,
            "command": " ".join(argv[:argv.index(sys.executable)]), "summary": summary,
            "findings": findings, "check": check}


def _child(job_path: str) -> None:
    """In the sanitized process: one checked launch of the job, its check written beside the job."""
    job = pickle.loads(Path(job_path).read_bytes())
    out = Path(job_path).with_suffix(".json")
    try:
        from .compile import compile_rendered
        from .gpu.driver import cuda
        from .gpu.problem import Problem
        from .kernel import Kernel
        cuda().cuda.set_allocator(None)  # one cudaMalloc per array: the sanitizer sees every array's end
        rendered = job["rendered"]
        problem = Problem(job["shape"], job["seed"], dtype=rendered.variant.dtype(rendered.params))
        r = problem.run(Kernel(compile_rendered(rendered, problem.device.arch)), timed=False)
        check = {"status": r.status, "error": r.error, "rel_err": r.check.rel_err if r.check else None,
                 "unwritten": r.check.unwritten if r.check else None}
    except GemmlabError as e:
        check = {"status": "ERROR", "error": e.message}
    out.write_text(json.dumps(check))


if __name__ == "__main__":
    _child(sys.argv[1])
