"""The compile cache on disk: where it is, its entries, their size and its limit (least recently used
go first), and the compile times `build` estimates from. compile.py writes and reads the entries."""

from __future__ import annotations

import os

from pathlib import Path

from .errors import GemmlabError
from .files import write_atomic


def cache_dir() -> Path:
    if os.environ.get("GEMMLAB_CACHE_DIR"):
        return Path(os.environ["GEMMLAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gemmlab"



CACHE_MAX_ENV = "GEMMLAB_CACHE_MAX_MB"
DEFAULT_CACHE_MAX_MB = 2048
TIMES = "compile-times.log"  # one line per cold compile: variant, arch, ms (for `build`'s estimate)
_PRUNE_EVERY = 64  # writes by this process between two looks at the cache's size
_writes = 0


def cache_limit() -> int | None:
    """The cache's size limit in bytes ($GEMMLAB_CACHE_MAX_MB, default 2048; 0: none)."""
    text = os.environ.get(CACHE_MAX_ENV, "").strip()
    try:
        mb = float(text) if text else DEFAULT_CACHE_MAX_MB
    except ValueError:
        raise GemmlabError(f"${CACHE_MAX_ENV} is a size in MB, not {text!r}") from None
    return None if mb <= 0 else int(mb * 2**20)


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _note_compile(directory: Path, variant: str, arch: str, ms: float) -> None:
    """Append to the compile-time log (one short line: an append of it is atomic), and keep the cache
    under its limit, looking at its size every so many writes."""
    global _writes
    try:
        with open(directory / TIMES, "a") as f:
            f.write(f"{variant}\t{arch}\t{ms:.0f}\n")
    except OSError:
        pass
    _writes += 1
    if _writes >= _PRUNE_EVERY:
        _writes = 0
        prune_cache()


def cache_entries(directory: Path | None = None) -> list[tuple[float, int, list[Path]]]:
    """(last used, bytes, files) of each entry in the cache, least recently used first."""
    directory = directory or cache_dir()
    entries: dict[str, list] = {}
    try:
        items = list(os.scandir(directory))
    except OSError:
        return []
    for item in items:
        stem, dot, ext = item.name.rpartition(".")
        if not dot or ext not in ("json", "cubin") or item.name.startswith("."):
            continue
        try:
            st = item.stat()
        except OSError:
            continue
        e = entries.setdefault(stem, [0.0, 0, []])
        if ext == "json":
            e[0] = st.st_mtime
        e[1] += st.st_size
        e[2].append(Path(item.path))
    return sorted((tuple(e) for e in entries.values()), key=lambda e: e[0])


def cache_stats() -> dict:
    entries = cache_entries()
    return {"directory": str(cache_dir()), "entries": len(entries), "bytes": sum(e[1] for e in entries),
            "limit_bytes": cache_limit()}


def prune_cache(limit: int | None = None) -> tuple[int, int]:
    """Remove the least recently used entries until the cache is under 90% of its limit (default:
    cache_limit()); (entries removed, bytes freed)."""
    limit = cache_limit() if limit is None else limit
    if not limit:
        return 0, 0
    entries = cache_entries()
    total = sum(e[1] for e in entries)
    removed = freed = 0
    if total <= limit:
        return 0, 0
    for _, size, files in entries:
        if total - freed <= limit * 0.9:
            break
        for f in files:
            try:
                f.unlink()
            except OSError:
                pass
        removed += 1
        freed += size
    _trim_times(cache_dir())
    return removed, freed


def _trim_times(directory: Path, keep: int = 20000) -> None:
    path = directory / TIMES
    try:
        if path.stat().st_size > 2**20:
            lines = path.read_text().splitlines()[-keep:]
            write_atomic(path, ("\n".join(lines) + "\n").encode())
    except OSError:
        pass


def clear_cache() -> tuple[int, int]:
    """Remove every entry (and the compile-time log); (entries removed, bytes freed)."""
    entries = cache_entries()
    for _, _, files in entries:
        for f in files:
            try:
                f.unlink()
            except FileNotFoundError:
                pass
    try:
        (cache_dir() / TIMES).unlink()
    except FileNotFoundError:
        pass
    return len(entries), sum(e[1] for e in entries)


def compile_times() -> dict[str, float]:
    """The median cold compile time in ms of each variant in the log (for build's estimate)."""
    import statistics
    try:
        lines = (cache_dir() / TIMES).read_text().splitlines()[-20000:]
    except OSError:
        return {}
    by: dict[str, list[float]] = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) == 3:
            try:
                by.setdefault(parts[0], []).append(float(parts[2]))
            except ValueError:
                pass
    return {v: statistics.median(ms) for v, ms in by.items()}
