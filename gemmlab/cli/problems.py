"""What the measuring commands need for a problem other than GEMM (gemmlab/problems/): the --problem
and --inputs options, the problem a command runs, and its shape from --size, -M and -N."""

from __future__ import annotations

import click

from ..errors import GemmlabError


def problem_options(f):
    f = click.option("--inputs", metavar="SET",
                     help="The input set to time, for a problem that has several (histogram: uniform, skewed, "
                          "one bin); every set is checked.")(f)
    return click.option("--problem", metavar="NAME",
                        help="What the kernels compute: gemm (default), copy, transpose, reduce, scan, histogram. "
                             "Default: the named variant's.")(f)


def problem_of(problem: str | None, names: list[str], kernels_dirs) -> str:
    """The problem named, else that of the first variant named, else gemm."""
    from .. import problems
    from ..api import catalog
    if problem is not None:
        return problems.check_name(problem)
    if names and names[0] != "auto":
        return catalog(kernels_dirs).get(names[0]).problem
    return "gemm"


def size_given(ctx) -> bool:
    """Whether --size was on the command line (else its default is GEMM's, not another problem's)."""
    return ctx.get_parameter_source("size") == click.core.ParameterSource.COMMANDLINE


def problem_shape(common: dict, problem: str, given: bool):
    """The shape of a problem other than GEMM: n elements (--size if `given`, or -N; default the
    problem's), or an M x N matrix (--size for both, -M, -N). K is GEMM's: 1 or not given."""
    from .. import problems
    decl = problems.get(problem)
    if common.get("k") not in (None, 1):
        raise GemmlabError(f"{problem} has no K: give --size or -N" + ("" if decl.vector else " and -M"))
    return decl.shape(size=common["size"] if given else None, M=common.get("m"), N=common.get("n"))


def gemm_shape_options(common: dict, problem: str) -> dict:
    """The shared options as _common reads them: for another problem, a GEMM shape of 1 (its own shape,
    from problem_shape, may be far past what a GEMM of that size could index)."""
    return common if problem == "gemm" else dict(common, size=1, m=None, n=None, k=None)
