"""The `gemmlab` command: parse, call the pipeline's stages, print.

One module per group of commands: measure (run, compare, sweep), lab (suite, scaling, occupancy,
profile), inspect (list, show, build, cache, device, new, history), results (report, explain) and dist
(several GPUs), all on the group and options of common.
"""

from . import dist, inspect, lab, measure, results  # noqa: F401  (each adds its commands to the group)
from .common import cli


def main():
    cli(prog_name="gemmlab")
