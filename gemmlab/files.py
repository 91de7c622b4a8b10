"""Files gemmlab writes: never one the user already has (new_file, checked before a long run starts),
and never half of one after a crash or a full disk (write_atomic: the compile cache, the tuning cache,
every --out file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import GemmlabError


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace `path` whole or not at all: a temporary file beside it, then a rename. A failed write
    leaves the previous version and no temporary file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def new_file(path, option: str) -> Path | None:
    """A file gemmlab will write: it must not exist yet (nothing the user has is overwritten)."""
    if not path:
        return None
    path = Path(path)
    if path.exists():
        raise GemmlabError(f"{path} already exists; gemmlab does not overwrite it",
                           hint=f"choose a new file name for {option}")
    if not path.parent.is_dir():
        raise GemmlabError(f"{option} {path}: no such directory {path.parent}")
    try:  # now, not after a long run: can a file be made there?
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GemmlabError(f"{option} {path}: cannot write in {path.parent} ({e.strerror})",
                           hint=f"choose a file for {option} in a directory you can write to") from None
    return path
