"""What code in a template may do: Jinja's immutable sandbox, in which the body and every header
expression run, and the evaluation of header expressions (errors at the header's line).

Templates are data: courses hand them out, users share them, and gemmlab reads every one in the user's
directories on each command. So the template body and every header expression run in Jinja's immutable
sandbox (no Python attributes such as `__class__` or `__globals__`, no changing lists or dicts, no
`str.format` reaching into objects) and see only the names given here and in render.py: nothing in a
template runs on the host. See docs/templates-are-data.md.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Mapping

from jinja2 import StrictUndefined, Undefined, nodes
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment, modifies_known_mutable, safe_range

from ..errors import GemmlabError
from .file import HEADER_RE

UNSAFE = "templates may not use Python attributes such as `__globals__`"


class Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox without Jinja's default globals (cycler, joiner, namespace, lipsum, dict:
    no template needs them), and an unsafe attribute refused at once, rather than handed on as an
    undefined value that a test such as `is defined` would quietly swallow."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.globals.clear()

    def getattr(self, obj, attribute):  # `x._y`, `x|attr("_y")`: refused even where x is undefined
        if isinstance(attribute, str) and attribute.startswith("_"):
            return self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):  # `lipsum["__globals__"]`
        if isinstance(obj, Undefined) and isinstance(argument, str) and argument.startswith("_"):
            return self.unsafe_undefined(obj, argument)
        return super().getitem(obj, argument)

    def unsafe_undefined(self, obj, attribute):
        owner = obj._undefined_name if isinstance(obj, Undefined) and obj._undefined_name else type(obj).__name__
        if modifies_known_mutable(obj, attribute):
            raise Refused(f"templates may not change a list, dict or set: `{owner}.{attribute}` is not allowed")
        raise Refused(f"{UNSAFE}: `{owner}.{attribute}` is not allowed")


class Refused(SecurityError):
    """What Sandbox refuses, said in one line."""


def sandbox_message(e: SecurityError) -> str:
    """What the sandbox refused, in one line."""
    return str(e) if isinstance(e, Refused) else f"{UNSAFE}; here: {e}"


def cdiv(a: int, b: int) -> int:
    """Ceiling division: how many tiles of size b cover a."""
    return -(-a // b)


# Expressions in headers are Jinja expressions: the same language as the template body, in the same sandbox.
_expr_env = Sandbox(undefined=StrictUndefined)
_expr_env.globals.update(cdiv=cdiv, min=min, max=max)
BODY_GLOBALS = {"range": safe_range, "cdiv": cdiv}  # what a template body sees besides its parameters (and render.py's)


@functools.lru_cache(maxsize=None)
def _compiled(expr: str):
    # compiling is ~100x slower than evaluating: do it once. An expression that is a bare undefined name
    # gives the Undefined itself (not Jinja's default None), so that evaluate can say which name it is.
    return _expr_env.compile_expression(expr, undefined_to_none=False)


@functools.lru_cache(maxsize=None)
def _parsed(expr: str) -> nodes.Expr | None:
    """The expression's syntax tree, or None where it is not one whole expression (`a), (b` is not, though
    it would fit in a list of two)."""
    try:
        parser = Parser(_expr_env, expr, state="variable")
        tree = parser.parse_expression()
        return tree if parser.stream.eos else None
    except TemplateError:
        return None


@functools.lru_cache(maxsize=None)
def names_in(expr: str) -> frozenset[str]:
    """The names an expression reads besides the sandbox's functions (none where it does not parse:
    evaluating it says why). An expression declares no names of its own, so these are the names in its
    tree."""
    tree = _parsed(expr)
    if tree is None:
        return frozenset()
    names = [tree] if isinstance(tree, nodes.Name) else list(tree.find_all(nodes.Name))  # (find_all: below the root)
    return frozenset(n.name for n in names) - _expr_env.globals.keys()


def expression_line(path: Path, expr: str) -> int | None:
    """The line of a template's header that holds this expression as a TOML string, where it can be found."""
    try:
        m = HEADER_RE.match(Path(path).read_text())
    except (OSError, UnicodeDecodeError):
        return None
    if not m:
        return None
    basic = expr.replace("\\", "\\\\").replace('"', '\\"')
    for quoted in (f"'{expr}'", f'"{basic}"', f"'''{expr}'''", f'"""{expr}"""', expr):
        at = m.group(1).find(quoted)
        if at >= 0:
            return m.group(1).count("\n", 0, at) + 2  # the TOML text begins on the file's second line
    return None


def evaluate(expr: str, names: Mapping[str, object], where: str, path: Path | None = None):
    """The value of a header expression; `where` says which (`launch.smem`), after `path`, the template."""
    try:
        value = _compiled(expr)(**names)
        if isinstance(value, Undefined):  # `block = ["TILEX"]`: "'TILEX' is undefined", not "gave None"
            value._fail_with_undefined_error()
        return value
    except SecurityError as e:  # one line, at the header's line: the sandbox refused, nothing ran
        line = expression_line(path, expr) if path else None
        at = f"{path}:{line}: " if line else f"{path}: " if path else ""
        raise GemmlabError(f"{at}{where} '{expr}': {sandbox_message(e)}") from None
    except TemplateError as e:
        where = f"{path}: {where}" if path else where
        raise GemmlabError(f"{where}: cannot evaluate '{expr}': {e}") from None
    except (ArithmeticError, TypeError, ValueError) as e:
        where = f"{path}: {where}" if path else where
        raise GemmlabError(f"{where}: '{expr}' failed: {e}") from None


@functools.lru_cache(maxsize=None)
def _all_of(exprs: tuple[str, ...]):
    """One compiled expression giving the list of these expressions' values, or None where one of them
    is not an expression on its own (then evaluating them one by one says why). Each is only parsed
    here: compiling is Jinja's slow part (a command's start compiled every template's constraints twice,
    alone and in the list)."""
    if any(_parsed(e) is None for e in exprs):
        return None
    try:
        return _compiled("[" + ", ".join(f"({e})" for e in exprs) + "]")
    except TemplateError:
        return None


def evaluate_all(exprs: tuple[str, ...], names: Mapping[str, object], where: str, path: Path | None = None) -> list:
    """The values of several header expressions (a template's constraints) over the same names: as
    `evaluate` of each, but in one evaluation, since a sweep or a test sample checks thousands of
    configurations and evaluating is mostly setting up the sandbox's context. Where that fails, or a
    value is undefined, they are evaluated one at a time, so the error names the expression."""
    combined = _all_of(exprs) if exprs else None
    if combined is not None:
        try:
            values = combined(**names)
            if not any(isinstance(v, Undefined) for v in values):
                return values
        except (TemplateError, ArithmeticError, TypeError, ValueError):
            pass
    return [evaluate(e, names, where, path) for e in exprs]
