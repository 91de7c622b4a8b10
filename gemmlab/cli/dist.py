"""`gemmlab dist`: a GEMM over several GPUs, one process per GPU, NCCL between them."""

from __future__ import annotations

import click
from rich.markup import escape

from .. import api
from ..errors import GemmlabError
from ..files import new_file
from .common import (SECONDS, _plot, _print_fault, _print_rows, _reporter, cli, dtype_option, err, kernels_dir_option,
                     names_list, output_format, output_options, overrides, param_options)


def parse_shape(text: str):
    """"M,N,K" or one n (n x n x n)."""
    try:
        dims = [int(x) for x in text.replace("x", ",").split(",")]
    except ValueError:
        dims = []
    if len(dims) not in (1, 3):
        raise GemmlabError(f"--shape takes M,N,K or one size, not {text!r}", hint="for example --shape 2048,8192,4096")
    return dims[0] if len(dims) == 1 else tuple(dims)


def parse_gpus(text: str | None):
    if text in (None, "all"):
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise GemmlabError(f"--gpus takes a number of GPUs or all, not {text!r}")
    return n


@cli.command()
@click.option("--schedule", default="ring", show_default=True, metavar="NAME[,NAME..]|all",
              help="How A, B and C are split and moved (kernels/dist/): ring, allgather, reduce_scatter, summa, "
              "allgather_ce (the copy engines: gemmlab[dist]).")
@click.option("--variant", "-v", "name", default="wgmma_ws", show_default=True,
              help="Each GPU's GEMM (any variant; cuBLAS for cuBLAS alone).")
@param_options
@click.option("--shape", "shape_text", default="4096", show_default=True, metavar="M,N,K",
              help="The whole problem (each GPU gets its part), or one size n for n x n x n.")
@dtype_option
@click.option("--gpus", "gpus_text", metavar="N|all", help="GPUs of this host, one process each (default: all). "
              "Under mpirun, srun or torchrun leave it out: the launcher's ranks are the GPUs.")
@click.option("--comm-sms", type=click.IntRange(min=0), default=0, show_default=True,
              help="SMs our kernel leaves free for NCCL's kernels where the schedule overlaps them.")
@click.option("--no-baseline", is_flag=True, help="Without each schedule's NCCL + cuBLAS baseline (no overlap).")
@click.option("--no-single", is_flag=True, help="Without our kernel and cuBLAS on one GPU for the whole problem.")
@click.option("--measure", is_flag=True, help="Measure NCCL's all-gather and send/recv bus bandwidth instead.")
@click.option("--timeline", is_flag=True, help="For a schedule with an arrival step (allgather_arrival, "
              "allgather_pulls): when its barrier, each chunk and the GEMM ended in a repetition, per rank (CUDA "
              "events in the timed repetitions, which may shift their time a little).")
@click.option("--store", type=click.Path(dir_okay=False), help="Under a launcher without MPI or torch: a file every "
              "rank sees, through which rank 0 passes the NCCL id.")
@click.option("--reps", type=click.IntRange(min=1), default=20, show_default=True,
              help="Least timed repetitions (more are run to fill 100 ms).")
@click.option("--seed", type=int, help="Seed of the inputs (default: a fresh one).")
@click.option("--timeout", type=SECONDS, default=120.0, show_default=True,
              help="Seconds the ranks may all go without progress before the job is stopped.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Also write the results here as JSON (a new file).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Also draw time against GPUs, with the communication not hidden (PNG).")
@output_options
@kernels_dir_option
@click.pass_context
def dist(ctx, schedule, name, tile, reg, raw_params, shape_text, dtype, gpus_text, comm_sms, no_baseline, no_single,
         measure, timeline, store, reps, seed, timeout, out_path, plot_path, as_json, as_csv, kernels_dirs):
    """A GEMM over several GPUs: NCCL between them, our kernel on each, each schedule beside NCCL + cuBLAS
    without overlap; the gathered C is checked element by element before anything is timed."""
    fmt = output_format(as_json, as_csv)
    out_path, plot_path = new_file(out_path, "--out"), new_file(plot_path, "--plot")
    given = overrides(tile, reg, raw_params)
    schedules = "all" if schedule == "all" else names_list(schedule, "--schedule")
    with _reporter() as reporter:
        rs = api.dist(schedules, None if name == "cuBLAS" else name, given, parse_shape(shape_text),
                      gpus=parse_gpus(gpus_text), dtype=dtype, reps=reps, seed=seed, timeout=timeout,
                      comm_sms=comm_sms, baseline=not no_baseline, single=not no_single, store=store,
                      measure=measure, timeline=timeline, out=out_path, kernels_dirs=kernels_dirs,
                      progress=reporter)
    doc = rs.to_json()
    if rs.lead:  # under a launcher only rank 0 has the rows
        _print_rows(doc, doc["rows"], fmt, rs.table)
        if doc["rows"] and not doc.get("fault"):
            _plot("dist_plot", doc, plot_path)
        for r in rs.failures:
            err().print(f"[bold red]{r['status']}[/] {escape(r['schedule'])}: "
                        f"{escape(r.get('check') or r.get('error') or '')}", soft_wrap=True)
    _print_fault(doc)
    ctx.exit(rs.exit_status)
