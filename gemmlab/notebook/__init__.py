"""gemmlab in a notebook: `%load_ext gemmlab`, then a cell that is a template, or any command on a line.

    %%gemmlab run -p TILE=32 --size 2048 --compare naive,tiled
    {#---
    name = "mytiled"
    ...the TOML header...
    ---#}
    ...the Jinja CUDA...

    %gemmlab compare --variants naive,tiled --size 2048      (any gemmlab command, its output in the cell)

The cell magic writes the cell to data_dir()/cells/NAME/NAME.cu.j2 (NAME from the header), so the file's
lines are the cell's, and calls the API with that directory among kernels_dirs; errors name the cell's
line (`cell line 12: error: ...`), one message and no traceback. Its subcommands are run (the default;
with --compare, the cell beside other variants), sweep and show (--what sass: the SASS, highlighted), and
their options are the CLI's (gemmlab/cli/common.py). A header with `from = "tiled"` starts from that template
(as any template can: gemmlab/templates/inherit.py): its keys override the parent's and its body fills
the parent's {% block %}s. A run returns
its ResultSet, so the table is the cell's output and `_` holds it; the table says how each row compares
with the last run of that variant and shape, which for a cell is its last run (the name stays).

docs/notebook.md is the reference; examples/tour.ipynb the tour. The modules: cells.py (the cell as a
template file, the GPU check), display.py (what a notebook shows), magics.py (the magics' parsing and
commands).
"""

from __future__ import annotations

from .cells import NO_GPU, Cell, cells_dir, gpu_missing, needs_gpu, write_cell
from .display import Rich, SassHighlighter, code
from .magics import COMMANDS, GPU_COMMANDS, parse_line, run_cell, run_line

__all__ = ["NO_GPU", "Cell", "cells_dir", "gpu_missing", "needs_gpu", "write_cell", "Rich",
           "SassHighlighter", "code", "COMMANDS", "GPU_COMMANDS", "parse_line", "run_cell", "run_line",
           "load_ipython_extension"]

# ---- IPython ----------------------------------------------------------------------------------------------

def load_ipython_extension(ipython) -> None:
    """`%load_ext gemmlab`: the %gemmlab line magic and the %%gemmlab cell magic."""
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    @magics_class
    class GemmlabMagics(Magics):
        @line_cell_magic
        def gemmlab(self, line, cell=None):
            """%gemmlab ARGS: any gemmlab command. %%gemmlab [run|sweep|show] OPTIONS: the cell is a template
            (docs/notebook.md)."""
            if cell is None:
                run_line(line)
                return None
            return run_cell(line, cell)

    ipython.register_magics(GemmlabMagics)
