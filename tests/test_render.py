"""Rendering and the map from rendered lines back to template lines: no GPU."""

import re
from pathlib import Path

import pytest

from gemmlab import GemmlabError
from gemmlab.render import render
from gemmlab.templates import discover, load_variant
from conftest import GOOD_BODY, write_template

LADDER = {v.name: v for v in discover().ladder()}  # read once: the same built-ins each test would read again
CONFIGS = [(name, p) for name, v in LADDER.items() for p in v.sample()]


@pytest.mark.parametrize("name,params", CONFIGS, ids=[f"{n}-{p}" for n, p in CONFIGS])
def test_every_config_renders_clean(name, params):
    v = LADDER[name]
    r = render(v, params)
    assert "{{" not in r.source and "{%" not in r.source
    assert "\x1e" not in r.source and "\x1f" not in r.source
    assert 'extern "C" __global__' in r.source
    assert len(r.origins) == len(r.source.split("\n"))


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


@pytest.mark.parametrize("name,needle", [
    ("tiled", "acc += As[ty][k] * Bs[k][tx];"),
    ("regblock", "acc[i][j] += a[i] * b[j];"),
    ("regblock", "C[row * N + col] = acc[i][j];"),
    ("naive", "C[row * N + col] = acc;"),
])
def test_rendered_lines_map_to_template_lines(name, needle):
    v = discover().get(name)
    r = render(v, v.defaults())
    origin = r.template_line(_line_of(r.source, needle))
    assert origin is not None
    path, line = origin
    assert path == str(v.path)
    assert needle in v.path.read_text().split("\n")[line - 1]


def test_map_survives_jinja_blocks(user_dir):
    body = GOOD_BODY.replace("    float acc = 0.0f;\n",
                             "{% for i in range(3) %}\n    // copy {{ i }}\n{% endfor %}\n"
                             "{% if TILE > 8 %}\n    float acc = 0.0f;\n{% endif %}\n")
    path = write_template(user_dir, "blocks", body)
    v = load_variant(path, builtin=False)
    r = render(v, v.defaults())
    text = path.read_text().split("\n")
    for needle in ("// copy 2", "float acc = 0.0f;", "C[row * N + col] = acc;"):
        _, line = r.template_line(_line_of(r.source, needle))
        assert needle.split(" 2")[0] in text[line - 1]


def test_threads_is_available_to_templates():
    v = discover().get("regblock")
    r = render(v, v.defaults())
    assert "__launch_bounds__(256)" in r.source


def test_undefined_name_points_at_template_line(user_dir):
    path = write_template(user_dir, "undef", GOOD_BODY.replace("{{ TILE }} + threadIdx.y", "{{ TYLE }} + threadIdx.y"))
    v = load_variant(path, builtin=False)
    with pytest.raises(GemmlabError) as e:
        render(v, v.defaults())
    line = _line_of(path.read_text(), "TYLE")
    assert f"{path}:{line}" in e.value.message and "TYLE" in e.value.message


def test_jinja_syntax_error_points_at_template_line(user_dir):
    path = write_template(user_dir, "syntax", GOOD_BODY.replace("float acc", "{% if %}float acc"))
    v = load_variant(path, builtin=False)
    with pytest.raises(GemmlabError) as e:
        render(v, v.defaults())
    assert f"{path}:{_line_of(path.read_text(), '{% if %}')}" in e.value.message


MACROS = """{% macro twice(x) %}2 * {{ x }}{% endmacro %}
{% macro copy(x) %}
    // from the macro: {{ x }}
    float {{ x }}_copy = {{ x }};
{% endmacro %}
"""


def test_a_macro_call_in_the_middle_of_a_line_maps_to_the_calling_line(user_dir):
    (user_dir / "mine_macros.j2").write_text(MACROS)
    body = '{% import "mine_macros.j2" as m %}\n' + GOOD_BODY.replace(
        "    float acc = 0.0f;\n", '    float acc = {{ m.twice("0.0f") }};\n    int z = 0; {{ m.copy("acc") }}')
    path = write_template(user_dir, "macros", body)
    v = load_variant(path, builtin=False)
    r = render(v, v.defaults())
    text, macros = path.read_text().split("\n"), str(user_dir / "mine_macros.j2")
    assert "    float acc = 2 * 0.0f;" in r.source.split("\n")
    # the line is the caller's, though its last piece came from the macro file
    assert r.template_line(_line_of(r.source, "float acc = 2 * 0.0f;")) == (str(path), _line_of("\n".join(text), "m.twice"))
    assert r.template_line(_line_of(r.source, "// from the macro: acc")) == (str(path), _line_of("\n".join(text), "m.copy"))
    # a line the macro begins is the macro's
    assert r.template_line(_line_of(r.source, "float acc_copy = acc;")) == (macros, 4)
    assert r.template_line(_line_of(r.source, "acc += A[row * K + k]")) == (str(path), _line_of("\n".join(text), "acc += A["))


JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}")


@pytest.mark.parametrize("name", [v.name for v in discover().ladder()])
def test_every_line_of_a_shipped_kernel_maps_to_the_template_line_it_came_from(name):
    """A line's template line, its Jinja taken out, is what the rendered line is made of: the rendered
    line begins with its first piece of text (or holds it, where the template line begins with Jinja)."""
    v = discover().get(name)
    r = render(v, v.defaults())
    files, checked, wrong = {}, 0, []
    for i, line in enumerate(r.source.split("\n"), 1):
        origin = r.template_line(i)
        if origin is None or not line.strip():
            continue
        path, n = origin
        text = files.setdefault(path, Path(path).read_text().split("\n"))[n - 1]
        pieces = [p.strip() for p in JINJA.split(text) if p.strip()]
        if not pieces:
            continue
        checked += 1
        if pieces[0] not in line or not JINJA.match(text.strip()) and not line.strip().startswith(pieces[0]):
            wrong.append(f"rendered line {i} {line.strip()!r} -> {Path(path).name}:{n} {text.strip()!r}")
    assert checked > 10 and not wrong, "\n".join(wrong)


def test_render_uses_the_parameters_given_and_keeps_what_it_rendered():
    v = discover().get("tiled")
    r = render(v, {"TILE": 8})
    assert r.variant is v and r.params == {"TILE": 8, "PREFETCH": True} and r.name == "tiled.cu"
    assert "__shared__ float As[8][8];" in r.source
    assert r.source.startswith("// gemmlab variant tiled (03_tiled.cu.j2) TILE=8 PREFETCH=true\n")


def test_template_line_is_none_outside_the_source():
    v = discover().get("naive")
    r = render(v)
    n = len(r.origins)
    assert n == len(r.source.split("\n"))
    assert r.template_line(0) is None and r.template_line(1) is None  # line 1: the banner
    assert r.template_line(n + 1) is None and r.template_line(-1) is None
    assert r.template_line(n) == r.origins[-1] is not None  # the last line has one (the one after the last newline)


def test_whitespace_control_globals_and_the_types(user_dir):
    body = ('{% if TILE > 8 %}\n    // big: {{ ctype(DTYPE) }} x{{ GPC_SLOTS }}\n    {% endif %}\n'
            + GOOD_BODY.rstrip("\n") + "\n")
    path = write_template(user_dir, "ws", body)
    path.write_text(path.read_text().replace('idea = "a test template"\n', 'idea = "a test template"\ndtypes = ["fp32", "fp16"]\n'))
    v = load_variant(path, builtin=False)
    r = render(v, {"DTYPE": "fp16"})
    lines = r.source.split("\n")
    assert lines[1] == "    // big: __half x252"  # no line for the block tags, not even their indentation
    assert lines[2].startswith('extern "C" __global__ void gemm(') and r.source.endswith("}\n")  # its last newline kept
    assert render(v).source.split("\n")[1] == "    // big: float x252"


def test_an_edited_template_renders_anew(user_dir):
    path = write_template(user_dir, "edited", GOOD_BODY)
    v = load_variant(path, builtin=False)
    assert "float acc = 0.0f;" in render(v).source
    path.write_text(path.read_text().replace("float acc = 0.0f;", "float acc = 0.0f;  // edited"))
    assert "float acc = 0.0f;  // edited" in render(v).source  # --watch reruns in the same process


def test_errors_in_an_imported_macro_file_name_that_file(user_dir):
    macros = user_dir / "bad_macros.j2"
    path = write_template(user_dir, "usesbad", '{% import "bad_macros.j2" as m %}\n' + GOOD_BODY.replace(
        "    float acc = 0.0f;\n", "    float acc = {{ m.zero() }};\n"))
    v = load_variant(path, builtin=False)
    macros.write_text("{% macro zero() %}\n0.0f{{ NOPE }}\n{% endmacro %}\n")
    with pytest.raises(GemmlabError) as e:
        render(v)
    assert e.value.message == f"template error at {macros}:2: 'NOPE' is undefined"
    assert e.value.hint == "the parameters are: TILE, THREADS"
    macros.write_text("{% macro zero() %}\n0.0f{% if %}\n{% endmacro %}\n")
    with pytest.raises(GemmlabError, match=f"^template syntax error at {re.escape(str(macros))}:2: "):
        render(v)
    macros.unlink()
    line = _line_of(path.read_text(), "{% import")
    with pytest.raises(GemmlabError, match=f"^template error at {re.escape(str(path))}:{line}: 'bad_macros.j2' not found"):
        render(v)
