"""One configured kernel: a variant's parameters resolved, its source rendered and compiled, once.

    kernel = configure(variant, {"TILE": 16}, "sm_90")   # resolve -> render -> NVRTC (cached)
    plan = kernel.plan(Shape(1024, 1024, 1024), sms=132)  # grid, block, smem, ..., the argument list

A Kernel is what travels from here on: to the worker process (it pickles; the worker loads its cubin),
into the rows, to `show`. Nothing here needs a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from .compile import Compiled, compile_rendered
from .render import render
from .templates import Geometry, Variant


@dataclass(frozen=True)
class LaunchPlan(Geometry):
    """How a kernel runs on one shape: its launch geometry (grid, block, shared memory, workspace, second
    kernel, TMA boxes, GPC order) and its arguments by name, in order (the template's launch.args, see
    templates.ARGUMENTS)."""
    args: tuple[str, ...] = ("A", "B", "C", "M", "N", "K")


@dataclass(frozen=True)
class Kernel:
    """A variant at one set of parameters, rendered and compiled."""
    compiled: Compiled

    @property
    def variant(self) -> Variant:
        return self.compiled.rendered.variant

    @property
    def params(self) -> Mapping[str, object]:
        return MappingProxyType(self.compiled.rendered.params)

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def dtype(self) -> str:
        return self.variant.dtype(self.params)

    @property
    def out_dtype(self) -> str:
        return self.variant.out_dtype(self.params)

    @property
    def resources(self):
        return self.compiled.resources

    @property
    def arch(self) -> str:
        return self.compiled.arch

    def plan(self, M: int, N: int, K: int, sms: int = 1) -> LaunchPlan:
        """The launch for shape M x N x K on a GPU of `sms` SMs (1 where only the shape's validity is in
        question): a GemmlabError if the kernel cannot take the shape."""
        params = self.compiled.rendered.params
        geometry = self.variant.geometry(params, M, N, K, sms)
        return LaunchPlan(**vars(geometry), args=self.variant.arguments(params, geometry))


def configure(variant: Variant, params: Mapping[str, object] | None = None, arch: str = "sm_90",
              use_cache: bool = True, extra_options: tuple[str, ...] = ()) -> Kernel:
    """Resolve the parameters (missing ones take their defaults; all are validated), render, compile."""
    return Kernel(compile_rendered(render(variant, params), arch, extra_options, use_cache=use_cache))
