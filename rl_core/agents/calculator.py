"""The ``calculator`` tool: safe arithmetic on integers and floats.

The expression is parsed with :func:`ast.parse` (``mode="eval"``) and its syntax tree is
walked here; nothing of the model's text is ever compiled or executed. Allowed: int and float
literals, ``+ - * / // % **``, unary ``+``/``-`` and parentheses. Anything else (names,
calls, attributes, subscripts, strings, comprehensions, lambdas, comparisons) is refused
with a message the model reads.

Guards: expressions of at most :data:`MAX_CHARS` characters nested at most
:data:`MAX_DEPTH` deep; integers of at most :data:`MAX_DIGITS` digits, checked before a
power is computed (``9**9**9`` is refused, not evaluated); non-finite floats and division
by zero are model failures.

Output: an int prints as its plain digits (``56088``); a float that is a whole number below
1e15 prints as that integer (``6/3`` → ``2``), any other float with 12 significant digits
in ``g`` format (``0.1+0.2`` → ``0.3``, ``1/3`` → ``0.333333333333``, ``2.0**-60`` →
``8.67361737988e-19``).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from rl_core.agents.outcomes import ToolResult
from rl_core.agents.tools import Tool, register_tool

#: Longest expression accepted, in characters.
MAX_CHARS = 1000
#: Deepest nesting accepted (parentheses, unary signs, right operands of ``**``).
MAX_DEPTH = 100
#: Most digits an integer (literal, intermediate or result) may have.
MAX_DIGITS = 100
#: The smallest magnitude refused as too large (an int or float of more digits).
_INT_LIMIT = 10**MAX_DIGITS

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_HINT = "use numbers, + - * / // % ** and parentheses"

Number = int | float


class CalculatorError(ValueError):
    """The expression is not one the calculator evaluates; the message is for the model."""


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression safely.

    Args:
        expression: E.g. ``"123 * (4 + 5)"``; surrounding whitespace and newlines are fine.

    Returns:
        The int or float value.

    Raises:
        CalculatorError: The expression is malformed, uses something other than numbers and
            arithmetic, divides by zero or has a result too large.
    """
    text = " ".join(expression.split())
    if not text:
        raise CalculatorError(f"empty expression; {_HINT}")
    if len(text) > MAX_CHARS:
        raise CalculatorError(f"expression too long ({len(text)} > {MAX_CHARS} characters)")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        hint = "; use ** for powers" if "^" in text else ""
        raise CalculatorError(f"invalid expression {text!r}{hint}") from None
    return _eval(tree.body, 0)


def format_number(value: Number) -> str:
    """Format a result as described in the module docstring."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"expression nested too deeply (more than {MAX_DEPTH} levels)")
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CalculatorError(f"only numbers are allowed, got {value!r}; {_HINT}")
        return _checked(value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp):
        # ``1+2+3+...`` nests to the left: walk that spine in a loop, not one level per term
        chain: list[ast.BinOp] = []
        while isinstance(node, ast.BinOp):
            chain.append(node)
            node = node.left
        value = _eval(node, depth + 1)
        for op_node in reversed(chain):
            value = _apply(op_node.op, value, _eval(op_node.right, depth + 1))
        return value
    raise CalculatorError(f"{_describe(node)} not allowed; {_HINT}")


def _apply(op: ast.operator, left: Number, right: Number) -> Number:
    if isinstance(op, ast.BitXor):
        raise CalculatorError("'^' is not supported; use ** for powers")
    if type(op) not in _BINARY:
        raise CalculatorError(f"the operator {type(op).__name__} is not allowed; {_HINT}")
    if isinstance(op, ast.Pow):
        _check_power(left, right)
    try:
        value = _BINARY[type(op)](left, right)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result too large") from None
    if isinstance(value, complex):  # e.g. (-8) ** 0.5
        raise CalculatorError("result is not a real number")
    return _checked(value)


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse a power whose result would exceed :data:`MAX_DIGITS` digits, before computing it."""
    if abs(base) <= 1 or exponent <= 0:
        return  # |result| <= 1, or a float from a negative exponent
    if exponent * math.log10(abs(base)) > MAX_DIGITS + 1:
        raise CalculatorError(f"result too large (more than {MAX_DIGITS} digits)")


def _checked(value: Number) -> Number:
    if isinstance(value, int):
        if abs(value) >= _INT_LIMIT:
            raise CalculatorError(f"result too large (more than {MAX_DIGITS} digits)")
        return value
    if not math.isfinite(value):
        raise CalculatorError("result too large" if math.isinf(value) else "result is not a number")
    if abs(value) >= _INT_LIMIT:
        raise CalculatorError(f"result too large (more than {MAX_DIGITS} digits)")
    return value


def _describe(node: ast.AST) -> str:
    """What the model wrote, in words: ``"the name 'x' is"``, ``"a function call is"``."""
    if isinstance(node, ast.Name):
        return f"the name {node.id!r} is"
    if isinstance(node, ast.Call):
        return "a function call is"
    if isinstance(node, ast.Attribute):
        return "an attribute is"
    if isinstance(node, ast.Subscript):
        return "indexing is"
    return f"{type(node).__name__} is"


@register_tool("calculator")
class Calculator(Tool):
    """The ``calculator`` tool: ``123*(4+5)`` → ``1107`` (see the module docstring)."""

    name = "calculator"
    description = (
        "Evaluates an arithmetic expression: numbers, + - * / // % ** and parentheses, "
        "e.g. 123*(4+5)."
    )
    parameter = "expression"

    def __call__(self, arguments: str) -> ToolResult:
        """Evaluate ``arguments``; a refused expression is a model failure with the reason."""
        if not isinstance(arguments, str):
            return self.model_failure(f"expected an expression string, got {arguments!r}")
        try:
            return self.ok(format_number(evaluate(arguments)))
        except CalculatorError as err:
            return self.model_failure(f"error: {err}")
