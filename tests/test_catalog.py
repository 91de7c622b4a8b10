"""templates/catalog.py: where templates and the user's data live, which directories are searched, and
what an unknown, doubled or orphaned variant says. Written from the mutants tests/test_templates.py let
through (docs/testing.md, "Mutation testing")."""

import os

import pytest

import gemmlab
from gemmlab.errors import GemmlabError
from gemmlab.templates.catalog import Catalog, data_dir, default_user_dir, discover, user_dirs
from conftest import GOOD_BODY, write_template


def test_the_data_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "gemmlab" and default_user_dir() == tmp_path / "xdg" / "gemmlab" / "kernels"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "gemmlab"


def test_the_directories_searched(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.delenv("GEMMLAB_KERNELS", raising=False)
    assert user_dirs() == [default_user_dir()]
    monkeypatch.setenv("GEMMLAB_KERNELS", f"{a}{os.pathsep}{b}{os.pathsep}")
    assert user_dirs((b,)) == [b, a, default_user_dir()]  # each once, the first mention first
    os.symlink(a, tmp_path / "link")
    assert user_dirs((tmp_path / "link",)) == [tmp_path / "link", b, default_user_dir()]  # the link is a


def test_an_unknown_variant_names_three_near_ones():
    cat = Catalog(dirs=[], variants={n: None for n in ("tiled", "tiles", "tile", "tilted", "tiler")})
    with pytest.raises(GemmlabError) as e:
        cat.get("tilex")
    names = e.value.message.split("; did you mean ")[1].rstrip("?").split(", ")
    assert len(names) == 3 and set(names) <= set(cat.variants) and e.value.hint == "`gemmlab list` shows every variant"
    with pytest.raises(GemmlabError) as e:
        cat.get("zzz")
    assert e.value.message == "unknown variant 'zzz'"


def test_a_missing_kernels_dir_is_named(tmp_path):
    with pytest.raises(GemmlabError) as e:
        discover((tmp_path / "nope",))
    assert e.value.message == f"--kernels-dir {tmp_path / 'nope'}: no such directory"


def test_two_of_one_name_in_a_directory_and_the_rest_still_listed(user_dir):
    (user_dir / "sub").mkdir()
    write_template(user_dir, "aa", GOOD_BODY)
    write_template(user_dir / "sub", "aa", GOOD_BODY)
    write_template(user_dir / "sub", "zz", GOOD_BODY)  # after the twin, in sorted order
    cat = discover((user_dir,))
    e = cat.broken["aa"]
    assert e.message == (f"two templates of variant 'aa' in one directory: {user_dir / 'aa.cu.j2'} and "
                         f"{user_dir / 'sub' / 'aa.cu.j2'}")
    assert e.hint == "rename or remove one of them" and "zz" in cat.variants


def test_a_missing_user_directory_is_skipped_not_the_rest(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMLAB_KERNELS", str(tmp_path / "gone"))
    assert "tiled" in discover().variants  # the built-in ones after it still load


def test_a_template_from_a_variant_that_is_nowhere_is_broken_not_a_crash(user_dir):
    (user_dir / "kid.cu.j2").write_text('{#---\nname = "kid"\nfrom = "nosuch"\n---#}\n')
    cat = gemmlab.catalog((user_dir,))
    assert "nosuch" in cat.broken["kid"].message and "tiled" in cat.variants
