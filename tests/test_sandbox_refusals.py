"""templates/sandbox.py's refusals and their words exactly, and the header line its messages name: the
mutants tests/test_sandbox.py let through (docs/testing.md, "Mutation testing")."""

import pytest
from jinja2 import StrictUndefined
from jinja2.exceptions import SecurityError, UndefinedError

from gemmlab.errors import GemmlabError
from gemmlab.templates.sandbox import UNSAFE, Sandbox, evaluate, expression_line


def render(text, **names):
    return Sandbox().from_string(text).render(**names)


def test_a_sandbox_takes_jinjas_arguments():
    env = Sandbox("<%", "%>", undefined=StrictUndefined)
    assert env.block_start_string == "<%" and env.undefined is StrictUndefined and not env.globals


def test_an_underscore_item_of_an_undefined_is_refused_by_name():
    for text in ('{{ nothing["__globals__"] }}', '{{ nothing["__globals__"] is defined }}'):
        with pytest.raises(SecurityError) as e:
            render(text)
        assert str(e.value) == f"{UNSAFE}: `nothing.__globals__` is not allowed"
    with pytest.raises(SecurityError) as e:
        render("{{ nothing._x }}")
    assert str(e.value) == f"{UNSAFE}: `nothing._x` is not allowed"


def test_items_that_are_no_attribute_stay_allowed():
    assert render('{{ d["_x"] }}', d={"_x": 1}) == "1"  # a dict's own key
    with pytest.raises(UndefinedError):  # undefined, not refused
        render('{{ nothing["a"] }}')


def test_jinjas_own_refusals_get_the_sentence_too():
    def f():
        return 1
    f.unsafe_callable = True  # refused by Jinja's sandbox itself, not by Sandbox's own checks
    with pytest.raises(GemmlabError) as e:
        evaluate("f()", {"f": f}, "launch.smem")
    assert e.value.message.startswith("launch.smem 'f()': " + UNSAFE + "; here: <function ")
    assert e.value.message.endswith(" is not safely callable")
    with pytest.raises(GemmlabError) as e:
        evaluate("x.__class__", {"x": 1}, "launch.smem")  # no file: no line either
    assert e.value.message == f"launch.smem 'x.__class__': {UNSAFE}: `int.__class__` is not allowed"


HEADER = '''{#---

name = "t"
[launch]
smem = "X ~ \\"q\\\\\\\\w\\""
block = "X ~ \\"q\\\\\\\\w\\""
---#}
body
'''


def test_the_line_of_an_expression(tmp_path):
    p = tmp_path / "t.cu.j2"
    p.write_text(HEADER)
    expr = 'X ~ "q\\\\w"'  # as TOML decodes it: a backslash pair and quotes, escaped in the file
    assert expression_line(p, expr) == 5  # the first of the two, below a blank line
    assert expression_line(p, "name") == 3  # the header's first text
    assert expression_line(p, "nowhere") is None


def test_an_expression_at_the_headers_very_start(tmp_path):
    p = tmp_path / "t.cu.j2"
    p.write_text('{#---\nname = "t"\n---#}\n')
    assert expression_line(p, "name") == 2


def test_the_file_named_without_a_line_and_without_a_file(tmp_path):
    p = tmp_path / "t.cu.j2"
    p.write_text('{#---\nname = "t"\n---#}\n')  # the expression is not in it: no line to give
    with pytest.raises(GemmlabError) as e:
        evaluate("x.__class__", {"x": 1}, "launch.smem", p)
    assert e.value.message == f"{p}: launch.smem 'x.__class__': {UNSAFE}: `int.__class__` is not allowed"
    with pytest.raises(GemmlabError) as e:
        evaluate("1 +", {}, "launch.smem", p)
    assert e.value.message.startswith(f"{p}: launch.smem: cannot evaluate '1 +': ")
    with pytest.raises(GemmlabError) as e:
        evaluate("1 +", {}, "launch.smem")
    assert e.value.message.startswith("launch.smem: cannot evaluate '1 +': ")


def test_a_failing_expression_names_the_file_where_there_is_one(tmp_path):
    p = tmp_path / "t.cu.j2"
    with pytest.raises(GemmlabError) as e:
        evaluate("1 // 0", {}, "launch.smem", p)
    assert e.value.message == f"{p}: launch.smem: '1 // 0' failed: integer division or modulo by zero"
    with pytest.raises(GemmlabError) as e:
        evaluate("1 // 0", {}, "launch.smem")
    assert e.value.message == "launch.smem: '1 // 0' failed: integer division or modulo by zero"
