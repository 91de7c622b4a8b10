"""Rendering and the map from rendered lines back to template lines: no GPU."""

import pytest

from gemmlab import GemmlabError
from gemmlab.render import render
from gemmlab.templates import discover, load_variant
from conftest import GOOD_BODY, write_template

CONFIGS = [(v.name, p) for v in discover().ladder() for p in v.sample()]


@pytest.mark.parametrize("name,params", CONFIGS, ids=[f"{n}-{p}" for n, p in CONFIGS])
def test_every_config_renders_clean(name, params):
    v = discover().get(name)
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
