"""`from` in any template's header (gemmlab/templates/inherit.py): the header starts from the named
template's, the body extends its file; an unknown target and a circle are one clear error each."""

import re

import pytest

import gemmlab
from conftest import GOOD_BODY, ROLLED, ROOT, write_template
from gemmlab.errors import GemmlabError
from gemmlab.render import render
from gemmlab.templates import Constraint, discover, load_variant
from gemmlab.templates.inherit import merge

TILED = ROOT / "kernels" / "fp32" / "03_tiled.cu.j2"


def test_a_template_with_from_lists_and_renders_with_its_block_replaced(user_dir):
    (user_dir / "rolled.cu.j2").write_text(ROLLED)
    cat = discover((user_dir,))
    assert "rolled" in cat.variants and "rolled" in [v.name for v in cat.ladder()]
    v = cat.get("rolled")
    assert v.parent == "tiled" and v.bases == (TILED,) and set(v.params) == {"TILE", "PREFETCH"}
    assert v.predict == "" and v.predict_x is None and v.block == ("TILE", "TILE") and v.path == user_dir / "rolled.cu.j2"
    mine, tiled = render(v).source, render(cat.get("tiled")).source
    assert "#pragma unroll 1\n" in mine and "#pragma unroll\n" not in mine  # the block replaced
    before, after = tiled.split("        // As[ty][k] is one address", 1)[0], tiled.split("acc += As[ty][k] * Bs[k][tx];\n", 1)[1]
    assert before.split("\n", 1)[1] in mine and after in mine  # the rest of tiled's source, as tiled renders it
    assert rendered_origin(render(v), "#pragma unroll 1") == (str(user_dir / "rolled.cu.j2"), 7)
    assert rendered_origin(render(v), "__syncthreads();  // everyone") == (str(TILED), 84)


def rendered_origin(r, text):
    return r.template_line(next(i for i, line in enumerate(r.source.split("\n"), 1) if text in line))


def test_the_childs_keys_override_its_parents(user_dir):
    (user_dir / "small.cu.j2").write_text(ROLLED.replace('name = "rolled"', 'name = "small"\nparent = "naive"')
                                          .replace("---#}", "[params.TILE]\ndefault = 16\nchoices = [8, 16]\n---#}", 1))
    v = discover((user_dir,)).get("small")
    assert v.parent == "naive" and v.params["TILE"].choices == (8, 16) and v.params["PREFETCH"].default is True
    assert "__shared__ float As[16][16]" in render(v).source
    # a chain: from a template that has a `from` of its own
    (user_dir / "smaller.cu.j2").write_text('{#---\nname = "smaller"\nfrom = "small"\n---#}\n')
    v = discover((user_dir,)).get("smaller")
    assert v.parent == "small" and v.idea.startswith("tiled, its inner") and v.bases == (user_dir / "small.cu.j2", TILED)
    assert "#pragma unroll 1\n" in render(v).source and "As[16][16]" in render(v).source


def test_merge():
    parent = {"name": "tiled", "parent": "coalesced", "idea": "p", "predict": "1.5x", "predict_x": 1.5,
              "params": {"TILE": {"default": 32}, "PREFETCH": {"default": True}}, "constraints": [{"check": "a", "why": "b"}],
              "launch": {"block": ["TILE"], "grid": ["1"]}}
    child = {"name": "c", "from": "tiled", "params": {"TILE": {"default": 16}, "X": {"default": 1}},
             "constraints": [{"check": "c", "why": "d"}], "launch": {"smem": "0"}}
    m = merge(parent, child, "tiled")
    assert m["name"] == "c" and m["parent"] == "tiled" and m["idea"] == "p" and "predict" not in m and "from" not in m
    assert "predict_x" not in m and "name" not in merge(parent, {}, "tiled")
    assert m["params"] == {"TILE": {"default": 16}, "PREFETCH": {"default": True}, "X": {"default": 1}}
    assert [c["check"] for c in m["constraints"]] == ["a", "c"] and m["launch"] == {"block": ["TILE"], "grid": ["1"], "smem": "0"}


def test_only_tables_are_merged_and_only_constraints_added_to(user_dir):
    """A key the parent lacks is the child's; a list other than the constraints (dtypes) replaces the
    parent's; a child's params or launch that is not a table is the child's mistake, named as such."""
    write_template(user_dir, "plain", GOOD_BODY)  # no constraints
    (user_dir / "kid.cu.j2").write_text('{#---\nname = "kid"\nfrom = "plain"\n'
                                        '[[constraints]]\ncheck = "TILE > 8"\nwhy = "big enough"\n---#}\n')
    (user_dir / "half.cu.j2").write_text('{#---\nname = "half"\nfrom = "wmma"\ndtypes = ["fp16"]\n---#}\n')
    cat = discover((user_dir,))
    assert cat.get("kid").constraints == [Constraint("TILE > 8", "big enough")]
    assert cat.get("half").dtypes == ("fp16",) and cat.get("half").params["DTYPE"].choices == ("fp16",)
    for key in ("params", "launch"):
        path = user_dir / f"bad{key}.cu.j2"
        path.write_text(f'{{#---\nname = "bad{key}"\nfrom = "tiled"\n{key} = 3\n---#}}\n')
        with pytest.raises(GemmlabError, match=rf"^bad template header in {re.escape(str(path))}: '{key}' must be a dict$"):
            discover((user_dir,)).get(f"bad{key}")


def test_a_from_read_without_a_catalog_finds_no_template(user_dir):
    """load_variant without find (no catalog to ask): the `from` is named as unknown, not a crash."""
    path = user_dir / "rolled.cu.j2"
    path.write_text(ROLLED)
    with pytest.raises(GemmlabError, match=rf"^bad template header in {re.escape(str(path))}: from = \"tiled\": no template of that name"):
        load_variant(path, builtin=False)


def test_a_childs_header_errors_name_its_file_and_line(user_dir):
    path = user_dir / "rolled.cu.j2"
    path.write_text(ROLLED.replace('idea = "tiled', 'idea = = "tiled'))
    with pytest.raises(GemmlabError, match=rf"^bad template header in {re.escape(str(path))}:4: "):
        discover((user_dir,)).get("rolled")
    path.write_text(ROLLED.replace("---#}", "[params.TILE]\ndefault = 7\nchoices = [8, 16]\n---#}", 1))
    with pytest.raises(GemmlabError, match=rf"^bad template header in {re.escape(str(path))}: params.TILE.default 7"):
        discover((user_dir,)).get("rolled")
    path.write_text(ROLLED.replace("#pragma unroll 1", "{{ 1 +"))
    with pytest.raises(GemmlabError, match=rf"^template syntax error at {re.escape(str(path))}:8: "):
        render(discover((user_dir,)).get("rolled"))


@pytest.mark.parametrize("header, message", [
    ('from = "nosuch"', 'from = "nosuch": no template of that name (`gemmlab list` shows them)'),
    ('from = "x"', "from = \"x\" is this template's own name; a template that starts from x needs a name of its own"),
    ("from = 3", "'from' names a template, as a string: from = \"tiled\""),
])
def test_a_bad_from_is_one_clear_error(user_dir, header, message):
    path = user_dir / "x.cu.j2"
    path.write_text('{#---\nname = "x"\n' + header + "\n---#}\n")
    cat = discover((user_dir,))
    with pytest.raises(GemmlabError, match=rf"^bad template header in {re.escape(str(path))}: {re.escape(message)}$"):
        cat.get("x")
    assert "tiled" in cat.variants


def test_a_circle_of_from_is_one_clear_error(user_dir):
    (user_dir / "a.cu.j2").write_text('{#---\nname = "a"\nfrom = "b"\n---#}\n')
    (user_dir / "b.cu.j2").write_text('{#---\nname = "b"\nfrom = "a"\n---#}\n')
    cat = gemmlab.catalog((user_dir,))
    with pytest.raises(GemmlabError, match=r"a\.cu\.j2: from = \"a\" goes round in a circle: a -> b -> a$"):
        cat.get("a")
    with pytest.raises(GemmlabError, match=r"b\.cu\.j2: from = \"b\" goes round in a circle: b -> a -> b$"):
        cat.get("b")


def test_a_body_with_an_extends_of_its_own_keeps_it(user_dir):
    """No second {% extends %} is added (Jinja refuses a template extended twice)."""
    (user_dir / "own.cu.j2").write_text(ROLLED.replace('"rolled"', '"own"').replace("---#}", '---#}{% extends "fp32/03_tiled.cu.j2" %}'))
    assert "#pragma unroll 1\n" in render(discover((user_dir,)).get("own")).source
