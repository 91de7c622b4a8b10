"""Wait for a file to change: the loop behind `gemmlab run --watch`.

Polling, not inotify: it works on every file system (network mounts, containers), and a template is
one small file. A change is a change of content, not of timestamp, so saving without editing does not
rerun, and an editor that saves by writing a new file and renaming it over the old one is seen too.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path


def fingerprint(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:  # mid-save, or deleted: no content yet
        return None


def wait_for_change(path: Path, poll_s: float = 0.3, timeout_s: float | None = None) -> bool:
    """Block until the content of `path` differs from what it is now, can be read, and has stayed the
    same for one more poll (an editor may write a file in several steps); True then, False if
    `timeout_s` passed first."""
    start = fingerprint(path)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    seen = start
    while deadline is None or time.monotonic() < deadline:
        time.sleep(poll_s)
        now = fingerprint(path)
        if now is not None and now != start and now == seen:
            return True
        seen = now
    return False
