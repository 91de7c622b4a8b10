"""Templates are data: listing, showing, building or rendering a template runs nothing on the host.

Known template-injection payloads (through cycler, joiner, namespace, lipsum, range, __class__.__mro__,
__subclasses__, string formatting, attribute access on parameters and globals) go into a template's body and
into every kind of header expression; each must fail with one line naming the template file and line, and
have no side effect: every payload that would act tries to create a marker file, and an audit hook sees any
process being started. The built-in templates render byte for byte as they did without the sandbox.
"""

import functools
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from jinja2 import Environment, FileSystemLoader, StrictUndefined

import gemmlab
from gemmlab import GemmlabError
from gemmlab.cli import cli
from gemmlab.gpu.gpc import MAX_SLOTS
from gemmlab.render import LineTags, _untag, render
from gemmlab.templates import C_TYPES, builtin_dir, discover, load_variant
from gemmlab.templates.sandbox import UNSAFE, cdiv
from conftest import GOOD_BODY, write_template

# The classic escape: from any object up to `object`, down to os._wrap_close, whose module has `system`.
SYSTEM = '|selectattr("__name__", "equalto", "_wrap_close")|first).__init__.__globals__.system("touch {mark}")'
# name -> a Jinja expression; {mark} becomes the path of a file that must never appear.
PAYLOADS = {
    "cycler": 'cycler.__init__.__globals__.os.popen("touch {mark}").read()',
    "joiner": 'joiner.__init__.__globals__.os.system("touch {mark}")',
    "namespace": 'namespace.__init__.__globals__.os.system("touch {mark}")',
    "lipsum": 'lipsum.__globals__["os"].system("touch {mark}")',
    "range": "(range.__class__.__mro__[1].__subclasses__()" + SYSTEM,
    "mro": '("".__class__.__mro__[1].__subclasses__()' + SYSTEM,
    "subclasses": "(().__class__.__base__.__subclasses__()" + SYSTEM,
    "format": '"{0.__init__.__globals__[os].system}".format(cycler)',
    "format_map": '"{f.__globals__[os].popen}".format_map({"f": cdiv})',
    "param": "(TILE.__class__.__base__.__subclasses__()" + SYSTEM,
    # from a function's module to its builtins, whatever the module imports
    "global": 'cdiv.__globals__.__builtins__.__import__("os").system("touch {mark}")',
    "attr_filter": '(cycler|attr("__init__")|attr("__globals__"))["os"].system("touch {mark}")',
    "getitem": 'cdiv["__globals__"]["__builtins__"]["__import__"]("os").system("touch {mark}")',
}
# Payloads only a template body can hold: statements, and the names only the body sees.
BODY_PAYLOADS = {
    "self": '{{ self._TemplateReference__context.cycler.__init__.__globals__.os.system("touch {mark}") }}',
    "loop": '{% for i in range(1) %}{{ loop.__class__.__init__.__globals__.os.system("touch {mark}") }}{% endfor %}',
    "set": '{% set x = cycler.__init__.__globals__.os.system("touch {mark}") %}',
    "macro": '{% macro m() %}{{ joiner.__init__.__globals__.os.system("touch {mark}") }}{% endmacro %}{{ m() }}',
    "threads": "{{ (THREADS.__class__.__base__.__subclasses__()" + SYSTEM + " }}",
    "ctype": '{{ ctype.__self__.update({"fp32": "int"}) }}',
    "mutation": '{% set types = {"fp32": "float"} %}{{ types.update({"fp32": "int"}) }}',
}
BODIES = {name: "// {{ " + expr + " }}" for name, expr in PAYLOADS.items()} | BODY_PAYLOADS

# Every kind of header expression: the place's name in the error, and the header lines that put it there.
PLACES = {
    "constraint": ("constraints", "[[constraints]]\ncheck = {q}\nwhy = \"someone else's rule\"\n", ""),
    "launch.block": ("launch.block", "", 'block = [{q}, "TILE"]\n'),
    "launch.grid": ("launch.grid", "", 'grid = [{q}, "cdiv(M, TILE)"]\n'),
    "launch.smem": ("launch.smem", "", "smem = {q}\n"),
    "launch.workspace": ("launch.workspace", "", "workspace = {q}\n"),
    "launch.zero_output": ("launch.zero_output", "", "zero_output = {q}\n"),
    "launch.resident": ("launch.resident", "", "resident = {q}\n"),
    "launch.zero_workspace": ("launch.zero_workspace", "", "zero_workspace = {q}\n"),
    "launch.requires": ("launch.requires", "", "[[launch.requires]]\ncheck = {q}\nwhy = \"a shape rule\"\n"),
    "launch.reduce.block": ("launch.reduce.block", "", '[launch.reduce]\nblock = [{q}]\ngrid = ["1"]\n'),
    "launch.reduce.grid": ("launch.reduce.grid", "", '[launch.reduce]\nblock = ["32"]\ngrid = [{q}]\n'),
    "launch.tma.A": ("launch.tma.A", "", '[launch.tma]\nA = [{q}, "8"]\n'),
    "launch.gpc_order.when": ("launch.gpc_order.when", "", '[launch.gpc_order]\nwhen = {q}\ncluster = "1"\ngroup = "1"\n'),
    "launch.gpc_order.cluster": ("launch.gpc_order.cluster", "", '[launch.gpc_order]\nwhen = "true"\ncluster = {q}\ngroup = "1"\n'),
    "launch.gpc_order.group": ("launch.gpc_order.group", "", '[launch.gpc_order]\nwhen = "true"\ncluster = "1"\ngroup = {q}\n'),
}

# ---------------------------------------------------------------------------- no side effects

_PROCESS_EVENTS = {"os.system", "subprocess.Popen", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn",
                   "os.spawn", "pty.spawn", "os.startfile"}
_started: list | None = None  # while a test watches: the process starts seen
_hooked = False


def _audit(event, args):
    if _started is not None and event in _PROCESS_EVENTS:
        _started.append((event, args))


@pytest.fixture
def mark(tmp_path):
    """The path a payload tries to create; after the test, it must not exist and no process have started
    in this process (an audit hook sees os.system, os.popen, subprocess, fork, exec and spawn)."""
    global _started, _hooked
    if not _hooked:
        sys.addaudithook(_audit)  # (cannot be removed: it records only while a test watches)
        _hooked = True
    path = tmp_path / "pwned"
    _started = []
    try:
        yield path
        assert _started == [], f"a template started a process: {_started}"
    finally:
        _started = None
    assert not path.exists(), "a template's payload ran on the host"


def _fill(text: str, mark: Path) -> str:
    return text.replace("{mark}", str(mark))


def _body_template(directory: Path, name: str, payload: str, mark: Path) -> tuple[Path, int]:
    path = write_template(directory, name, GOOD_BODY + _fill(payload, mark) + "\n")
    return path, path.read_text().count("\n")  # the payload is the last line


def _header_template(directory: Path, place: str, expr: str, mark: Path, name: str = "evil") -> tuple[Path, int]:
    q = "'''" + _fill(expr, mark) + "'''"
    _, top, launch = PLACES[place]
    lines = {"block": 'block = ["TILE", "TILE"]\n', "grid": 'grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n'}
    extra = launch.format(q=q)
    tables = extra if extra.startswith("[") else ""  # a table of its own, after [launch]'s keys
    if not tables:
        lines[extra.split(" ", 1)[0]] = extra  # a key of [launch], in place of the plain one
    path = directory / f"{name}.cu.j2"
    path.write_text("{#---\n"
                    f'name = "{name}"\nparent = "tiled"\nidea = "a template from someone else"\n'
                    "[params.TILE]\ndefault = 16\nchoices = [8, 16]\n"
                    + top.format(q=q) + "[launch]\n" + "".join(lines.values()) + tables
                    + "---#}\n" + GOOD_BODY)
    line = next(i for i, l in enumerate(path.read_text().split("\n"), 1) if q in l)
    return path, line


def _one_line(e: Exception) -> str:
    text = str(e)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------------------- the body

@pytest.mark.parametrize("payload", list(BODIES))
def test_a_payload_in_the_body_fails_cleanly(user_dir, mark, payload):
    path, line = _body_template(user_dir, "evil", BODIES[payload], mark)
    v = load_variant(path, builtin=False)  # the header is fine: listing shows it
    refused = "templates may not change a list, dict or set" if payload == "mutation" else re.escape(UNSAFE)
    with pytest.raises(GemmlabError, match=rf"^template error at {re.escape(str(path))}:{line}: {refused}") as e:
        render(v)
    _one_line(e.value)
    assert C_TYPES["fp32"] == "float"  # the module's table is as it was


def test_a_payload_in_a_shared_macro_file_names_that_file(user_dir, mark):
    helper = user_dir / "helpers.j2"
    helper.write_text('{% macro evil() %}\n{{ cycler.__init__.__globals__.os.system("touch ' + str(mark) + '") }}\n{% endmacro %}\n')
    path = write_template(user_dir, "evil", '{% import "helpers.j2" as h %}\n' + GOOD_BODY + "{{ h.evil() }}\n")
    with pytest.raises(GemmlabError, match=rf"^template error at {re.escape(str(helper))}:2: {re.escape(UNSAFE)}"):
        render(load_variant(path, builtin=False))


def test_is_defined_does_not_hide_a_reach_for_globals(user_dir, mark):
    path, line = _body_template(user_dir, "evil", "{% if cdiv.__globals__ is defined %}// found{% endif %}", mark)
    with pytest.raises(GemmlabError, match=rf"{line}: {re.escape(UNSAFE)}: `function.__globals__`"):
        render(load_variant(path, builtin=False))


def test_the_body_sees_only_what_templates_use(user_dir, mark):
    path, line = _body_template(user_dir, "evil", "{% set ns = namespace(x=1) %}", mark)
    with pytest.raises(GemmlabError, match=rf":{line}: 'namespace' is undefined"):
        render(load_variant(path, builtin=False))
    path, line = _body_template(user_dir, "big", "// {{ range(10 ** 9) | length }}", mark)
    with pytest.raises(GemmlabError, match=rf"big.cu.j2:{line}: Range too big"):
        render(load_variant(path, builtin=False))


# ---------------------------------------------------------------------------- the header

@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_a_payload_in_a_header_expression_fails_cleanly(user_dir, mark, place, payload):
    path, line = _header_template(user_dir, place, PAYLOADS[payload], mark)
    where = PLACES[place][0].replace("constraints", "constraint")
    with pytest.raises(GemmlabError, match=rf"^{re.escape(str(path))}:{line}: {re.escape(where)} '.*': {re.escape(UNSAFE)}") as e:
        load_variant(path, builtin=False)
    _one_line(e.value)


def test_a_header_payload_makes_the_template_broken_not_the_catalog(user_dir, mark):
    _header_template(user_dir, "constraint", PAYLOADS["cycler"], mark)
    cat = gemmlab.catalog((user_dir,))
    assert "evil" in cat.broken and "tiled" in cat.variants
    assert UNSAFE in cat.broken["evil"].message
    with pytest.raises(GemmlabError, match=re.escape(UNSAFE)):
        cat.get("evil")


def test_a_payload_checked_only_for_some_shapes_fails_there(user_dir, mark):
    """A header expression that the load-time check never reaches still runs in the sandbox later."""
    path = write_template(user_dir, "evil", GOOD_BODY, header_extra="")
    text = path.read_text().replace('grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n',
                                    'grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\nsmem = \'\'\'0 if M < 100 else '
                                    + _fill(PAYLOADS["global"], mark) + "'''\n")
    path.write_text(text)
    v = gemmlab.catalog((user_dir,)).get("evil")
    with pytest.raises(GemmlabError, match=rf"evil.cu.j2:\d+: launch.smem '.*': {re.escape(UNSAFE)}: `function.__globals__`"):
        v.geometry(v.defaults(), 1024, 1024, 1024)


# ---------------------------------------------------------------------------- the payloads are real

ACTING = [n for n in PAYLOADS if "touch" in PAYLOADS[n]]


@pytest.mark.parametrize("payload", ACTING)
def test_without_the_sandbox_the_payload_would_run(tmp_path, payload):
    """The same text in Jinja's ordinary environment (what gemmlab used before) does create the file: the
    tests above test something."""
    import time
    mark = tmp_path / "pwned"
    env = Environment(undefined=StrictUndefined)
    env.globals.update(cdiv=cdiv)
    env.from_string("{{ " + _fill(PAYLOADS[payload], mark) + " }}").render(TILE=16)
    deadline = time.monotonic() + 10  # Popen returns before touch has run
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists()


# ---------------------------------------------------------------------------- the commands

def invoke(*args, env=None):
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=True)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def _error_lines(output: str) -> list[str]:
    return [l for l in output.splitlines() if l.startswith("error:") or ": error:" in l]


@pytest.fixture(params=["--kernels-dir", "$GEMMLAB_KERNELS"])
def evil_dir(request, user_dir):
    """(arguments, environment) that make gemmlab read user_dir one way or the other."""
    if request.param == "--kernels-dir":
        return ["--kernels-dir", user_dir], None
    return [], {"GEMMLAB_KERNELS": str(user_dir)}


def test_list_shows_an_evil_header_as_broken(user_dir, mark, evil_dir):
    args, env = evil_dir
    _header_template(user_dir, "constraint", PAYLOADS["cycler"], mark)
    r = invoke("list", *args, env=dict(env or {}, COLUMNS="2000"))  # the message on one line of the table
    assert r.exit_code == 0 and "evil" in r.output and "broken" in r.output
    assert "templates may not use Python" in r.output and "tiled" in r.output


def test_list_reads_an_evil_body_without_rendering_it(user_dir, mark, evil_dir):
    args, env = evil_dir
    _body_template(user_dir, "evil", BODIES["cycler"], mark)
    r = invoke("list", *args, env=env)
    assert r.exit_code == 0 and "evil" in r.output and "broken" not in r.output


@pytest.mark.parametrize("where", ["body", "header"])
@pytest.mark.parametrize("cmd", [["show"], ["show", "--what", "ptx", "--arch", "sm_90"], ["build", "--arch", "sm_90"]])
def test_show_and_build_print_one_error(user_dir, mark, evil_dir, cmd, where):
    args, env = evil_dir
    if where == "body":
        path, line = _body_template(user_dir, "evil", BODIES["cycler"], mark)
    else:
        path, line = _header_template(user_dir, "constraint", PAYLOADS["cycler"], mark)
    r = invoke(*cmd, "--variant", "evil", *args, env=env)
    assert r.exit_code == 1
    errors = _error_lines(r.output)
    assert len(errors) == 1 and f"evil.cu.j2:{line}: " in errors[0] and UNSAFE in errors[0], r.output
    if cmd[0] == "show":
        assert r.output.count("\n") == 1  # nothing but the error: no source, no hint


@pytest.mark.parametrize("cmd", [["run"], ["sweep", "--param", "TILE=8,16"]])
def test_run_and_sweep_stop_at_an_evil_header_before_the_gpu(user_dir, mark, cmd):
    _header_template(user_dir, "launch.smem", PAYLOADS["global"], mark)
    r = invoke(*cmd, "--variant", "evil", "--kernels-dir", user_dir)
    assert r.exit_code == 1 and "no CUDA GPU" not in r.output  # the template is refused before any GPU is looked for
    assert len(_error_lines(r.output)) == 1 and UNSAFE in r.output


@pytest.mark.parametrize("cmd", [["run"], ["sweep", "--param", "TILE=8,16"]])
def test_run_and_sweep_stop_at_an_evil_body_before_its_kernel_reaches_the_gpu(user_dir, tmp_path, monkeypatch, cmd,
                                                                             fake_gpu):
    """With the fake GPU worker of tests/handlers.py: the template fails to render, and no request for it
    ever reaches the worker (run renders before starting one at all). (The worker is a process gemmlab starts: no audit hook here.)"""
    log = tmp_path / "requests.log"
    monkeypatch.setenv("FAKEGPU_LOG", str(log))
    mark = tmp_path / "pwned"
    path, line = _body_template(user_dir, "evil", BODIES["cycler"], mark)
    r = invoke(*cmd, "--variant", "evil", "--kernels-dir", user_dir, "--size", "64")
    assert r.exit_code == 1, r.output
    errors = _error_lines(r.output)
    assert len(errors) == 1 and f"evil.cu.j2:{line}: {UNSAFE}" in errors[0], r.output
    # run renders before any GPU work: nothing reaches the worker; sweep measures cuBLAS, never the template
    sent = log.read_text().split() if log.exists() else []
    assert sent == ([] if cmd[0] == "run" else ["cuBLAS"]), sent
    assert not mark.exists()


def test_a_run_through_the_api_makes_an_error_row_and_never_sends_the_kernel(user_dir, tmp_path, monkeypatch):
    from gemmlab.jobs import Options, run_jobs
    from gemmlab.results.model import Shape
    log = tmp_path / "requests.log"
    monkeypatch.setenv("FAKEGPU_LOG", str(log))
    mark = tmp_path / "pwned"
    _body_template(user_dir, "evil", BODIES["global"], mark)
    v = gemmlab.catalog((user_dir,)).get("evil")
    _, rows = run_jobs("run", [(v, v.defaults())], Shape(64, 64, 64), Options(), keep_going=True,
                       handler="handlers:FakeGpu")
    assert [(r["variant"], r["status"]) for r in rows] == [("evil", "ERROR"), ("cuBLAS", "PASS")]
    assert UNSAFE in rows[0]["error"] and "\n" not in rows[0]["error"]
    assert log.read_text().split() == ["cuBLAS"] and not mark.exists()


def test_the_python_api(user_dir, mark):
    _body_template(user_dir, "evil", BODIES["subclasses"], mark)
    _header_template(user_dir, "launch.grid", PAYLOADS["namespace"], mark, name="evil2")
    cat = gemmlab.catalog((user_dir,))
    with pytest.raises(GemmlabError, match=re.escape(UNSAFE)):
        gemmlab.build(cat.get("evil"), arch="sm_90")
    with pytest.raises(GemmlabError, match=re.escape(UNSAFE)):
        gemmlab.render(cat.get("evil"), {"TILE": 8})
    with pytest.raises(GemmlabError, match=re.escape(UNSAFE)):
        cat.get("evil2")
    with pytest.raises(GemmlabError, match=re.escape(UNSAFE)):
        gemmlab.discover((user_dir,)).get("evil2")


# ---------------------------------------------------------------------------- the built-in templates

@functools.lru_cache(maxsize=None)
def _plain_environment(directory: Path, limits) -> Environment:
    """Jinja's ordinary environment, its default globals; one per directory and limits, as gemmlab keeps
    its sandboxed ones (each template is compiled once, not once per configuration)."""
    env = Environment(loader=FileSystemLoader([str(directory), str(builtin_dir() / "lib"), str(builtin_dir())]),
                      undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, extensions=[LineTags])
    env.globals.update(cdiv=cdiv, ctype=C_TYPES.__getitem__, GPC_SLOTS=MAX_SLOTS, **limits.names())
    return env


def _unsandboxed(v, params) -> str:
    """What gemmlab rendered before the sandbox: Jinja's ordinary environment, its default globals."""
    names = dict(params, THREADS=v.threads(params))
    return _untag(_plain_environment(v.path.parent, v.limits).get_template(v.path.name).render(**names))[0]


LADDER = {v.name: v for v in discover().ladder()}  # read once: the same built-ins each test would read again
# Variant.sample's first three (worked out once a run: test_render and test_gpu take the same sample;
# sample(limit=8) cost each pytest process 0.5 s more to collect, for one configuration of 92 that differs)
BUILTIN = [(name, p) for name, v in LADDER.items() for p in [v.defaults()] + v.sample()[:3]]


@pytest.mark.parametrize("name,params", BUILTIN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BUILTIN)])
def test_builtin_templates_render_byte_for_byte_as_without_the_sandbox(name, params):
    v = LADDER[name]
    source = render(v, params).source
    assert source.split("\n", 1)[1] == _unsandboxed(v, v.resolve(params))  # (after the banner line)


# ---------------------------------------------------------------------------- a template with `from`

@pytest.mark.parametrize("payload", ["cycler", "global"])
def test_a_payload_in_a_childs_header_fails_cleanly(user_dir, mark, payload):
    """A template that starts from tiled (`from`) is checked as any other: its header's expressions too."""
    path = user_dir / "evil.cu.j2"
    path.write_text('{#---\nname = "evil"\nfrom = "tiled"\nidea = "x"\n[launch]\nsmem = \'\'\''
                    + _fill(PAYLOADS[payload], mark) + "'''\n---#}\n")
    cat = gemmlab.catalog((user_dir,))
    with pytest.raises(GemmlabError, match=rf"^{re.escape(str(path))}:6: launch.smem '.*': {re.escape(UNSAFE)}") as e:
        cat.get("evil")
    _one_line(e.value)


@pytest.mark.parametrize("payload", ["cycler", "self", "macro"])
def test_a_payload_in_a_childs_block_fails_cleanly(user_dir, mark, payload):
    path = user_dir / "evil.cu.j2"
    path.write_text('{#---\nname = "evil"\nfrom = "tiled"\nidea = "x"\n---#}\n{% block compute %}\n'
                    + _fill(BODIES[payload], mark) + "\n{% endblock %}\n")
    v = gemmlab.catalog((user_dir,)).get("evil")  # the header is fine: listing shows it
    with pytest.raises(GemmlabError, match=rf"^template error at {re.escape(str(path))}:7: {re.escape(UNSAFE)}") as e:
        render(v)
    _one_line(e.value)


def test_constraints_evaluated_together_say_the_same_as_one_by_one():
    from gemmlab.templates.sandbox import evaluate, evaluate_all
    names = {"A": 4, "B": 0}
    checks = ("A > 2", "B > 2", "A % 4 == 0")
    assert evaluate_all(checks, names, "constraint") == [evaluate(c, names, "constraint") for c in checks] \
        == [True, False, True]
    # an expression that only parses inside the list ("(A) + (B)") is still a syntax error of its own
    with pytest.raises(GemmlabError, match=r"cannot evaluate 'A\) \+ \(B'"):
        evaluate_all(("A) + (B", "A > 2"), names, "constraint")
    with pytest.raises(GemmlabError, match="'C' is undefined"):
        evaluate_all(("A > 2", "C"), names, "constraint")
    with pytest.raises(GemmlabError, match="'A // B' failed: integer division"):
        evaluate_all(("A > 2", "A // B"), names, "constraint")
    with pytest.raises(GemmlabError, match="not allowed"):
        evaluate_all(("A > 2", "A.__class__"), names, "constraint")
