"""Rendered CUDA -> cubin with NVRTC, cached on disk; the resource report, PTX and SASS.

Nothing here needs a GPU: NVRTC compiles for any architecture it knows (`sm_90`, `sm_90a`, ...).
We always build a cubin, never PTX for the driver to JIT: PTX from an NVRTC newer than the driver
does not load (see shared notes). The GPU side (`load`) hands the cached cubin to cupy.RawModule.

Cache: one pair of files per key, `<key>.cubin` and `<key>.json` (log, PTX, resources, compile time),
where the key hashes the rendered source, the options, the architecture and the NVRTC version.
Editing a template changes its rendered source, so only that variant recompiles.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cache import _note_compile, _touch, cache_dir
from .files import write_atomic
from .errors import GemmlabError
from .render import Rendered

FORMAT = 1  # bump when the cache entry layout changes

# NVRTC (seen with 13.0) hands its PTX-to-cubin step to the driver's JIT cache (~/.nv/ComputeCache): on a
# hit it skips ptxas, so the resource report comes back empty and the compile time is not a cold one.
# We cache cubins ourselves and only ever load cubins, so that cache buys nothing: turn it off before
# NVRTC is first used.
os.environ["CUDA_CACHE_DISABLE"] = "1"
ENTRY = "gemm"  # every template defines extern "C" __global__ void gemm(...)
REDUCE = "reduce"  # and, if its header declares [launch.reduce], a second kernel reduce(W, C, M, N, K)
ARCH_RE = re.compile(r"^sm_(\d+)(a?)$")


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
    except Exception as e:  # a missing libnvrtc surfaces here, as several exception types
        raise GemmlabError(f"NVRTC is not available: {str(e).splitlines()[0]}",
                           hint="install it with `pip install nvidia-cuda-nvrtc` (a gemmlab dependency)") from None
    return nvrtc


def nvrtc_version() -> str:
    major, minor = _nvrtc().getVersion()
    return f"{major}.{minor}"


def check_arch(arch: str) -> str:
    m = ARCH_RE.match(arch)
    if not m:
        raise GemmlabError(f"architecture '{arch}' is not of the form sm_90 or sm_90a")
    supported = _nvrtc().getSupportedArchs()
    if int(m.group(1)) not in supported:
        raise GemmlabError(f"NVRTC {nvrtc_version()} cannot compile for {arch}; it knows "
                           + ", ".join(f"sm_{a}" for a in supported))
    return arch


def include_dirs() -> list[str]:
    """CUDA's headers for templates that include them (cuda_fp16.h, mma.h, ...)."""
    dirs = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        d = find_nvidia_header_directory("cudart")
        if d:
            dirs.append(d)
    except Exception:
        pass
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            dirs.append(os.path.join(os.environ[env], "include"))
    dirs.append("/usr/local/cuda/include")
    found = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
    # One directory, not a mix of versions: the first that also has crt/mma.h (wmma needs it).
    whole = [d for d in found if os.path.isfile(os.path.join(d, "crt", "mma.h"))]
    return (whole or found)[:1]


@dataclass
class Resources:
    """What ptxas reports for the kernel: per-thread registers, static shared memory per block,
    local-memory stack frame and spills (bytes; spills should be 0)."""
    registers: int = 0
    smem: int = 0
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


_RES_PATTERNS = {
    "registers": r"Used (\d+) registers",
    "smem": r"(\d+) bytes smem",
    "stack": r"(\d+) bytes stack frame",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
    "barriers": r"used (\d+) barriers",
}


def parse_resources(log: str, entry: str = ENTRY) -> Resources:
    """Read ptxas -v output for one entry function."""
    start = log.find(f"Function properties for {entry}\n")
    section = log[start:] if start >= 0 else log
    nxt = section.find("Function properties for", 1)
    section = section if nxt < 0 else section[:nxt]
    values = {}
    for key, pat in _RES_PATTERNS.items():
        m = re.search(pat, section)
        values[key] = int(m.group(1)) if m else 0
    return Resources(**values)


@dataclass
class Compiled:
    rendered: Rendered = field(repr=False)
    arch: str
    key: str
    cubin_path: Path
    ptx: str = field(repr=False)
    log: str = field(repr=False)
    resources: Resources = field(default_factory=Resources)
    compile_ms: float = 0.0   # NVRTC time when it was compiled
    cached: bool = False      # True when this call found it in the cache
    lookup_ms: float = 0.0    # this call's time: render-to-cubin on a miss, cache read on a hit

    @property
    def cubin(self) -> bytes:
        return self.cubin_path.read_bytes()


def options_for(arch: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [f"-arch={arch}", "--std=c++17", "-default-device", "-lineinfo",
            "--ptxas-options=-v", *[f"-I{d}" for d in include_dirs()], *extra]


def _map_log(log: str, rendered: Rendered) -> str:
    """Rewrite `tiled.cu(37): error: ...` as `kernels/tiled.cu.j2:48: error: ... (rendered tiled.cu:37)`."""
    pat = re.compile(rf"^{re.escape(rendered.name)}\((\d+)\): (.*)$")
    out = []
    for line in log.splitlines():
        m = pat.match(line)
        origin = rendered.template_line(int(m.group(1))) if m else None
        if m and origin:
            out.append(f"{pretty_path(origin[0])}:{origin[1]}: {m.group(2)}  (rendered {rendered.name}:{m.group(1)})")
        else:
            out.append(line)
    return "\n".join(out).strip()


def show_command(variant, params: dict) -> str:
    """The `gemmlab show` command line that prints this variant's rendered source: with the parameters
    that differ from its defaults, and the --kernels-dir a user template needs to be found."""
    import shlex
    from .templates import show_value, user_dirs
    args = ["gemmlab", "show", "--variant", variant.name]
    defaults = variant.defaults()
    args += [a for k, v in params.items() if defaults.get(k) != v for a in ("-p", f"{k}={show_value(v)}")]
    if not variant.builtin:
        here = variant.path.parent
        if not any(here.resolve() == d.resolve() for d in user_dirs()):  # $GEMMLAB_KERNELS, ~/.local/share/...
            args += ["--kernels-dir", str(here)]
    return " ".join(shlex.quote(a) for a in args + ["--what", "source"])


def pretty_path(path: str) -> str:
    """Relative to the working directory when the file is under it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _nvrtc_compile(rendered: Rendered, arch: str, options: list[str], version: str) -> tuple[str, bytes, str]:
    """One NVRTC compile: (PTX, cubin, log), or a GemmlabError with the log mapped to template lines."""
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(rendered.source, rendered.name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            hint = None
            if "cannot open source file" in log:
                hint = "CUDA headers were not found: install nvidia-cuda-runtime, or set CUDA_PATH"
            raise GemmlabError(
                f"variant '{rendered.variant.name}' does not compile for {arch} (NVRTC {version}):\n"
                + _map_log(log, rendered),
                hint=hint or f"see the rendered source: {show_command(rendered.variant, rendered.params)}") from None
        log = nvrtc.getProgramLog(prog).rstrip("\0")
        ptx = nvrtc.getPTX(prog)
        ptx = (ptx.decode() if isinstance(ptx, bytes) else ptx).rstrip("\0")
        # cupy's getCUBIN drops the cubin's last byte; put it back or cuobjdump and the loader refuse it.
        return ptx, nvrtc.getCUBIN(prog) + b"\0", log
    finally:
        nvrtc.destroyProgram(prog)


def compile_rendered(rendered: Rendered, arch: str, extra_options: tuple[str, ...] = (),
                     use_cache: bool = True) -> Compiled:
    """Compile to a cubin for `arch`, or take it from the cache. A variant that names an exact target
    (wgmma's sm_90a) is compiled for that target, if it is `arch`'s family."""
    t0 = time.perf_counter()
    check_arch(arch)
    need = rendered.variant.arch
    if need and need != arch:
        if need.rstrip("a") != arch.rstrip("a"):
            raise GemmlabError(f"variant '{rendered.variant.name}' needs {need}; the target here is {arch}",
                               hint="it uses instructions that exist only on that architecture")
        arch = check_arch(need)
    options = options_for(arch, extra_options)
    version = nvrtc_version()
    key = hashlib.sha256(json.dumps([FORMAT, rendered.source, options, version]).encode()).hexdigest()[:32]
    directory = cache_dir()
    meta_path, cubin_path = directory / f"{key}.json", directory / f"{key}.cubin"

    if use_cache and meta_path.exists() and cubin_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
            _touch(meta_path)  # recently used: the last to go when the cache is over its size
            return Compiled(rendered, arch, key, cubin_path, meta["ptx"], meta["log"],
                            Resources(**meta["resources"]), meta["compile_ms"], cached=True,
                            lookup_ms=(time.perf_counter() - t0) * 1e3)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged entry: compile again and overwrite it

    t1 = time.perf_counter()
    ptx, cubin, log = _nvrtc_compile(rendered, arch, options, version)
    compile_ms = (time.perf_counter() - t1) * 1e3
    v = rendered.variant
    entry, second = getattr(v, "entry", ENTRY), getattr(v, "second_entry", REDUCE)
    if not re.search(rf"\.entry\s+{entry}\s*\(", ptx):
        raise GemmlabError(f"variant '{v.name}' defines no kernel named {entry}",
                           hint='every template defines extern "C" __global__ void gemm(A, B, C, M, N, K)'
                           if entry == ENTRY else f'a {v.problem} template defines extern "C" __global__ void '
                                                  f'{entry}(...), its arguments as launch.args lists them')
    if v.reduce_grid and not re.search(rf"\.entry\s+{second}\s*\(", ptx):
        raise GemmlabError(f"variant '{v.name}' declares [launch.reduce] but defines no kernel "
                           f"named {second}", hint='define extern "C" __global__ void reduce(W, C, M, N, K)'
                           if second == REDUCE else f"define {second} with the same arguments as {entry}")
    resources = parse_resources(log, entry)

    meta = {"ptx": ptx, "log": log, "resources": asdict(resources), "compile_ms": compile_ms,
            "arch": arch, "options": options, "nvrtc": version, "variant": rendered.variant.name}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(cubin_path, cubin)
        write_atomic(meta_path, json.dumps(meta).encode())  # written last: it marks the entry complete
        _note_compile(directory, rendered.variant.name, arch, compile_ms)
    except OSError:
        # No writable cache: keep the cubin in a private temporary directory for this process.
        cubin_path = Path(tempfile.mkdtemp(prefix="gemmlab-")) / f"{key}.cubin"
        cubin_path.write_bytes(cubin)
    return Compiled(rendered, arch, key, cubin_path, ptx, log, resources, compile_ms, cached=False,
                    lookup_ms=(time.perf_counter() - t0) * 1e3)


def find_tool(name: str) -> str | None:
    """A CUDA tool (cuobjdump, compute-sanitizer, ncu): from the pip wheels, on PATH, or in a CUDA
    toolkit's bin directory."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        path = find_nvidia_binary_utility(name)
        if path:
            return path
    except Exception:
        pass
    if shutil.which(name):
        return shutil.which(name)
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.access(path := os.path.join(root, "bin", name), os.X_OK):
            return path
    return None


def sass(compiled: Compiled) -> str:
    """Disassemble the cubin with cuobjdump (which runs nvdisasm)."""
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    if not cuobjdump or not nvdisasm:
        missing = "cuobjdump" if not cuobjdump else "nvdisasm"
        raise GemmlabError(f"{missing} was not found, so SASS cannot be shown",
                           hint="install it with: pip install 'gemmlab[sass]'")
    env = dict(os.environ, PATH=os.path.dirname(nvdisasm) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run([cuobjdump, "-sass", str(compiled.cubin_path)], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0 or "Function" not in proc.stdout:
        raise GemmlabError(f"cuobjdump failed: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout
