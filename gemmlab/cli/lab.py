"""The commands that measure across shapes and the machine: suite, scaling, occupancy, pcie, profile."""

from __future__ import annotations


import click
from rich.markup import escape

from .. import api
from ..api import catalog
from ..errors import GemmlabError
from ..files import new_file
from ..jobs import DEFAULT_TIMEOUT_S
from ..present import lab_tables
from ..results import records
from ..templates import show_value
from .problems import problem_of, problem_options
from .common import (SECONDS, _on_gpu, _plot, _print_fault, _print_rows, _reporter, _spinner, cli, dtype_option, err,
                     gpus_option, kernels_dir_option, make_shape, names_list, out, output_format, output_options, overrides,
                     out_dtype_option, param_options, refs_option, rounds_option, store_option)


@cli.command()
@click.option("--variants", help="Comma-separated variants to run on every shape (default: auto, chosen per shape; "
                                 "another problem's best rung).")
@click.option("--shapes", "shapes", metavar="NAME|FILE",
              help="The suite: lab (the default: MIT 6.S894's 12 FP32 shapes), llm (Llama-3 8B and 70B), or a TOML "
                   "file of shapes (copy kernels/shapes/llm.toml; another problem's says problem = \"NAME\" and "
                   "gives N, or M and N). Another problem runs its own sizes unless told: n from 1001 to 2^28, "
                   "odd ones among them.")
@click.option("--random", "random_", type=click.IntRange(min=1), metavar="N",
              help="N shapes drawn log-uniformly (M, N, K from 1 to 16384; another problem's n from 1 to 2^28) "
                   "from --seed instead of a suite.")
@click.option("--only", metavar="SHAPE,...", help="Only these shapes of the suite: MxNxK (another problem's: n, "
                                                   "or MxN).")
@dtype_option
@out_dtype_option
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True, help="Least timed repetitions.")
@rounds_option
@click.option("--seed", type=int, help="Seed of the random inputs (and of --random's shapes; default: a fresh one).")
@click.option("--timeout", type=SECONDS, default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds a job may go without progress before it is marked TIMEOUT.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Also write the results here as JSON (a new file).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw the roofline with every result (PNG).")
@refs_option
@gpus_option
@store_option
@problem_options
@output_options
@kernels_dir_option
@click.pass_context
def suite(ctx, variants, shapes, random_, only, dtype, out_dtype, reps, rounds, seed, timeout, out_path, plot_path,
          refs, gpus, store, problem, inputs, as_json, as_csv, kernels_dirs):
    """A suite of shapes against cuBLAS (default: the MIT 6.S894 lab's 12): roofline bound, % of it, x
    cuBLAS, the course's targets; per variant the geometric mean, minimum and share at or above cuBLAS.
    Another problem's (--problem, or that of --variants): its sizes with its best rung beside its cupy
    reference, GB/s, % of the copy bandwidth and x cupy; the same summary in x cupy."""
    fmt = output_format(as_json, as_csv)
    names = None if variants is None else names_list(variants, "--variants")
    if plot_path and problem_of(problem, names or [], kernels_dirs) != "gemm":
        raise GemmlabError("--plot draws GEMM's roofline; a suite of another problem has none")
    out_path, plot_path = new_file(out_path, "--out"), new_file(plot_path, "--plot")
    with _reporter() as reporter:
        rs = api.suite(names, None if only is None else names_list(only, "--only"),
                       shapes=shapes, random=random_, dtype=dtype, out_dtype=out_dtype, reps=reps, rounds=rounds,
                       seed=seed, timeout=timeout, out=out_path, kernels_dirs=kernels_dirs, progress=reporter, gpus=gpus,
                       refs=refs, problem=problem, inputs=inputs, store=store)
    if not rs.lead:  # under a launcher: this rank's rows went to rank 0, which prints them
        ctx.exit(0)
    doc = rs.to_json()
    _print_rows(doc, doc["rows"], fmt, rs.table)  # the table, and the summary per variant under it
    _plot("roofline_plot", doc, plot_path)
    for r in rs.failures:
        err().print(f"[bold red]{r['status']}[/] {escape(r['variant'])} at {r['shape']}: {escape(records.failure_text(r))}",
                    soft_wrap=True)
    _print_fault(rs.meta)
    ctx.exit(rs.exit_status)


@cli.command()
@click.option("--variants", default="auto", show_default=True, help="Comma-separated variants (auto: chosen per size).")
@click.option("--sizes", default="256,512,1024,2048,4096", show_default=True, help="Square sizes N (M = N = K).")
@click.option("--backend", "backends", multiple=True, type=click.Choice(["numpy"]),
              help="Also time this CPU baseline (numpy: numpy.matmul in FP32).")
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True, help="Least timed repetitions.")
@click.option("--timeout", type=SECONDS, default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds a job may go without progress before it is marked TIMEOUT.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw GFLOP/s against N (PNG, log-log).")
@output_options
@kernels_dir_option
@click.pass_context
def scaling(ctx, variants, sizes, backends, reps, timeout, plot_path, as_json, as_csv, kernels_dirs):
    """GFLOP/s against size for variants, cuBLAS and (--backend numpy) the CPU."""
    fmt = output_format(as_json, as_csv)
    try:
        ns = sorted({int(x) for x in names_list(sizes, "--sizes")})
    except ValueError:
        raise GemmlabError(f"--sizes takes integers separated by commas, not '{sizes}'") from None
    if not ns or ns[0] < 1:
        raise GemmlabError("--sizes needs at least one positive size")
    plot_path = new_file(plot_path, "--plot")
    with _reporter() as reporter:
        rs = api.scaling(names_list(variants, "--variants"), ns, numpy="numpy" in backends, reps=reps, timeout=timeout,
                         kernels_dirs=kernels_dirs, progress=reporter)
    doc = rs.to_json()
    _print_rows(doc, doc["rows"], fmt, rs.table)
    _plot("scaling_plot", doc, plot_path)
    ctx.exit(rs.exit_status)


@cli.command()
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw bandwidth against warps per SM (PNG).")
@output_options
def occupancy(plot_path, as_json, as_csv):
    """Copy bandwidth against warps per SM (forced with reserved shared memory), and Little's law."""
    from ..gpu import occupancy as occ
    fmt = output_format(as_json, as_csv)
    plot_path = new_file(plot_path, "--plot")
    dev, rows = _on_gpu(("occupancy",), "copy bandwidth against warps per SM")
    peak = max(r["bandwidth"] for r in rows)
    for r in rows:
        r.update(gbs=r["bandwidth"] / 1e9, pct_of_best=100 * r["bandwidth"] / peak)
    law = occ.littles_law(rows, dev.sms, peak)
    doc = dict(records.meta("occupancy", dev), rows=rows, littles_law=law)
    _print_rows(doc, rows, fmt, lambda: lab_tables.occupancy_table(doc))
    if fmt == "table" and law:
        out().print(f"Little's law: at 1 warp per SM each warp has {occ.BYTES_IN_FLIGHT_PER_WARP} bytes in flight, so the "
                    f"memory latency is about {law['latency_ns']:.0f} ns; {peak / 1e12:.2f} TB/s then needs "
                    f"{law['bytes_in_flight'] / 2**20:.1f} MiB in flight: about {law['warps_per_sm_needed']} warps per SM.")
    _plot("occupancy_plot", doc, plot_path)


@cli.command()
@click.option("--min-size", default="1KB", show_default=True, help="The smallest copy (bytes, or with KB, MB, GB: 1 KB = 1024 bytes).")
@click.option("--max-size", default="1GB", show_default=True, help="The largest copy.")
@click.option("--factor", type=click.Choice(["2", "4"]), default="4", show_default=True, help="Each size is the last times this.")
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True, help="Timed copies per size (their median is kept).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Also write the results here as JSON (a new file).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Also draw GB/s against size, with the PCIe link's rate (PNG).")
@output_options
def pcie(min_size, max_size, factor, reps, out_path, plot_path, as_json, as_csv):
    """Host-to-device and device-to-host copy rates, pageable and pinned, over sizes, against the PCIe link's rate."""
    from ..files import write_atomic
    from ..gpu import pcie as pc
    from ..present.export import dump
    from ..present.pcie_tables import pcie_view
    fmt = output_format(as_json, as_csv)
    sizes = pc.sizes(pc.parse_size(min_size), pc.parse_size(max_size), int(factor))
    out_path, plot_path = new_file(out_path, "--out"), new_file(plot_path, "--plot")
    dev, (measured, found) = _on_gpu(("pcie", sizes, reps), "host <-> device copies")
    link = pc.link_doc(found)
    rows = pc.rows_with_link(measured, link["rate_gbs"])
    doc = dict(records.meta("pcie", dev), reps=reps, link=link, rows=rows, plateau=pc.plateau(rows, link["rate_gbs"]))
    if out_path:
        write_atomic(out_path, dump(doc))
    _print_rows(doc, rows, fmt, lambda: pcie_view(doc))
    _plot("pcie_plot", doc, plot_path)


@cli.command("profile")
@click.option("--variant", "-v", "name", required=True, help="The variant to profile.")
@param_options
@click.option("--size", type=click.IntRange(min=1), help="M = N = K (default 4096); another problem's n, or its "
                                                          "matrix's side (default: the problem's own).")
@click.option("-M", "m", type=click.IntRange(min=1), help="M (overrides --size).")
@click.option("-N", "n", type=click.IntRange(min=1), help="N (overrides --size).")
@click.option("-K", "k", type=click.IntRange(min=1), help="K (overrides --size).")
@output_options
@dtype_option
@problem_options
@kernels_dir_option
def profile_cmd(name, tile, reg, raw_params, size, m, n, k, dtype, problem, inputs, as_json, as_csv, kernels_dirs):
    """One launch of a variant under ncu: throughput, occupancy, bank conflicts (per request too), stalls, DRAM bytes."""
    from .. import problems
    from ..profile import profile
    fmt = output_format(as_json, as_csv)
    v = catalog(kernels_dirs).get(name)
    if problem is not None and problems.check_name(problem) != v.problem:
        raise GemmlabError(f"variant '{v.name}' computes {v.problem}, not {problem}")
    params = v.resolve(v.for_dtype(dtype, overrides(tile, reg, raw_params)))  # bad input fails here, not under ncu
    if v.problem == "gemm":
        if inputs is not None:
            raise GemmlabError("--inputs chooses the input set of a problem other than gemm")
        shape = make_shape(size or 4096, m, n, k)
        args = ["--variant", v.name, "-M", str(shape.M), "-N", str(shape.N), "-K", str(shape.K)]
    else:
        decl = problems.get(v.problem)
        if k not in (None, 1):
            raise GemmlabError(f"{v.problem} has no K: give --size or -N" + ("" if decl.vector else " and -M"))
        shape = decl.shape(size=size, M=m, N=n)
        decl.input_set(inputs)  # an unknown set is one error here
        args = ["--variant", v.name, "-N", str(shape.N)] + ([] if decl.vector else ["-M", str(shape.M)])
        args += ["--inputs", inputs] if inputs else []
    args += ["--timeout", "600"] + [a for kv in params.items() for a in ("-p", f"{kv[0]}={show_value(kv[1])}")]
    args += [a for d in kernels_dirs for a in ("--kernels-dir", str(d))]
    with _spinner() as progress:
        progress.add_task(f"ncu: {v.name} {records.params_text(params)} at {shape}")
        found = profile(args, kernel=v.entry)
    found = dict(records.meta("profile"), **found)  # when and at which commit (the GPU: the run's, under ncu)
    found.update(variant=v.name, params=params, shape={"M": shape.M, "N": shape.N, "K": shape.K})
    _print_rows(found, found["metrics"] + [dict(metric="stall: " + s["reason"], value=s["cycles_per_instruction"],
                                                unit="cycles/instruction") for s in found["stalls"]],
                fmt, lambda: lab_tables.profile_table(found))
