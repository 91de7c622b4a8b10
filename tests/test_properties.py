"""Property-based tests (hypothesis): whatever a user types, gemmlab either rejects it with a clear
message or renders, compiles and (on a GPU) computes the right answer. No input ends in a traceback."""

import math

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import gemmlab
from gemmlab.compile import compile_rendered
from gemmlab.errors import GemmlabError
from gemmlab.render import render
from gemmlab.results.model import INT32_MAX, Shape
from gemmlab.templates import show_value
from conftest import GOOD_BODY, write_template
from test_cli import invoke

LADDER = gemmlab.catalog().ladder()
NAMES = [v.name for v in LADDER]
# Function-scoped fixtures (the private cache and data directories) are the same for every example.
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def typed(v):
    """What a user may type for the parameters of v: allowed values, near misses and garbage."""
    allowed = [show_value(c) for p in v.params.values() for c in (p.choices or [p.default])]
    value = st.one_of(st.sampled_from(allowed), st.integers(-3, 600).map(str), st.text(max_size=5),
                      st.floats(allow_nan=True).map(str), st.sampled_from(["true", "no", "0x10", "", " 8 "]))
    names = st.sampled_from(list(v.params) + ["BOGUS", "tile", ""])
    return st.dictionaries(names, value, max_size=len(v.params) + 1)


def uncaught(output: str) -> bool:
    return "Traceback" in output or "internal error" in output


@pytest.mark.parametrize("v", LADDER, ids=NAMES)
@settings(max_examples=6, **SETTINGS)  # a valid draw compiles (0.1-2 s); test_compile covers the edges
@given(data=st.data())
def test_any_parameters_are_rejected_clearly_or_compile(v, data):
    raw = data.draw(typed(v))
    try:
        params = v.resolve(raw)
    except GemmlabError as e:
        assert e.message  # one clear message
        return
    assert not v.violations(params)
    compiled = compile_rendered(render(v, params), "sm_90")
    assert compiled.resources.registers > 0


@settings(max_examples=30, **SETTINGS)
@given(raw=st.dictionaries(st.sampled_from(["TILE", "PREFETCH", "X"]), st.text(max_size=8), max_size=3),
       name=st.sampled_from(NAMES + ["nosuch", ""]))
def test_the_cli_never_shows_a_traceback_for_parameters(raw, name):
    args = ["show", "--what", "resources", "--arch", "sm_90", "--variant", name] + [a for k, val in raw.items() for a in ("-p", f"{k}={val}")]
    r = invoke(*args)
    assert r.exit_code in (0, 1) and not uncaught(r.output)
    assert r.exit_code == 0 or "error" in r.output


sizes = st.one_of(st.integers(-10, 0), st.integers(1, 5000), st.integers(2**31, 2**70),
                  st.sampled_from([INT32_MAX, 46341, 65536 * 32 + 1]))


@settings(max_examples=60, **SETTINGS)
@given(m=sizes, n=sizes, k=sizes, v=st.sampled_from(LADDER))
def test_any_shape_is_rejected_clearly_or_launchable(m, n, k, v):
    try:
        shape = Shape(m, n, k)
        geo = v.geometry(v.defaults(), shape.M, shape.N, shape.K)
    except GemmlabError as e:
        assert e.message
        return
    assert m * k <= INT32_MAX and k * n <= INT32_MAX and m * n <= INT32_MAX
    assert geo.grid[0] * geo.block[0] >= 1 and geo.threads <= 1024


@settings(max_examples=25, **SETTINGS)
@given(flag=st.sampled_from(["--size", "-M", "-N", "-K", "--reps", "--timeout", "--seed"]),
       value=st.one_of(st.integers(max_value=0).map(str), st.text(max_size=6).filter(lambda t: not t.strip().isdigit()),
                       st.floats(allow_nan=True, allow_infinity=True).map(str)))
@example(flag="--timeout", value="NAN")  # FloatRange alone let NaN through, to the worker's exit code 1
@example(flag="--timeout", value="inf")  # and infinity, to an internal error
def test_garbage_numbers_are_usage_errors(flag, value):
    def number(text):
        try:
            return float(text)
        except ValueError:
            return None

    seconds = number(value) or 0
    if (flag == "--seed" and value.strip().lstrip("-").isdigit()) or (flag == "--timeout" and math.isfinite(seconds) and seconds > 0):
        return  # any integer is a seed, any positive finite number a time limit
    r = invoke("run", "--variant", "tiled", flag, value)
    assert r.exit_code == 2 and not uncaught(r.output) and "Invalid value" in r.output


@settings(max_examples=6, **SETTINGS)
@given(m=st.integers(2**31, 2**40))
def test_a_shape_too_large_to_index_fails_before_any_gpu_work(m):
    r = invoke("run", "--variant", "tiled", "-M", m, "-N", 2, "-K", 2)
    assert r.exit_code == 1 and "32-bit" in r.output and not uncaught(r.output)


GARBAGE = {
    "not jinja": ('{% for x in %}\n' + GOOD_BODY, "template syntax error"),
    "cuda syntax error": (GOOD_BODY.replace("float acc = 0.0f;", "float acc = 0.0f"), "does not compile"),
    "undefined name": (GOOD_BODY.replace("{{ TILE }}", "{{ TYLE }}"), "TYLE"),
    "no kernel": ("__device__ int x;\n", "defines no kernel"),
}


@pytest.mark.parametrize("case", GARBAGE, ids=list(GARBAGE))
def test_garbage_templates_fail_with_their_reason(user_dir, case):
    body, message = GARBAGE[case]
    write_template(user_dir, "junk", body)
    r = invoke("build", "--arch", "sm_90", "--variant", "junk", "--kernels-dir", user_dir)
    assert r.exit_code == 1 and message in r.output and not uncaught(r.output)
    assert invoke("list", "--kernels-dir", user_dir).exit_code == 0  # the others still list


@pytest.mark.parametrize("header,message", [
    ("[params.TILE]\ndefault = 8\n", "TILE"),                       # declared twice
    ("[params.REG]\ndefault = 'x'\nchoices = [1, 2]\n", "REG"),    # a default of the wrong type
    ("[launch]\nblock = [1]\n", "launch"),                          # two [launch] tables
])
def test_garbage_headers_fail_with_their_reason(user_dir, header, message):
    write_template(user_dir, "junk", GOOD_BODY, header_extra=header)
    r = invoke("build", "--arch", "sm_90", "--variant", "junk", "--kernels-dir", user_dir)
    assert r.exit_code == 1 and "junk.cu.j2" in r.output and message in r.output and not uncaught(r.output)


@settings(max_examples=25, **SETTINGS)
@given(body=st.text(max_size=200))
def test_any_template_text_builds_or_fails_clearly(tmp_path_factory, body):
    d = tmp_path_factory.mktemp("junk")
    write_template(d, "junk", body)
    r = invoke("build", "--arch", "sm_90", "--variant", "junk", "--kernels-dir", d)
    assert r.exit_code in (0, 1) and not uncaught(r.output)


@pytest.mark.gpu
@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_any_valid_configuration_and_shape_is_right_on_the_gpu(data):
    from gemmlab.gpu.problem import Problem
    v = data.draw(st.sampled_from(LADDER))
    params = data.draw(st.sampled_from([p for p in v.sample() if not p.get("ARRIVAL")]))  # (ARRIVAL: dist's alone)
    m, n, k = (data.draw(st.integers(1, 300)) for _ in range(3))
    if v.requires:  # the TMA rungs need rows 16 bytes aligned
        n, k = -(-n // 8) * 8, -(-k // 8) * 8
    problem = Problem(Shape(m, n, k), dtype=v.dtype(params), out_dtype=v.out_dtype(params))
    r = problem.run(gemmlab.build(v, params), timed=False)
    assert r.status == "PASS", (v.name, params, (m, n, k), r.error, r.check)
