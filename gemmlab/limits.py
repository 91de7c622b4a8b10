"""The device limits a template names: SMEM_OPTIN, REGS_PER_SM and the others, the same numbers in the
header's expressions and in the template body.

A template never writes a limit as a number: `check = "SMEM <= SMEM_OPTIN"`, not `<= 227 * 1024`. The
numbers are chosen here, in one place. Where gemmlab knows the GPU (a run, a sweep: `limits(device)`)
they are that GPU's; otherwise (`gemmlab build`, `list`, validation on a machine without a GPU) they are
those of the target the built-in kernels are written for, sm_90 (the H100), as NVIDIA's CUDA C++
Programming Guide lists them ("Technical Specifications per Compute Capability").

Nothing here needs a GPU: a device is anything with DeviceInfo's fields (gemmlab/gpu/device.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# The GpcOrder launch argument (gpu/gpc.py) holds up to this many slots, one per TPC (the H100 has 66, the
# B200 74): a 256-byte struct. Templates size theirs by it (GPC_SLOTS, a global of the render environment).
GPC_SLOTS = 252


@dataclass(frozen=True)
class Limits:
    MAX_THREADS: int  # threads in a block
    REGS_PER_THREAD: int  # 32-bit registers a thread may use
    REGS_PER_SM: int  # 32-bit registers of an SM, shared by the threads of its resident blocks
    SMEM_PER_BLOCK: int  # bytes of shared memory a block may have without opting in: all its static shared memory
    SMEM_OPTIN: int  # bytes of (static and dynamic) shared memory a block may have once the kernel opts in
    SMEM_PER_SM: int  # bytes of shared memory of an SM, shared by its resident blocks
    source: str = field(default="", compare=False)  # where they come from: a GPU's name, or a target's defaults

    def names(self) -> dict[str, int]:
        """The limits by the names templates use."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "source"}


NAMES = tuple(f.name for f in fields(Limits) if f.name != "source")

# The target the built-in kernels are written for, whose limits apply where no GPU is known.
DEFAULT_ARCH = "sm_90"

# Per target, from the CUDA C++ Programming Guide. Threads, registers and the 48 KB without opt-in are the
# same on every architecture CUDA 13 compiles for (sm_75 on); the shared memory of an SM, and what a block
# may opt in to, are not (sm_80: 164 and 163 KB, sm_86 and sm_89: 100 and 99 KB).
DEFAULTS = {
    "sm_90": Limits(MAX_THREADS=1024, REGS_PER_THREAD=255, REGS_PER_SM=65536, SMEM_PER_BLOCK=48 * 1024,
                    SMEM_OPTIN=227 * 1024, SMEM_PER_SM=228 * 1024, source="sm_90 defaults"),
}


def limits(device=None) -> Limits:
    """The limits of `device` (a DeviceInfo) where there is one, else DEFAULT_ARCH's. A GPU reports its
    shared memory and registers; the thread and per-thread register limits are the same on all of them."""
    base = DEFAULTS[DEFAULT_ARCH]
    if device is None:
        return base
    return Limits(**dict(asdict(base), REGS_PER_SM=device.regs_per_sm, SMEM_PER_BLOCK=device.smem_per_block,
                         SMEM_OPTIN=device.smem_optin, SMEM_PER_SM=device.smem_per_sm, source=device.name))
