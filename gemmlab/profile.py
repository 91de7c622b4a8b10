"""`gemmlab profile`: one launch of a variant under Nsight Compute (ncu), a curated set of metrics.

ncu runs `gemmlab run` for the variant (which runs the kernel in its worker process: ncu follows child
processes) and profiles only the first launch of the variant's kernel (gemm, or named after its
problem: transpose, reduce, ...), the checked one, so the reference and the timing repetitions are left
alone. The metrics answer the questions a kernel tuner asks first: is the kernel bound by the SMs or
by memory, how full are the SMs, do shared-memory accesses conflict (and how many passes each request
took), what do warps wait on, and how many bytes come from DRAM. Parsing ncu's CSV is plain text work,
tested on a CPU with recorded output.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys

from .compile import find_tool
from .errors import GemmlabError

METRICS = {
    "gpu__time_duration.sum": "kernel time",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput (% of peak)",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory throughput (% of peak)",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy (%)",
    "sm__inst_executed_pipe_fma.sum": "FMA-pipe instructions",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared-load bank conflicts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "shared-store bank conflicts",
    "smsp__inst_executed_op_shared_ld.sum": "shared-load requests",  # one per warp's load instruction
    "smsp__inst_executed_op_shared_st.sum": "shared-store requests",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "shared-load wavefronts",  # the passes they took
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": "shared-store wavefronts",
    "dram__bytes_read.sum": "DRAM bytes read",
    "dram__bytes_write.sum": "DRAM bytes written",
}
STALLS = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
# Per shared-memory request (a warp's instruction): the bank conflicts, and the wavefronts it took (1 for a
# warp's 4-byte accesses to 32 different banks; a column of a [32][32] float tile takes 32, a 32-way conflict).
PER_REQUEST = [("shared-load bank conflicts per request", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                "smsp__inst_executed_op_shared_ld.sum"),
               ("shared-store bank conflicts per request", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                "smsp__inst_executed_op_shared_st.sum"),
               ("shared-load wavefronts per request", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                "smsp__inst_executed_op_shared_ld.sum"),
               ("shared-store wavefronts per request", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                "smsp__inst_executed_op_shared_st.sum")]


def find_ncu() -> str:
    exe = find_tool("ncu")
    if not exe:
        raise GemmlabError("ncu (Nsight Compute) was not found",
                           hint="it comes with the CUDA toolkit (for example /usr/local/cuda/bin/ncu); put it on PATH")
    return exe


def command(ncu: str, run_args: list[str], kernel: str = "gemm") -> list[str]:
    """ncu on the first launch of `kernel` in `gemmlab run RUN_ARGS`, CSV on stdout."""
    return [ncu, "--csv", "--kernel-name", f"regex:^{kernel}$", "--launch-count", "1",
            "--metrics", ",".join([*METRICS, STALLS]),  # ncu takes --metrics once
            sys.executable, "-m", "gemmlab", "run", *run_args, "--no-cublas", "--reps", "1"]


def parse(output: str, kernel: str = "gemm") -> dict:
    """{metric: (value, unit)} of the profiled launch of `kernel`, from ncu's --csv output."""
    start = output.find('"ID"')
    if start < 0:
        return {}
    out = {}
    for row in csv.DictReader(io.StringIO(output[start:])):
        if row.get("Kernel Name", "").split("(")[0] != kernel:
            continue
        value = row["Metric Value"].replace(",", "")
        try:
            out[row["Metric Name"]] = (float(value), row["Metric Unit"])
        except ValueError:
            out[row["Metric Name"]] = (value, row["Metric Unit"])
    return out


def summary(metrics: dict, top: int = 5) -> tuple[list[tuple[str, str, str]], list[tuple[str, float]]]:
    """([(what, value, unit)] in METRICS order, [(stall reason, cycles per issued instruction)] top first)."""
    rows = [(label, metrics[m][0], metrics[m][1]) for m, label in METRICS.items() if m in metrics]
    for label, count, per in PER_REQUEST:
        if isinstance(metrics.get(count, (None,))[0], float) and isinstance(metrics.get(per, (None,))[0], float) \
                and metrics[per][0] > 0:
            rows.append((label, metrics[count][0] / metrics[per][0], "per request"))
    stalls = sorted(((reason, v[0]) for name, v in metrics.items()
                     if name.startswith(STALL_PREFIX) and isinstance(v[0], float)
                     and (reason := name[len(STALL_PREFIX):].removesuffix("_per_issue_active.ratio")) != "selected"),
                    key=lambda kv: -kv[1])  # "selected" is the cycle a warp issues: not a stall
    return rows, stalls[:top]


def profile(run_args: list[str], timeout: float = 600, kernel: str = "gemm") -> dict:
    ncu = find_ncu()
    argv = command(ncu, run_args, kernel)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GemmlabError(f"ncu did not finish in {timeout:g} s") from None
    text = p.stdout + p.stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise GemmlabError("ncu has no permission to read the GPU's performance counters",
                           hint="run as root, or allow it: see ERR_NVGPUCTRPERM in NVIDIA's documentation")
    metrics = parse(p.stdout, kernel)
    if not metrics:
        tail = "\n".join(text.strip().splitlines()[-8:])
        raise GemmlabError(f"ncu profiled no {kernel} launch (exit status {p.returncode}):\n{tail}")
    rows, stalls = summary(metrics)
    return {"command": " ".join(argv[: argv.index(sys.executable)]) + " gemmlab run " + " ".join(run_args),
            "metrics": [{"metric": m, "value": v, "unit": u} for m, v, u in rows],
            "stalls": [{"reason": r, "cycles_per_instruction": c} for r, c in stalls],
            "run_exit_status": p.returncode}
