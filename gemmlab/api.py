"""The Python API: the pipeline's stages in the order a run goes through them.

    cat = gemmlab.catalog()                                # find templates
    v = cat.get("tiled"); params = v.resolve({"TILE": 16})  # validate parameters
    kernel = gemmlab.build(v, params)                      # render + NVRTC (cached), no GPU needed
    v, params, why = gemmlab.choose(1024, 1024, 1024)      # or let `auto` pick for a shape
    problem = gemmlab.Problem(gemmlab.Shape(1024, 1024, 1024), dtype=kernel.dtype)
    result = problem.run(kernel)                           # check every element, then time

A tensor-core variant takes its input type as the parameter DTYPE: v.resolve({"DTYPE": "bf16"}).
"""

from __future__ import annotations

from pathlib import Path

from .errors import GemmlabError
from .kernel import Kernel, configure
from .templates import Catalog, Variant, discover


def catalog(kernels_dirs: tuple[str | Path, ...] = ()) -> Catalog:
    """Every variant: built-in templates, shadowed by those in user directories."""
    return discover(tuple(kernels_dirs))


def default_arch(arch: str | None = None) -> tuple[str, str | None]:
    """The architecture to compile for: the one asked for, else the GPU's, else sm_90 with a note."""
    if arch:
        return arch, None
    try:
        from .gpu.device import get_device
        return get_device().arch, None
    except GemmlabError:
        return "sm_90", "no GPU found: compiling for sm_90 (give --arch to choose)"


def build(variant: Variant, params: dict | None = None, arch: str | None = None, use_cache: bool = True) -> Kernel:
    """Render and compile one variant (missing parameters take their defaults) for `arch` (default:
    the GPU's): the configured kernel that runs, shows and reports."""
    arch, _ = default_arch(arch)
    return configure(variant, params, arch, use_cache=use_cache)


def choose(M: int, N: int, K: int, device: str | None = None, sms: int | None = None,
           kernels_dirs: tuple[str | Path, ...] = ()) -> tuple[Variant, dict, str]:
    """`--variant auto` for the API: (variant, params, why) for this shape on `device` (a GPU name as
    `gemmlab device` shows it; default: this machine's GPU), from the tuning cache or the rule."""
    from .results.model import Shape
    from .results.tuning import choose as pick
    if device is None or sms is None:
        from .gpu.device import get_device
        dev = get_device()
        device, sms = device or dev.name, sms or dev.sms
    return pick(catalog(kernels_dirs), device, Shape(M, N, K), sms)
