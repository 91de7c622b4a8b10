"""Where templates are found, and the catalog of those found: the user's directories before the built-in
one, a user template shadowing a built-in one of its name, a broken header kept aside with its error, and
the ladder's order.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import GemmlabError
from .file import SUFFIX, name_of
from .header import load_variant
from .variant import Variant


def builtin_dir() -> Path:
    """The templates shipped with gemmlab: gemmlab/kernels when installed (pyproject maps kernels/
    there), ./kernels in a checkout or an editable install. The rungs are in its folders (fp32/, skinny/,
    tensor/), the pieces they share in lib/."""
    here = Path(__file__).resolve().parent.parent  # gemmlab/
    installed = here / "kernels"
    return installed if installed.is_dir() else here.parent / "kernels"


def data_dir() -> Path:
    """gemmlab's per-user data: templates of `gemmlab new`, the run history, the tuning cache."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gemmlab"


def default_user_dir() -> Path:
    return data_dir() / "kernels"


def user_dirs(extra: tuple[str | Path, ...] = ()) -> list[Path]:
    """User template directories, highest priority first: --kernels-dir, then $GEMMLAB_KERNELS, then the
    per-user directory that `gemmlab new` writes to by default."""
    dirs = [Path(d) for d in extra]
    dirs += [Path(d) for d in os.environ.get("GEMMLAB_KERNELS", "").split(os.pathsep) if d]
    dirs.append(default_user_dir())
    seen, out = set(), []
    for d in dirs:
        key = d.expanduser().resolve()
        if key not in seen:
            seen.add(key)
            out.append(d.expanduser())
    return out


@dataclass
class Catalog:
    """All variants found, user directories before the built-in one."""
    dirs: list[Path]
    variants: dict[str, Variant] = field(default_factory=dict)
    broken: dict[str, GemmlabError] = field(default_factory=dict)

    def get(self, name: str) -> Variant:
        if name in self.variants:
            return self.variants[name]
        if name in self.broken:
            raise self.broken[name]
        near = difflib.get_close_matches(name, list(self.variants) + list(self.broken), n=3)
        raise GemmlabError(
            f"unknown variant '{name}'" + (f"; did you mean {', '.join(near)}?" if near else ""),
            hint="`gemmlab list` shows every variant")

    def ladder(self, problem: str | None = "gemm") -> list[Variant]:
        """The variants of one problem (default GEMM's; None: every problem's) in ladder order: each after
        its parent, siblings by name."""
        children: dict[str | None, list[Variant]] = {}
        for v in self.variants.values():
            if problem is not None and v.problem != problem:
                continue
            parent = v.parent if v.parent in self.variants and self.variants[v.parent].problem == v.problem else None
            children.setdefault(parent, []).append(v)
        out: list[Variant] = []

        def walk(parent):
            for v in sorted(children.get(parent, []), key=lambda v: (not v.builtin, v.name)):
                out.append(v)
                walk(v.name)

        walk(None)
        return out

    def problems(self) -> list[str]:
        """The problems the variants compute, GEMM first, then by name."""
        return sorted({v.problem for v in self.variants.values()} | {"gemm"}, key=lambda p: (p != "gemm", p))


def discover(extra_dirs: tuple[str | Path, ...] = ()) -> Catalog:
    """Scan the user directories (highest priority first) and the built-in directory, each with its
    subfolders. A template whose header is broken is kept aside with its error, so others still list;
    so are two templates of one name in one directory, since neither is the one meant."""
    users = user_dirs(extra_dirs)
    for d in extra_dirs:
        if not Path(d).expanduser().is_dir():
            raise GemmlabError(f"--kernels-dir {d}: no such directory")
    dirs = users + [builtin_dir()]
    files = [sorted(d.rglob("*" + SUFFIX)) if d.is_dir() else [] for d in dirs]
    hashes = _hashes(files)
    cat = Catalog(dirs=dirs)
    found: dict[str, list[tuple[Path, bool]]] = {}
    twins: dict[Path, Path] = {}  # a template -> another of its name in the same directory
    for d, paths in zip(cat.dirs, files):
        builtin = d == cat.dirs[-1]
        here: dict[str, Path] = {}
        for path in paths:
            name = name_of(path)
            if name in here:
                twins.setdefault(here[name], path)
                continue
            here[name] = path
            found.setdefault(name, []).append((path, builtin))
    for name, places in found.items():
        path, builtin = places[0]
        if path in twins:
            cat.broken[name] = GemmlabError(f"two templates of variant '{name}' in one directory: {path} and "
                                            f"{twins[path]}", hint="rename or remove one of them")
            continue
        find = lambda n: found[n][0][0] if n in found else None  # noqa: E731
        try:
            v = _load(path, builtin, find, hashes)
        except GemmlabError as e:
            cat.broken[name] = e
            continue
        if len(places) > 1:
            v = dataclasses.replace(v, shadows=places[1][0])  # (the loaded one may be in other catalogs)
        cat.variants[name] = v
    return cat


# Each template read in this process, by its path, its bytes and where it is (built in or not), with the
# templates it starts from (`from`) and their bytes. The API, the notebook magics and each command's steps
# ask for the catalog many times, and a catalog with one more directory (--kernels-dir, a user's template)
# holds every built-in again; reading a header is parsing and checking it (about 0.3 s for the built-ins),
# while hashing the files is well under 1 ms. An edited template has other bytes, so it is read again.
_loaded: dict[tuple, tuple[Variant, tuple]] = {}


def _hashes(files: list[list[Path]]) -> dict[Path, bytes]:
    """Each template's hash, by its path; none for a file that cannot be read (reading it says why)."""
    hashes = {}
    for paths in files:
        for p in paths:
            try:
                hashes[p] = hashlib.blake2b(p.read_bytes(), digest_size=16).digest()
            except OSError:
                pass
    return hashes


def _load(path: Path, builtin: bool, find, hashes: dict[Path, bytes]) -> Variant:
    """load_variant, or the variant read before from the same bytes, where each template it starts from is
    still the one `find` gives, with the same bytes."""
    key = (path, builtin, hashes.get(path))
    if key[2] is not None and key in _loaded:
        v, bases = _loaded[key]
        if all(find(name_of(b)) == b and hashes.get(b) == h for b, h in bases):
            return v
    v = load_variant(path, builtin, find=find)
    if key[2] is not None and all(b in hashes for b in v.bases):
        _loaded[key] = (v, tuple((b, hashes[b]) for b in v.bases))
    return v
