"""Template discovery, headers, parameter validation and launch geometry: no GPU."""

import itertools
import shutil
from types import SimpleNamespace

import pytest

import gemmlab
from gemmlab import GemmlabError
from gemmlab.limits import limits
from gemmlab.render import render
from gemmlab.templates import Param, builtin_dir, discover, load_variant
from conftest import GOOD_BODY, write_template

LADDER = ["naive", "coalesced", "tiled", "blocktile1d", "regblock", "vectorized", "bankfree", "warptile", "pipelined", "lean", "spread",
          "splitk", "splitk_atomic", "skinny", "skinny_async", "skinny_narrow", "wmma", "mma", "wgmma", "gemv", "gemv_n", "gemv_n_fp32", "wgmma_ws", "wgmma_pingpong", "wgmma_tf32", "wgmma_ws_fp8"]


def test_builtin_ladder_in_order():
    cat = discover()
    assert not cat.broken
    assert [v.name for v in cat.ladder()] == LADDER
    for v in cat.ladder()[1:]:
        assert v.parent in cat.variants, f"{v.name}'s parent {v.parent} is not a variant"
        assert v.predict, f"{v.name} should predict its gain over {v.parent}"
        # a number, and below 1 where the rung trades speed on square shapes for other shapes (splitk)
        assert v.predict_x and v.predict_x > 0, f"{v.name} should state its predicted speed-up as predict_x"


@pytest.mark.parametrize("name", LADDER)
def test_every_choice_is_usable(name):
    """Each declared choice of each parameter appears in at least one valid configuration. (The sample
    holds one for every value that has one: test_sample_is_the_nearest_valid_configuration.)"""
    v = discover().get(name)
    valid = v.sample()
    assert v.defaults() in valid and not any(v.violations(p) for p in valid)
    for pname, param in v.params.items():
        assert param.choices, f"{name}.{pname} declares its allowed values"
        for choice in param.choices:
            assert any(p[pname] == choice for p in valid), f"{name}: {pname}={choice} is never valid"


def test_tile_64_is_rejected_with_the_reason():
    v = discover().get("tiled")
    with pytest.raises(GemmlabError) as e:
        v.resolve({"TILE": 64})
    message = e.value.message
    assert "THREADS <= MAX_THREADS: one thread per C element of the tile, and a block holds at most MAX_THREADS threads" in message
    assert message.endswith("[THREADS = 4096, MAX_THREADS = 1024]")  # the launch's threads and the limit, as numbers


def test_regblock_constraints_reject_bad_combinations():
    v = discover().get("regblock")
    with pytest.raises(GemmlabError, match=r"at most MAX_THREADS threads.*\[THREADS = 4096, MAX_THREADS = 1024\]"):
        v.resolve({"TILE": 128, "REG": 2})  # 64 x 64 threads
    with pytest.raises(GemmlabError, match="idle"):
        v.resolve({"TILE": 32, "REG": 8})  # 4 x 4 threads


def test_parameters_are_parsed_and_checked():
    v = discover().get("regblock")
    assert v.resolve({"REG": "4", "TILE": "64"})["REG"] == 4
    with pytest.raises(GemmlabError, match="integer"):
        v.resolve({"REG": "four"})
    with pytest.raises(GemmlabError, match="did you mean TILE"):
        v.resolve({"TILEE": 64})
    with pytest.raises(GemmlabError, match="choose one of: 2, 4, 8"):
        v.resolve({"REG": 3})


def test_a_parameter_without_choices_still_meets_the_block_limits(user_dir):
    path = write_template(user_dir, "free", GOOD_BODY)
    path.write_text(path.read_text().replace("choices = [8, 16]\n", ""))
    v = load_variant(path, builtin=False)
    assert v.resolve({"TILE": "24"})["TILE"] == 24  # any value, within the limits
    with pytest.raises(GemmlabError, match="at least 1"):
        v.resolve({"TILE": -4})
    with pytest.raises(GemmlabError, match="at most 1024 threads"):
        v.resolve({"TILE": 33})


def test_launch_geometry():
    v = discover().get("tiled")
    g = v.geometry({"TILE": 32}, 100, 200, 300)
    assert g.grid == (7, 4, 1) and g.block == (32, 32, 1) and g.threads == 1024 and g.smem == 0
    naive = discover().get("naive")
    with pytest.raises(GemmlabError, match="grid"):
        naive.geometry({"BLOCK": 8}, 8, 8 * 70000, 8)  # grid.y over 65535


def test_user_template_shadows_builtin(user_dir):
    shutil.copy(builtin_dir() / "fp32/03_tiled.cu.j2", user_dir / "tiled.cu.j2")
    cat = discover((user_dir,))
    v = cat.get("tiled")
    assert not v.builtin and v.path.parent == user_dir
    assert v.shadows == builtin_dir() / "fp32/03_tiled.cu.j2"


def test_env_var_adds_directories(user_dir, monkeypatch):
    write_template(user_dir, "mine", GOOD_BODY)
    monkeypatch.setenv("GEMMLAB_KERNELS", str(user_dir))
    cat = discover()
    assert "mine" in cat.variants and cat.get("mine").parent == "tiled"
    assert [v.name for v in cat.ladder()].index("mine") > [v.name for v in cat.ladder()].index("tiled")


def test_unknown_variant_suggests_close_matches():
    with pytest.raises(GemmlabError, match="did you mean tiled"):
        discover().get("tilde")


BAD_HEADERS = {  # those that need more than one edit of a header (the others: HEADER_MISTAKES below)
    "toml error with its line": ("badtoml", "x = = 1\n", ":9: Invalid value"),  # the column note left out (below)
    "duplicate parameter": ("dup", "[params.TILE]\ndefault = 8\n", "Cannot declare ('params', 'TILE') twice"),
    "constraint on an unknown name": ("undef", '[[constraints]]\ncheck = "BOGUS > 1"\nwhy = "x"\n', "'BOGUS > 1'"),
}


@pytest.mark.parametrize("case", BAD_HEADERS)
def test_bad_headers_are_reported_with_file(user_dir, case):
    name, extra, expected = BAD_HEADERS[case]
    if case == "toml error with its line":
        path = write_template(user_dir, name, GOOD_BODY)
        lines = path.read_text().split("\n")
        lines.insert(8, extra.strip())  # becomes the file's line 9
        path.write_text("\n".join(lines))
    else:
        path = write_template(user_dir, name, GOOD_BODY, header_extra=extra)
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False)
    assert str(path) in e.value.message and expected in e.value.message, e.value.message
    if case == "toml error with its line":
        assert e.value.message == f"bad template header in {path}:9: Invalid value"
    # a broken template does not hide the others
    cat = discover((user_dir,))
    assert name in cat.broken and "tiled" in cat.variants


def test_name_must_match_file(user_dir):
    path = write_template(user_dir, "alpha", GOOD_BODY)
    path.rename(user_dir / "beta.cu.j2")
    with pytest.raises(GemmlabError) as e:
        load_variant(user_dir / "beta.cu.j2")
    assert e.value.message == (f"bad template header in {user_dir / 'beta.cu.j2'}: name = \"alpha\" but the file is "
                               "beta.cu.j2; they must agree (name it alpha.cu.j2, or set name = \"beta\")")


def test_a_regular_install_ships_the_kernels(tmp_path):
    """pip install . (not editable) maps kernels/ to gemmlab/kernels, its folders included; the variants
    must be found there, and render with the shared pieces of kernels/lib."""
    import subprocess
    import sys
    from conftest import ROOT
    # Built without isolation (the GPU machine has no network): setuptools must build wheels itself.
    pytest.importorskip("setuptools", minversion="77")  # the license string (PEP 639); the test extra brings it
    # From a copy of what the wheel is made of: a build/ left in the checkout keeps files since moved or
    # deleted, and setuptools would ship those too.
    src = tmp_path / "src"
    src.mkdir()
    for part in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / part, src / part)
    for part in ("gemmlab", "kernels"):
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(src)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    probe = ("import gemmlab; from gemmlab.render import render; print(gemmlab.__file__); cat = gemmlab.catalog(); "
             "print(sorted(cat.variants)); print(cat.broken); v = cat.get('wgmma_ws'); print(v.path); "
             "print(len(render(v).source))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                         check=True).stdout.split("\n")
    assert str(target) in out[0]
    others = [v.name for v in discover().variants.values() if v.problem != "gemm"]  # transpose, reduce, ...
    assert out[1:4] == [str(sorted(LADDER + others)), "{}", str(target / "gemmlab/kernels/tensor/22_wgmma_ws.cu.j2")]
    assert int(out[4]) > 10000  # rendered: hopper.j2, epilogue.j2 and stream_k.j2 were found in lib/
    # every module of the checkout is in the wheel and imports from it (a subpackage left out of
    # pyproject's list would import from nowhere), and the command runs
    modules = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                     for p in (ROOT / "gemmlab").rglob("*.py") if p.name != "__main__.py")
    probe = ("import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]; "
             "from gemmlab.cli import cli; cli(['list', '--csv'], prog_name='gemmlab')")
    listed = subprocess.run([sys.executable, "-c", probe, *modules], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert listed.returncode == 0 and "wgmma_ws" in listed.stdout, listed.stderr


@pytest.mark.parametrize("name,values,reason", [
    ("blocktile1d", {"BM": 128, "BN": 128, "TM": 4}, "at most MAX_THREADS [THREADS = 4096, MAX_THREADS = 1024]"),
    ("warptile", {"WM": 32, "WN": 32, "TM": 8, "TN": 8}, "32 lanes of a warp"),
    ("warptile", {"BM": 256, "BN": 256, "WM": 32, "WN": 32, "TM": 4, "TN": 8}, "16 warps per block"),
    ("pipelined", {"BM": 256, "WM": 64, "TM": 16, "TN": 16}, "32 lanes"),
    ("pipelined", {"BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "MINBLOCKS": 2, "BM": 256},
     "share an SM's REGS_PER_SM registers (REGS_PER_THREAD at most per thread); a thread needs TM*TN accumulators, "
     "TM+TN operands and about 56 more for addresses, or it spills [REGS_PER_THREAD = 255, REGS_PER_SM = 65536, THREADS = 512]"),
])
def test_upper_rungs_reject_bad_combinations_with_their_reason(name, values, reason):
    v = discover().get(name)
    with pytest.raises(GemmlabError) as e:
        v.resolve(values)
    assert reason in e.value.message, e.value.message


def test_predict_x_must_be_a_number(user_dir):
    path = write_template(user_dir, "guess", GOOD_BODY)
    path.write_text(path.read_text().replace('idea = "a test template"\n', 'idea = "a test template"\npredict_x = "fast"\n'))
    with pytest.raises(GemmlabError, match="predict_x"):
        load_variant(path, builtin=False)


def test_sample_covers_every_allowed_value():
    v = discover().get("pipelined")
    sample = v.sample()
    assert len(sample) < 30 < len(list(itertools.islice((p for p, bad in v.configs() if not bad), 31)))
    assert sample[0] == v.defaults() and all(not v.violations(p) for p in sample)
    for name, param in v.params.items():
        for value in param.choices:
            assert any(p[name] == value for p in sample), f"{name}={value} is never tested"


# ---------------------------------------------------------------------------- every header mistake, one by one

TOP = 'idea = "a test template"\n'
PARAM = "[params.TILE]\ndefault = 16\nchoices = [8, 16]\n"
LAUNCH = '[launch]\nblock = ["TILE", "TILE"]\ngrid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n'
PROBLEM = TOP + 'problem = "reduce"\n' + PARAM + LAUNCH  # a kernel of another problem than GEMM
PROBLEM_ARGS = "a reduce kernel lists its arguments by name in launch.args (gemmlab/problems/ declares what each problem provides)"

# (what is wrong, the edit to write_template's header as (old, new), what load_variant says after
# "bad template header in PATH: "). Each case breaks exactly one rule of templates.load_variant.
HEADER_MISTAKES = {
    "unknown top-level key": ((TOP, TOP + "colour = 1\n"), "unknown key(s) ['colour']; known: ['arch', 'constraints'"),
    "no name": (('name = "mistake"\n', ""), "missing 'name'"),
    "name not a string": (('name = "mistake"\n', "name = 1\n"), "'name' must be a str"),
    "no idea": ((TOP, ""), "missing 'idea'"),
    "idea not a string": ((TOP, "idea = 3\n"), "'idea' must be a str"),
    "parent not a string": (('parent = "tiled"\n', "parent = 1\n"), "'parent' must be a string"),
    "predict_x zero": ((TOP, TOP + "predict_x = 0\n"), "'predict_x' must be a positive number"),
    "predict_x a boolean": ((TOP, TOP + "predict_x = true\n"), "'predict_x' must be a positive number"),
    "predict_x a string": ((TOP, TOP + 'predict_x = "fast"\n'), "'predict_x' must be a positive number"),
    "arch not a target": ((TOP, TOP + 'arch = "sm90"\n'), "'arch' must name a target such as sm_90a"),
    "arch not a string": ((TOP, TOP + "arch = 90\n"), "'arch' must name a target such as sm_90a"),
    "dtypes empty": ((TOP, TOP + "dtypes = []\n"), "dtypes must be a non-empty list from ['fp32', 'tf32', 'fp16', 'bf16', 'e4m3', 'e5m2']"),
    "dtypes unknown": ((TOP, TOP + 'dtypes = ["fp32", "fp64"]\n'), "dtypes must be a non-empty list from"),
    "params not a table": ((PARAM, "params = 3\n"), "'params' must be a dict"),
    "parameter name not an identifier": ((PARAM, PARAM.replace("TILE", "1TILE")), "parameter name '1TILE' must be an identifier"),
    "parameter not a table": ((PARAM, "[params]\nTILE = 16\n"), "params.TILE needs a default"),
    "parameter without default": ((PARAM, "[params.TILE]\nchoices = [8, 16]\n"), "params.TILE needs a default"),
    "unknown parameter key": ((PARAM, PARAM + "colour = 1\n"), "params.TILE: unknown key(s) ['colour']"),
    "default a float": ((PARAM, "[params.TILE]\ndefault = 16.0\n"), "params.TILE.default must be an integer, boolean or string"),
    "choices empty": ((PARAM, "[params.TILE]\ndefault = 16\nchoices = []\n"), "params.TILE.choices must be a non-empty list of int"),
    "choices not a list": ((PARAM, "[params.TILE]\ndefault = 16\nchoices = 16\n"), "params.TILE.choices must be a non-empty list of int"),
    "choices of another type": ((PARAM, '[params.TILE]\ndefault = 16\nchoices = [8, "16"]\n'),
                                "params.TILE.choices must be a non-empty list of int"),
    "choices of booleans for an int": ((PARAM, "[params.TILE]\ndefault = 16\nchoices = [true, 16]\n"),
                                       "params.TILE.choices must be a non-empty list of int"),
    "default not a choice": ((PARAM, "[params.TILE]\ndefault = 32\nchoices = [8, 16]\n"),
                             "params.TILE.default 32 is not one of its choices [8, 16]"),
    "a limit's name": ((PARAM, PARAM + "[params.SMEM_OPTIN]\ndefault = 1\n"),
                       "parameter name 'SMEM_OPTIN' is a device limit's (gemmlab/limits.py); choose another"),
    "THREADS as a parameter": ((PARAM, PARAM + "[params.THREADS]\ndefault = 1\n"),
                               "parameter name 'THREADS' is taken: templates see the launch's THREADS by it"),
    "a constraint on THREADS, the block by the shape": (
        (LAUNCH, '[[constraints]]\ncheck = "THREADS <= 1024"\nwhy = "x"\n' + LAUNCH.replace('"TILE", "TILE"]', '"TILE", "TILE * M"]')),
        "constraint 'THREADS <= 1024' reads THREADS, but launch.block depends on M: a constraint holds for every shape; "
        "check the shape in [[launch.requires]]"),
    "a constraint on SMEM, the shared memory by the shape": (
        (LAUNCH, '[[constraints]]\ncheck = "SMEM <= SMEM_OPTIN"\nwhy = "x"\n' + LAUNCH + 'smem = "N * M * 4"\n'),
        "constraint 'SMEM <= SMEM_OPTIN' reads SMEM, but launch.smem depends on M, N: a constraint holds for every shape; "
        "check the shape in [[launch.requires]]"),
    "DTYPE declared": ((PARAM, PARAM + '[params.DTYPE]\ndefault = "fp32"\n'), "DTYPE is made from 'dtypes'"),
    "problem not an identifier": ((TOP, TOP + 'problem = "my-problem"\n'),
                                  "'problem' names what the kernel computes, such as \"transpose\" (default \"gemm\")"),
    "problem not a string": ((TOP, TOP + "problem = 3\n"),
                             "'problem' names what the kernel computes, such as \"transpose\" (default \"gemm\")"),
    "a problem's kernel without launch.args": ((TOP + PARAM + LAUNCH, PROBLEM), PROBLEM_ARGS),
    "a problem's launch.args empty": ((TOP + PARAM + LAUNCH, PROBLEM + "args = []\n"), PROBLEM_ARGS),
    "a problem's launch.args not a list": ((TOP + PARAM + LAUNCH, PROBLEM + 'args = "x"\n'), PROBLEM_ARGS),
    "a problem's launch.args not names": ((TOP + PARAM + LAUNCH, PROBLEM + 'args = ["x", "y-z"]\n'), PROBLEM_ARGS),
    "a problem's launch.args not strings": ((TOP + PARAM + LAUNCH, PROBLEM + 'args = ["x", 3]\n'), PROBLEM_ARGS),
    "zero_workspace a number": ((LAUNCH, LAUNCH + "zero_workspace = 0\n"),
                                "launch.zero_workspace must be true, false, or an expression over the parameters"),
    "constraint without why": ((LAUNCH, '[[constraints]]\ncheck = "TILE > 1"\n' + LAUNCH),
                               "constraints[0] needs a 'check' expression and a 'why' message"),
    "constraints not a list": ((TOP, TOP + "constraints = 3\n"),
                               "constraints must be a list of tables ([[constraints]]), each with a 'check' and a 'why'"),
    "requires not a list": ((LAUNCH, LAUNCH + "requires = 3\n"),
                            "launch.requires must be a list of tables ([[launch.requires]]), each with a 'check' and a 'why'"),
    "constraint check not a string": ((LAUNCH, '[[constraints]]\ncheck = 1\nwhy = "x"\n' + LAUNCH),
                                      "constraints[0] needs a 'check' expression and a 'why' message"),
    "no launch": ((LAUNCH, ""), "missing 'launch'"),
    "launch not a table": ((TOP + PARAM + LAUNCH, TOP + "launch = 1\n" + PARAM), "'launch' must be a dict"),
    "no launch.block": (('block = ["TILE", "TILE"]\n', ""), "missing 'launch.block'"),
    "launch.block not a list": (('block = ["TILE", "TILE"]\n', 'block = "TILE"\n'), "'launch.block' must be a list"),
    "no launch.grid": (('grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n', ""), "missing 'launch.grid'"),
    "launch.grid of four": (('grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n', 'grid = ["1", "1", "1", "1"]\n'),
                            "launch.grid must list 1 to 3 expressions"),
    "launch.block empty": (('block = ["TILE", "TILE"]\n', "block = []\n"), "launch.block must list 1 to 3 expressions"),
    "launch.block of floats": (('block = ["TILE", "TILE"]\n', "block = [16.0]\n"), "launch.block must list 1 to 3 expressions"),
    "zero_output a number": ((LAUNCH, LAUNCH + "zero_output = 1\n"),
                             "launch.zero_output must be true, false, or an expression over the parameters"),
    "resident a list": ((LAUNCH, LAUNCH + "resident = [true]\n"),
                        "launch.resident must be true, false, or an expression over the parameters"),
    "reduce not a table": ((LAUNCH, LAUNCH + "reduce = 1\n"), "launch.reduce must be a table with block and grid"),
    "reduce without grid": ((LAUNCH, LAUNCH + '[launch.reduce]\nblock = ["32"]\n'), "missing 'launch.reduce.grid'"),
    "tma of D": ((LAUNCH, LAUNCH + '[launch.tma]\nD = ["8", "8"]\n'),
                 "launch.tma maps A, B, Bt (B^T) and/or C to a box: 2 expressions, contiguous dimension first"),
    "tma box of three": ((LAUNCH, LAUNCH + '[launch.tma]\nA = ["8", "8", "8"]\n'),
                         "launch.tma maps A, B, Bt (B^T) and/or C to a box: 2 expressions, contiguous dimension first"),
    "gpc_order without group": ((LAUNCH, LAUNCH + '[launch.gpc_order]\nwhen = "true"\ncluster = "2"\n'),
                                "launch.gpc_order has three expressions: when, cluster and group"),
    "requires without why": ((LAUNCH, LAUNCH + '[[launch.requires]]\ncheck = "K % 4 == 0"\n'),
                             "launch.requires[0] needs a 'check' expression and a 'why' message"),
    "unknown launch key": ((LAUNCH, LAUNCH + "colour = 1\n"), "unknown launch key(s) ['colour']"),
    "unknown launch keys, sorted": ((LAUNCH, LAUNCH + "smen = \"0\"\nblocks = [1]\n"), "unknown launch key(s) ['blocks', 'smen']"),
    "defaults break a constraint": ((LAUNCH, '[[constraints]]\ncheck = "TILE > 16"\nwhy = "too small"\n' + LAUNCH),
                                    "the defaults break a constraint: TILE > 16: too small"),
    "defaults break two constraints": ((LAUNCH, '[[constraints]]\ncheck = "TILE > 16"\nwhy = "too small"\n'
                                                '[[constraints]]\ncheck = "TILE < 16"\nwhy = "too big"\n' + LAUNCH),
                                       "the defaults break a constraint: TILE > 16: too small; TILE < 16: too big"),
    "defaults make too big a block": ((PARAM, "[params.TILE]\ndefault = 64\n"),
                                      "the defaults break a constraint: block (64, 64, 1) has 4096 threads: a block holds at most 1024"),
}


@pytest.mark.parametrize("case", HEADER_MISTAKES)
def test_each_header_mistake_is_named_with_its_file(user_dir, case):
    (old, new), message = HEADER_MISTAKES[case]
    path = write_template(user_dir, "mistake", GOOD_BODY)
    text = path.read_text()
    assert text.count(old) == 1, "the edit must apply to the header"
    path.write_text(text.replace(old, new))
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False)
    assert e.value.message.startswith(f"bad template header in {path}: {message}"), e.value.message
    cat = discover((user_dir,))  # listed as broken, with the same message; the others still load
    assert cat.broken["mistake"].message == e.value.message and "tiled" in cat.variants


def test_an_unreadable_template_is_named(user_dir):
    path = user_dir / "latin1.cu.j2"
    path.write_bytes(b"{#---\nname = \"latin1\"\nidea = \"caf\xe9\"\n---#}\n")
    with pytest.raises(GemmlabError, match=r"^cannot read template .*latin1\.cu\.j2: 'utf-8' codec can't decode"):
        load_variant(path, builtin=False)


def test_a_header_without_its_marks_points_at_line_1(user_dir):
    path = user_dir / "nohead.cu.j2"
    path.write_text(GOOD_BODY)
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False)
    assert e.value.message == (f"bad template header in {path}:1: a template starts with a '{{#---' line and its "
                               "TOML header ends with '---#}'")


def test_a_name_that_is_not_an_identifier(user_dir):
    path = write_template(user_dir, "my-kernel", GOOD_BODY)
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False)
    assert e.value.message == f"bad template header in {path}: name 'my-kernel' must be an identifier (letters, digits, _)"


def test_a_launch_expression_that_fails_at_the_defaults(user_dir):
    path = write_template(user_dir, "badgrid", GOOD_BODY)
    path.write_text(path.read_text().replace('"cdiv(M, TILE)"]', '"cdiv(M, TILE)", "cdiv(K, TILE - 16)"]'))
    with pytest.raises(GemmlabError, match=r"launch\.grid: 'cdiv\(K, TILE - 16\)' failed: integer division or modulo by zero"):
        load_variant(path, builtin=False)
    path.write_text(path.read_text().replace('"cdiv(K, TILE - 16)"', '"TILE / 2"'))  # a float: not a block count
    with pytest.raises(GemmlabError, match=r"launch\.grid 'TILE / 2' gave 8\.0, not an integer"):
        load_variant(path, builtin=False)


@pytest.mark.parametrize("old, new, where", [
    ('block = ["TILE", "TILE"]', 'block = ["TILEX", "TILE"]', "launch.block"),
    ('block = ["TILE", "TILE"]', 'block = ["TILE", "TILE"]\nsmem = "TILEX"', "launch.smem"),
    ("[launch]", '[[constraints]]\ncheck = "TILEX"\nwhy = "x"\n[launch]', "constraint"),
])
def test_an_expression_that_is_an_undefined_name_says_which_name(user_dir, old, new, where):
    """A bare name is not None (Jinja's default for an expression's undefined result): the message names it."""
    path = write_template(user_dir, "undefined", GOOD_BODY)
    path.write_text(path.read_text().replace(old, new, 1))
    with pytest.raises(GemmlabError, match=rf"{where}: cannot evaluate 'TILEX': 'TILEX' is undefined$") as e:
        load_variant(path, builtin=False)
    assert "None" not in e.value.message


def _nearest_by_brute_force(v, limit):
    """Variant.sample's definition, over every combination."""
    valid = [p for p, bad in v.configs() if not bad]
    if len(valid) <= limit:
        return valid
    defaults = v.defaults()
    picked = [defaults] if defaults in valid else []
    for name, param in v.params.items():
        for value in param.choices:
            with_value = [p for p in valid if p[name] == value]
            if with_value:
                best = min(with_value, key=lambda p: sum(p[n] != defaults[n] for n in p))  # the first of the nearest
                if best not in picked:
                    picked.append(best)
    return picked


@pytest.mark.parametrize("limit", [0, 5, 54, 55, 1000])
def test_sample_is_the_nearest_valid_configuration(user_dir, limit):
    path = write_template(user_dir, "grid4", GOOD_BODY, header_extra=(
        "[params.A]\ndefault = 2\nchoices = [1, 2, 3, 4]\n[params.B]\ndefault = 1\nchoices = [1, 2, 3]\n"
        "[params.C]\ndefault = true\nchoices = [true, false]\n[params.D]\ndefault = \"x\"\nchoices = [\"x\", \"y\", \"z\"]\n"
        '[[constraints]]\ncheck = "A * B <= 6"\nwhy = "a"\n[[constraints]]\ncheck = "C or D != \'x\'"\nwhy = "b"\n'
        '[[constraints]]\ncheck = "A != 4 or (B == 3 and D == \'z\')"\nwhy = "c"\n[[constraints]]\ncheck = "TILE == 16 or A == 1"\nwhy = "d"\n'))
    v = load_variant(path, builtin=False)
    sample = v._sample(limit)  # not the cache: each limit afresh
    assert sample == _nearest_by_brute_force(v, limit)
    if limit < 55:  # 55 valid configurations: the defaults, and one for each value that has one
        assert len(sample) == 9 and {"TILE": 8, "A": 1, "B": 1, "C": True, "D": "x"} in sample  # TILE=8 needs A=1
        assert {"TILE": 16, "A": 2, "B": 1, "C": False, "D": "y"} in sample  # C=false needs D other than x: y first
        assert not any(p["A"] == 4 for p in sample)  # A=4 needs B=3, and A * B <= 6: never valid
    else:
        assert len(sample) == 55


# ---------------------------------------------------------------------------- device limits

def _gpu(**given):
    """A device as limits() reads it (DeviceInfo's fields), with the H100's numbers unless given."""
    return SimpleNamespace(**dict(name="a GPU", regs_per_sm=65536, smem_per_block=48 * 1024, smem_optin=227 * 1024,
                                  smem_per_sm=228 * 1024) | given)


def test_without_a_gpu_the_limits_are_sm_90s():
    assert limits().names() == {"MAX_THREADS": 1024, "REGS_PER_THREAD": 255, "REGS_PER_SM": 65536,
                                "SMEM_PER_BLOCK": 48 * 1024, "SMEM_OPTIN": 227 * 1024, "SMEM_PER_SM": 228 * 1024}
    v = discover().get("wgmma")
    assert v.limits == limits() and v.on(None) is v and v.on(_gpu()) is v  # the H100's own: the same variant


def test_a_gpus_limits_decide_what_runs_and_the_reason_names_them():
    v = discover().get("wgmma").on(_gpu(smem_optin=99 * 1024, smem_per_sm=100 * 1024, name="a smaller GPU"))
    assert v.limits.SMEM_OPTIN == 99 * 1024 and v.limits.source == "a smaller GPU"
    with pytest.raises(GemmlabError) as e:
        v.resolve()  # 4 stages of 128 x 64 and 64 x 256 bf16 tiles: 193 KB
    assert "fit in the SMEM_OPTIN bytes a block may have [SMEM = 197632, SMEM_OPTIN = 101376]" in e.value.message
    assert v.resolve({"STAGES": 2, "BN": 128})["STAGES"] == 2  # 65 KB


def test_template_bodies_see_the_gpus_limits():
    """wgmma_ws gives its consumers what the block's registers leave: more registers, a larger setmaxnreg."""
    v = discover().get("wgmma_ws")
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in render(v, v.defaults()).source
    big = v.on(_gpu(regs_per_sm=2 * 65536))
    assert "setmaxnreg.inc.sync.aligned.u32 248;" in render(big, big.defaults()).source  # REGS_PER_THREAD's cap


def test_a_parameter_may_not_take_a_limits_name(user_dir):
    path = write_template(user_dir, "greedy", GOOD_BODY, header_extra="[params.SMEM_OPTIN]\ndefault = 1\nchoices = [1]\n")
    with pytest.raises(GemmlabError, match="parameter name 'SMEM_OPTIN' is a device limit's"):
        load_variant(path, builtin=False)


def test_a_constraint_reads_the_launchs_shared_memory_as_SMEM():
    """The formula is written once, in launch.smem: the constraint on it reads SMEM."""
    v = discover().get("wgmma_ws")
    assert "SMEM <= SMEM_OPTIN" in [c.check for c in v.constraints]
    big = {"BM": 192, "BN": 256, "STAGES": 6}
    smem = v.geometry(dict(v.defaults(), **big), 64, 64, 64).smem
    assert smem > 227 * 1024
    assert f"[SMEM = {smem}, SMEM_OPTIN = 232448]" in "\n".join(v.violations(dict(v.defaults(), **big)))


def test_SMEM_and_THREADS_are_not_parameters_and_not_per_shape(user_dir):
    path = write_template(user_dir, "taken", GOOD_BODY, header_extra="[params.SMEM]\ndefault = 1\nchoices = [1]\n")
    with pytest.raises(GemmlabError, match="parameter name 'SMEM' is taken: templates see the launch's SMEM by it"):
        load_variant(path, builtin=False)
    path = write_template(user_dir, "shaped", GOOD_BODY, header_extra=(
        '[[constraints]]\ncheck = "SMEM <= SMEM_OPTIN"\nwhy = "fits"\n'))
    path.write_text(path.read_text().replace("[launch]\n", '[launch]\nsmem = "M * 4"\n'))
    with pytest.raises(GemmlabError, match=r"constraint 'SMEM <= SMEM_OPTIN' reads SMEM, but launch.smem depends on M"):
        load_variant(path, builtin=False)


# ---------------------------------------------------------------------------- values as typed, input types, the ladder

@pytest.mark.parametrize("text,value", [("1", True), ("true", True), (" Yes ", True), ("ON", True),
                                        ("0", False), ("False", False), ("no", False), ("off", False)])
def test_a_boolean_parameter_takes_the_usual_words(text, value):
    assert Param("P", True, (True, False)).parse(text) is value


@pytest.mark.parametrize("cls_default,text,message", [
    (True, "maybe", "parameter P takes true or false, not 'maybe'"),
    (8, "eight", "parameter P takes an integer, not 'eight'"),
    (8, "08", "parameter P takes an integer, not '08'"),  # base 0: a leading zero is no octal guess
])
def test_a_value_of_the_wrong_kind_is_named(cls_default, text, message):
    with pytest.raises(GemmlabError) as e:
        Param("P", cls_default).parse(text)
    assert e.value.message == message


@pytest.mark.parametrize("text", ["16", " 16 ", "0x10", "0o20", "0b10000"])
def test_an_integer_parameter_takes_any_base(text):
    assert Param("P", 8).parse(text) == 16


def test_a_string_parameter_is_taken_as_typed():
    assert Param("E", "none", ("none", "relu")).parse("relu") == "relu"


def test_the_input_type_of_a_configuration():
    cat = discover()
    wmma, tiled = cat.get("wmma"), cat.get("tiled")
    assert wmma.dtype({"DTYPE": "fp16"}) == "fp16" and wmma.dtype({}) == "bf16" and tiled.dtype({}) == "fp32"
    overrides = {"BM": 64}
    assert wmma.for_dtype(None, overrides) == {"BM": 64} and wmma.for_dtype("fp16", overrides) == {"BM": 64, "DTYPE": "fp16"}
    assert overrides == {"BM": 64}  # not changed in place
    assert wmma.for_dtype("fp16", {"DTYPE": "fp16"}) == {"DTYPE": "fp16"} and wmma.for_dtype("tf32") == {"DTYPE": "tf32"}
    assert tiled.for_dtype("fp32", {"TILE": 8}) == {"TILE": 8}  # one type: no DTYPE parameter to set
    with pytest.raises(GemmlabError) as e:
        wmma.for_dtype("fp16", {"DTYPE": "bf16"})
    assert e.value.message == "--dtype fp16 and -p DTYPE=bf16 disagree"
    with pytest.raises(GemmlabError) as e:
        wmma.for_dtype("fp32")
    assert e.value.message == "variant 'wmma' runs bf16, fp16, tf32, not fp32"
    assert e.value.hint == "`gemmlab list --dtype fp32` shows the variants that run fp32"


def test_the_output_type_of_a_configuration():
    mma, tiled = discover().get("mma"), discover().get("tiled")
    assert mma.out_dtype({"OUT_DTYPE": "bf16"}) == "bf16" and mma.out_dtype({}) == "fp32" == tiled.out_dtype(tiled.defaults())
    assert mma.for_dtype("bf16", {"BM": 64}, "bf16") == {"BM": 64, "OUT_DTYPE": "bf16", "DTYPE": "bf16"}
    assert mma.for_dtype(None, None, "fp32") == {} and mma.for_dtype(None, {"OUT_DTYPE": "bf16"}, "bf16") == {"OUT_DTYPE": "bf16"}
    assert tiled.for_dtype("fp32", {"TILE": 8}, "fp32") == {"TILE": 8}  # C in fp32: what every variant writes
    with pytest.raises(GemmlabError) as e:
        tiled.for_dtype("fp32", None, "bf16")
    assert e.value.message == "variant 'tiled' writes C in fp32 only, not bf16"
    assert e.value.hint == "the tensor-core rungs wmma, mma and the wgmma ones take --out-dtype"
    with pytest.raises(GemmlabError) as e:
        mma.for_dtype("bf16", {"OUT_DTYPE": "fp32"}, "bf16")
    assert e.value.message == "--out-dtype bf16 and -p OUT_DTYPE=fp32 disagree"


def test_a_value_reached_only_by_changing_every_other_parameter_is_sampled(user_dir):
    path = write_template(user_dir, "far", GOOD_BODY, header_extra=(
        "[params.X]\ndefault = 0\nchoices = [0, 1]\n[params.Y]\ndefault = 0\nchoices = [0, 1]\n"
        '[[constraints]]\ncheck = "X == 0 or (Y == 1 and TILE == 8)"\nwhy = "far"\n'))
    v = load_variant(path, builtin=False)
    assert {"TILE": 8, "X": 1, "Y": 1} in v._sample(0) == _nearest_by_brute_force(v, 0)


def test_the_ladder_keeps_an_orphan_and_puts_user_rungs_after_built_in_siblings(user_dir):
    write_template(user_dir, "aaa", GOOD_BODY, parent="tiled")  # sorts before blocktile1d by name
    write_template(user_dir, "orphan", GOOD_BODY, parent="nosuchrung")
    names = [v.name for v in discover((user_dir,)).ladder()]
    assert names.index("tiled") < names.index("blocktile1d") < names.index("aaa")  # built-in first, then by name
    assert "orphan" in names  # its parent is missing: it stands at the top level, not nowhere


# ---------------------------------------------------------------------------- the built-in folders

def test_the_kernels_folder_shows_the_ladder():
    """`ls kernels/` shows the groups (and the suites' shapes and the multi-GPU schedules), and the numbers in
    the file names the ladder's order."""
    problems = ["copy", "histogram", "reduce", "scan", "transpose"]  # the other problems' ladders (test_problems)
    assert sorted(p.name for p in builtin_dir().iterdir()) == sorted(["dist", "fp32", "lib", "shapes", "skinny", "tensor",
                                                                      "tuning.json"] + problems)
    assert {p.suffix for p in (builtin_dir() / "dist").iterdir()} == {".toml"}  # schedules, not variants
    files = sorted((p for p in builtin_dir().rglob("*.cu.j2") if p.parent.name not in problems), key=lambda p: p.name)
    assert [p.name.split("_", 1)[1][: -len(".cu.j2")] for p in files] == LADDER
    assert {p.parent.name for p in files[:11]} == {"fp32"} and {p.parent.name for p in files[11:16]} == {"skinny"}
    assert not list((builtin_dir() / "lib").glob("*.cu.j2"))  # pieces, not variants


def test_a_number_orders_a_template_without_naming_it(user_dir):
    (user_dir / "sub").mkdir()
    ordered = write_template(user_dir, "mine", GOOD_BODY).rename(user_dir / "sub" / "07_mine.cu.j2")
    v = discover((user_dir,)).get("mine")
    assert v.path == ordered and not v.builtin
    ordered.rename(user_dir / "sub" / "07_yours.cu.j2")
    with pytest.raises(GemmlabError, match=r'name = "mine" but the file is 07_yours.cu.j2; they must agree'):
        load_variant(user_dir / "sub" / "07_yours.cu.j2")


def test_two_templates_of_one_name_in_one_directory_are_neither(user_dir):
    write_template(user_dir, "tiled", GOOD_BODY)
    (user_dir / "old").mkdir()
    write_template(user_dir / "old", "tiled", GOOD_BODY).rename(user_dir / "old" / "03_tiled.cu.j2")
    cat = discover((user_dir,))
    with pytest.raises(GemmlabError, match="two templates of variant 'tiled' in one directory"):
        cat.get("tiled")


def test_sample_is_every_valid_configuration_up_to_the_limit():
    v = discover().get("regblock")  # 21 valid configurations
    every = [p for p, bad in v.configs() if not bad]
    assert len(every) == 21 and v.sample() == every and v.sample(limit=21) == every
    assert v.sample(limit=20) == _nearest_by_brute_force(v, 20) != every
    first = v.sample()
    first[0]["TILE"] = 999  # a copy: the cached sample is not changed through it
    assert v.sample() == every


def test_values_are_shown_as_a_user_types_them():
    from gemmlab.templates import show_params, show_value
    assert [show_value(v) for v in (True, False, 8, "relu", "RowMajor")] == ["true", "false", "8", "relu", "RowMajor"]
    assert show_params({"TILE": 8, "PREFETCH": False}) == "TILE=8 PREFETCH=false"


def test_a_value_of_the_wrong_type_is_an_error_not_a_rejected_point():
    with pytest.raises(GemmlabError) as e:
        Param("TILE", 8, (8, 16)).check("8")
    assert e.value.message == "parameter TILE takes a int, not '8'"
    assert Param("TILE", 8, (8, 16)).check(32) == "TILE=32 is not allowed; choose one of: 8, 16"
    assert Param("TILE", 8, (8, 16)).check(16) is None and Param("X", True).check(False) is None


def test_an_unknown_parameter_lists_the_known_ones(user_dir):
    with pytest.raises(GemmlabError) as e:
        discover().get("tiled").resolve({"ZZZ": 1})
    assert e.value.message == "variant 'tiled' has no parameter ZZZ; its parameters: TILE, PREFETCH"
    with pytest.raises(GemmlabError) as e:
        discover().get("tiled").resolve({"TILES": 1})
    assert e.value.message == "variant 'tiled' has no parameter TILES (did you mean TILE?); its parameters: TILE, PREFETCH"
    path = write_template(user_dir, "bare", GOOD_BODY.replace("{{ TILE }}", "16"))
    path.write_text(path.read_text().replace(PARAM, "").replace('["TILE", "TILE"]', '["16", "16"]').replace("TILE)", "16)"))
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False).resolve({"TILE": 8})
    assert e.value.message == "variant 'bare' has no parameter TILE; its parameters: none"


# ---------------------------------------------------------------------------- the launch, key by key

LAUNCHES = """{#---
name = "launches"
idea = "every launch key"
[params.TILE]
default = 16
choices = [8, 16, 32]
[params.SPLIT]
default = 2
choices = [1, 2]
[launch]
block = ["TILE", "TILE * 4"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)", "SPLIT * SMS"]
smem = "TILE * TILE * 4"
workspace = "SPLIT * M * N * 4"
zero_output = "SPLIT > 1"
resident = "SPLIT > 1"
[launch.reduce]
block = ["256"]
grid = ["cdiv(M * N, 256)"]
[launch.tma]
A = ["TILE", "TILE * 4"]
[launch.gpc_order]
when = "M >= 128"
cluster = "2"
group = "SPLIT * 4"
[[launch.requires]]
check = "K % 4 == 0"
why = "a row of A starts on 16 bytes"
---#}
"""


def test_the_geometry_of_every_launch_key(user_dir):
    from gemmlab.templates import Geometry
    path = user_dir / "launches.cu.j2"
    path.write_text(LAUNCHES + GOOD_BODY)
    v = load_variant(path, builtin=False)
    assert v.geometry({"TILE": 16, "SPLIT": 2}, 128, 64, 32) == Geometry(
        grid=(4, 8, 2), block=(16, 64, 1), smem=1024, workspace=2 * 128 * 64 * 4, zero_output=True, resident=True,
        reduce_grid=(32, 1, 1), reduce_block=(256, 1, 1), tma=(("A", (16, 64)),), gpc_order=(2, 8))
    assert v.geometry({"TILE": 8, "SPLIT": 1}, 64, 64, 32, sms=132) == Geometry(
        grid=(8, 8, 132), block=(8, 32, 1), smem=256, workspace=64 * 64 * 4, zero_output=False, resident=False,
        reduce_grid=(16, 1, 1), reduce_block=(256, 1, 1), tma=(("A", (8, 32)),), gpc_order=None)
    # a launch without the optional keys: none of them
    assert discover().get("tiled").geometry({"TILE": 32, "PREFETCH": False}, 100, 200, 300) == Geometry(
        grid=(7, 4, 1), block=(32, 32, 1), smem=0, workspace=0, zero_output=False, resident=False,
        reduce_grid=None, reduce_block=None, tma=(), gpc_order=None)
    with pytest.raises(GemmlabError) as e:
        v.geometry({"TILE": 16, "SPLIT": 2}, 64, 64, 30)
    assert e.value.message == "variant 'launches' cannot run shape 64x64x30: a row of A starts on 16 bytes (K % 4 == 0)"
    # the block's threads are x * y * z, whatever its shape
    assert v.violations({"TILE": 16, "SPLIT": 2}) == []
    assert v.violations({"TILE": 32, "SPLIT": 2}) == [
        "block (32, 128, 1) has 4096 threads: a block holds at most 1024 threads (and (1024, 1024, 64) per dimension)"]


def test_a_grid_may_reach_cudas_limit_and_not_pass_it():
    naive = discover().get("naive")  # grid (cdiv(M, BLOCK), cdiv(N, BLOCK))
    assert naive.geometry({"BLOCK": 8}, 8, 8 * 65535, 8).grid == (1, 65535, 1)
    assert naive.geometry({"BLOCK": 8}, 8 * (2**31 - 1), 8, 8).grid == (2**31 - 1, 1, 1)
    for M, N in ((8, 8 * 65536), (8 * 2**31, 8), (0, 8)):
        with pytest.raises(GemmlabError) as e:
            naive.geometry({"BLOCK": 8}, M, N, 8)
        grid = (-(-M // 8), -(-N // 8), 1)
        assert e.value.message == (f"shape {M}x{N}x8 needs a grid of {grid} blocks for variant 'naive'; CUDA allows "
                                   "at most (2147483647, 65535, 65535) (x, y, z)")
        assert e.value.hint == "use a larger tile or a smaller shape"


def test_a_block_that_reads_the_shape(user_dir):
    """Allowed where no constraint reads THREADS (docs/writing-a-template.md): the launch gets the shape's
    block; the body's THREADS and the block limits are those of M = N = K = 1 (the body is rendered once
    for every shape)."""
    path = write_template(user_dir, "byshape", GOOD_BODY + "// {{ THREADS }} threads\n")
    path.write_text(path.read_text().replace("choices = [8, 16]", "choices = [16, 2048]")
                    .replace('block = ["TILE", "TILE"]', 'block = ["TILE * M if K > 0 else TILE / 2", "N", "K"]'))
    v = load_variant(path, builtin=False)
    assert v.geometry({"TILE": 16}, 4, 8, 2).block == (64, 8, 2)
    assert v.threads({"TILE": 16}) == 16 and "// 16 threads\n" in render(v).source
    assert v.violations({"TILE": 2048}) == [
        "block (2048, 1, 1) has 2048 threads: a block holds at most 1024 threads (and (1024, 1024, 64) per dimension)"]
    with pytest.raises(GemmlabError) as e:
        v.geometry({"TILE": 16}, 16, 16, 0)
    assert e.value.message == f"{path}: launch.block 'TILE * M if K > 0 else TILE / 2' gave 8.0, not an integer"


@pytest.mark.parametrize("key, reads", [("block", "THREADS"), ("smem", "SMEM")])
def test_a_launch_expression_a_constraint_reads_that_fails_names_its_key(user_dir, key, reads):
    path = write_template(user_dir, "broken", GOOD_BODY,
                          header_extra=f'[[constraints]]\ncheck = "{reads} > 0"\nwhy = "something to do"\n')
    text = path.read_text()
    path.write_text(text.replace('block = ["TILE", "TILE"]', 'block = ["TILE // (TILE - 16)", "TILE"]') if key == "block"
                    else text.replace("[launch]\n", '[launch]\nsmem = "TILE // (TILE - 16)"\n'))
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False)
    assert e.value.message == f"{path}: launch.{key}: 'TILE // (TILE - 16)' failed: integer division or modulo by zero"


def test_a_constraint_that_names_no_limit_is_its_reason_alone(user_dir):
    path = write_template(user_dir, "plain", GOOD_BODY, header_extra='[[constraints]]\ncheck = "TILE > 8"\nwhy = "big enough"\n')
    assert load_variant(path, builtin=False).violations({"TILE": 8}) == ["TILE > 8: big enough"]


def test_sample_is_worked_out_once_per_header(monkeypatch):
    from gemmlab.templates import variant
    monkeypatch.setattr(variant, "_samples", {})  # cold, whatever earlier tests cached
    v = discover().get("regblock")
    every = [p for p, bad in v.configs() if not bad]
    assert v.sample() == every and v.sample(limit=20) == _nearest_by_brute_force(v, 20)
    monkeypatch.setattr(v, "_sample", None)  # from the cache now
    assert v.sample() == every


def test_sample_takes_every_configuration_up_to_64(user_dir):
    path = write_template(user_dir, "many", GOOD_BODY, header_extra=(
        "[params.A]\ndefault = 2\nchoices = [" + ", ".join(map(str, range(1, 34))) + "]\n"
        '[[constraints]]\ncheck = "TILE == 16 or A > 1"\nwhy = "x"\n'))
    v = load_variant(path, builtin=False)
    every = [p for p, bad in v.configs() if not bad]
    assert len(every) == 65 and v.sample(limit=65) == every
    assert v.sample() == _nearest_by_brute_force(v, 64) and len(v.sample()) == 34  # the defaults, TILE 8, the 32 other values of A


def test_the_sample_on_a_gpu_where_the_defaults_do_not_fit_leaves_them_out():
    v = discover().get("wgmma").on(_gpu(smem_optin=99 * 1024, smem_per_sm=100 * 1024))
    assert v.violations(v.defaults())  # 193 KB of shared memory
    sample = v.sample()
    assert sample and v.defaults() not in sample and not any(v.violations(p) for p in sample)


def test_past_the_limit_the_sample_leaves_out_defaults_the_gpu_cannot_run(user_dir):
    path = write_template(user_dir, "big", GOOD_BODY, header_extra=(
        "[params.S]\ndefault = 200\nchoices = [50, 100, 200]\n"
        '[[constraints]]\ncheck = "S * 1024 <= SMEM_OPTIN"\nwhy = "fits"\n'))
    v = load_variant(path, builtin=False).on(_gpu(smem_optin=100 * 1024))
    assert v.violations(v.defaults()) == ["S * 1024 <= SMEM_OPTIN: fits [SMEM_OPTIN = 102400]"]
    assert v._sample(1) == [{"TILE": 8, "S": 50}, {"TILE": 16, "S": 50}, {"TILE": 16, "S": 100}] == _nearest_by_brute_force(v, 1)


# ---------------------------------------------------------------------------- what a header gives, field by field

def test_a_header_end_to_end(user_dir):
    path = write_template(user_dir, "fields", GOOD_BODY, header_extra='help = "the tile\'s side"\n[params.SPLIT]\ndefault = 2\n')
    path.write_text(path.read_text().replace('idea = "a test template"\n', 'idea = "a test template"\narch = "sm_90a"\n')
                    .replace("[launch]\n", "[launch]\nzero_output = true\nresident = false\nzero_workspace = true\n")
                    .replace("---#}", '[[launch.requires]]\ncheck = "M % 64 == 0"\nwhy = "whole tiles"\n'
                             '[launch.gpc_order]\nwhen = true\ncluster = "2"\ngroup = "SPLIT * 4"\n---#}', 1))
    v = load_variant(path)
    assert v.builtin and v.arch == "sm_90a" and v.predict == "" and v.predict_x is None and v.bases == ()
    assert v.params == {"TILE": Param("TILE", 16, (8, 16), "the tile's side"), "SPLIT": Param("SPLIT", 2, None, "")}
    # booleans as the expressions they stand for, as launch.resident's message shows them
    assert (v.zero_output, v.resident, v.zero_workspace, v.gpc_order) == (
        "true", "false", "true", {"when": "true", "cluster": "2", "group": "SPLIT * 4"})
    g = v.geometry(v.defaults(), 64, 64, 64)  # (a whole tile: loading the header needs the shape it checks)
    assert (g.zero_output, g.resident, g.zero_workspace, g.gpc_order) == (True, False, True, (2, 8))
    assert (v.problem, v.entry, v.second_entry, v.args) == ("gemm", "gemm", "reduce", None)
    assert not load_variant(path, builtin=False).builtin


def test_a_header_of_another_problem(user_dir):
    """A kernel of another problem than GEMM names its arguments (any names: the problem, not launch.args'
    GEMM list, says what they are) and is entered by the problem's name."""
    path = write_template(user_dir, "halve", GOOD_BODY)
    path.write_text(path.read_text().replace(TOP + PARAM + LAUNCH, PROBLEM + 'args = ["x", "y", "n"]\n'))
    v = load_variant(path, builtin=False)
    assert (v.problem, v.entry, v.second_entry, v.args) == ("reduce", "reduce", "reduce_finish", ("x", "y", "n"))
    assert v.arguments(v.defaults(), v.geometry(v.defaults(), 64, 64, 64)) == ("x", "y", "n")


def test_the_input_type_parameter():
    assert discover().get("wmma").params["DTYPE"] == Param("DTYPE", "bf16", ("bf16", "fp16", "tf32"),
                                                           "input type (--dtype); C is always fp32")
    assert "DTYPE" not in discover().get("tiled").params


@pytest.mark.parametrize("toml, message", [
    ("x = ", "Invalid value (at end of document)"),  # no line to give: tomllib names none
    ('x = "abc', "Unterminated string (at end of document)"),
])
def test_a_toml_error_at_the_end_of_the_header(user_dir, toml, message):
    path = write_template(user_dir, "ends", GOOD_BODY)
    path.write_text(path.read_text().replace("---#}", toml + "\n---#}", 1))
    with pytest.raises(GemmlabError) as e:
        load_variant(path, builtin=False)
    assert e.value.message == f"bad template header in {path}: {message}"


def test_the_catalog_is_read_again_when_a_template_changes(user_dir):
    """discover() keeps the last catalogs by the bytes of their templates: an edit of the same size (within
    the file system's timestamp tick), a new template and a removed one are each seen at once."""
    path = write_template(user_dir, "mine", GOOD_BODY)
    first = gemmlab.catalog((user_dir,))
    assert first.get("mine").idea == "a test template" and gemmlab.catalog((user_dir,)).get("mine") is first.get("mine")
    path.write_text(path.read_text().replace("a test template", "a best template"))
    assert gemmlab.catalog((user_dir,)).get("mine").idea == "a best template"
    path.write_text(path.read_text().replace('name = "mine"', 'name = "mime"'))  # a broken header now
    with pytest.raises(GemmlabError, match='name = "mime" but the file is mine.cu.j2'):
        gemmlab.catalog((user_dir,)).get("mine")
    path.unlink()
    with pytest.raises(GemmlabError, match="unknown variant 'mine'"):
        gemmlab.catalog((user_dir,)).get("mine")
