"""A new user's first hour, without a GPU: every step of the README works, every table reads at 80, 120
and 200 columns, and every error is one message (issue: "a new user's first hour")."""

import json
import re
import subprocess
import sys
import tomllib

import pytest

from gemmlab import report
from gemmlab.runner import Result, Shape
from gemmlab.templates import builtin_dir
from conftest import ROOT


# ---------------------------------------------------------------------------- results hold no machine paths

def test_result_rows_name_templates_without_this_machines_directories(tmp_path, monkeypatch):
    builtin = report.row(Result("naive", {}, Shape(8, 8, 8), source=str(builtin_dir() / "naive.cu.j2")), 1e12)
    assert builtin["source"] == "kernels/naive.cu.j2"
    example = report.row(Result("oob", {}, Shape(8, 8, 8), source=str(ROOT / "examples/broken/oob.cu.j2")), 1e12)
    assert example["source"] == "examples/broken/oob.cu.j2"
    mine = tmp_path / "elsewhere" / "mytiled.cu.j2"
    monkeypatch.chdir(ROOT)
    assert report.row(Result("mytiled", {}, Shape(8, 8, 8), source=str(mine)), 1e12)["source"] == "mytiled.cu.j2"
    assert report.row(Result("cuBLAS", {}, Shape(8, 8, 8), source="cupy.matmul"), 1e12)["source"] == "cupy.matmul"


def test_committed_results_hold_no_absolute_paths():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.json"], capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    for name in tracked:
        text = (ROOT / name).read_text()
        found = re.findall(r'"(?:source|template)": "(/[^"]*)"', text)
        assert not found, f"{name} holds this machine's paths: {found[:2]}"


# ---------------------------------------------------------------------------- license and metadata

def test_the_project_says_its_license_and_authors():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert project["authors"] and all(a.get("name") for a in project["authors"])
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    # The SPDX license string needs setuptools 77; the test extra brings it, so that the wheel-building
    # install test runs (and is not skipped) in a fresh `python3 -m venv`, whose setuptools is older.
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in meta["build-system"]["requires"])
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in project["optional-dependencies"]["test"])


def test_ci_installs_as_the_readme_says_and_lets_no_cpu_test_skip():
    """CI upgraded pip and setuptools before the README's command, so it never saw a fresh venv's
    setuptools 65 skip the install test."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "--upgrade" not in ci and "python3 -m venv" in ci
    assert "a reason other than a missing GPU" in ci
