"""gemmlab/files.py: a file is replaced whole or not at all, and gemmlab never writes over one of the
user's. Each message exactly (docs/testing.md, "Mutation testing")."""

import os

import pytest

from gemmlab import files
from gemmlab.errors import GemmlabError
from gemmlab.files import new_file, write_atomic


def test_write_atomic_takes_text_or_bytes_and_a_str_path(tmp_path):
    write_atomic(str(tmp_path / "r.json"), "caf\u00e9")
    assert (tmp_path / "r.json").read_bytes() == "caf\u00e9".encode()
    write_atomic(tmp_path / "r.json", b"\x00\x01")
    assert (tmp_path / "r.json").read_bytes() == b"\x00\x01" and os.listdir(tmp_path) == ["r.json"]


def test_the_temporary_file_is_hidden_beside_the_file(tmp_path, monkeypatch):
    seen = []
    real = os.replace
    monkeypatch.setattr(files.os, "replace", lambda a, b: (seen.append((a, b)), real(a, b)))
    write_atomic(tmp_path / "r.json", "x")
    (tmp, dest), = seen
    assert os.path.dirname(tmp) == str(tmp_path) and dest == tmp_path / "r.json"
    assert os.path.basename(tmp).startswith(".r.json.") and tmp.endswith(".tmp")


def test_a_failed_write_leaves_the_previous_version_and_no_temporary_file(tmp_path, monkeypatch):
    p = tmp_path / "r.json"
    write_atomic(p, "one")
    with pytest.raises(TypeError):
        write_atomic(p, 5)  # fails while writing
    monkeypatch.setattr(files.os, "replace", lambda a, b: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        write_atomic(p, "two")  # Ctrl-C before the rename
    assert p.read_text() == "one" and os.listdir(tmp_path) == ["r.json"]


def test_new_file(tmp_path):
    assert new_file(None, "--out") is None and new_file("", "--out") is None
    p = new_file(str(tmp_path / "r.json"), "--out")
    assert p == tmp_path / "r.json" and not p.exists() and os.listdir(tmp_path) == []  # the probe is gone
    p.write_text("mine")
    with pytest.raises(GemmlabError, match="already exists; gemmlab does not overwrite it") as e:
        new_file(p, "--out")
    assert e.value.message == f"{p} already exists; gemmlab does not overwrite it"
    assert e.value.hint == "choose a new file name for --out"
    with pytest.raises(GemmlabError) as e:
        new_file(tmp_path / "no" / "r.json", "--plot")
    assert e.value.message == f"--plot {tmp_path / 'no' / 'r.json'}: no such directory {tmp_path / 'no'}"


def test_new_file_where_nothing_can_be_written(tmp_path, monkeypatch):
    def refuse(**kw):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
    with pytest.raises(GemmlabError) as e:
        new_file(tmp_path / "r.json", "--out")
    assert e.value.message == f"--out {tmp_path / 'r.json'}: cannot write in {tmp_path} (Permission denied)"
    assert e.value.hint == "choose a file for --out in a directory you can write to"
    assert e.value.__suppress_context__


def test_new_file_probes_the_directory_itself(tmp_path):
    """Not the temporary directory: a file must be creatable where it will be written."""
    if os.geteuid() == 0:
        where = "/proc"  # modes do not stop root
    else:
        where = tmp_path / "read-only"
        where.mkdir()
        where.chmod(0o555)
    with pytest.raises(GemmlabError, match=f"--out {where}/r.json: cannot write in {where} "):
        new_file(f"{where}/r.json", "--out")
