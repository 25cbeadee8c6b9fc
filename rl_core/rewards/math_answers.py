"""String and number helpers for checking final answers of math reasoning completions.

Pure functions (standard library only): find the final answer in a completion
(:func:`extract_final_answer`), read numbers written in plain text or simple LaTeX
(:func:`parse_number`) and compare a predicted answer with the gold one
(:func:`answers_match`).
"""

from __future__ import annotations

import re
from fractions import Fraction

#: Decimals with at least this many fractional digits are treated as rounded values, so
#: :func:`answers_match` compares them with a tolerance instead of exactly.
LONG_DECIMAL_DIGITS = 6

_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_HASHES_RE = re.compile(r"####[ \t]*([^\n]*)")
_PHRASE_RE = re.compile(
    r"\banswer\s*(?:is\b|:)\s*:?\s*(.+?)\s*(?:\.\s|\.?$|\n)", re.IGNORECASE | re.MULTILINE
)
# A plain number: thousands commas, decimals, exponent-free; optionally a fraction a/b.
_UNSIGNED = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+"
_PLAIN_NUMBER = rf"(?:{_UNSIGNED})(?:\s*/\s*(?:{_UNSIGNED}))?"
_LATEX_FRAC = r"\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*\d+\s*\}"
# A minus sign counts only when it cannot be a subtraction ("5-3" ends with 3, not -3).
_NUMBER_IN_TEXT_RE = re.compile(rf"(?:(?<![\w)\]}}])-)?(?:{_LATEX_FRAC}|(?<![\w.]){_PLAIN_NUMBER})")
_LEADING_NUMBER_RE = re.compile(rf"^(-?\s*(?:{_PLAIN_NUMBER}))\s+[A-Za-z][A-Za-z\s]*$")
_TEXT_RE = re.compile(r"\\(?:text|mathrm|mbox|textrm)\s*\{([^{}]*)\}")
_UNSIGNED_RE = re.compile(rf"^(?:{_UNSIGNED})$")
_SIMPLE_FRAC_RE = re.compile(r"^\\[dt]?frac(\d)(\d)$")


def extract_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``.

    Nested braces are matched (``"\boxed{\frac{1}{2}}"`` gives ``"\frac{1}{2}"``) and
    escaped braces (``\{``, ``\}``) are content, not delimiters.

    Args:
        text: A completion or any string.

    Returns:
        The stripped content of the last box, or None when there is no box or the last one
        is never closed.
    """
    matches = list(_BOXED_RE.finditer(text))
    if not matches:
        return None
    start = matches[-1].end()
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # skip the escaped character (\{, \}, \\)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i].strip()
        i += 1
    return None


def extract_final_answer(text: str) -> str | None:
    r"""The final answer stated in a completion.

    Tried in order: the last ``\boxed{}``; the text after the last ``####`` (to the end of
    that line); the last "answer is X" / "Answer: X" phrase (a leading number followed only
    by words, as in "18 dollars", is cut to the number); otherwise the last number in the
    text (integers, decimals, negatives, thousands commas, ``a/b`` and ``\frac{a}{b}``).

    Args:
        text: The completion.

    Returns:
        The answer text (not normalized), or None when nothing answer-like is found.
    """
    if not text:
        return None
    boxed = extract_boxed(text)
    if boxed:
        return boxed
    hashes = _HASHES_RE.findall(text)
    if hashes and hashes[-1].strip():
        return hashes[-1].strip()
    phrases = _PHRASE_RE.findall(text)
    if phrases:
        answer = phrases[-1].strip().strip("*").strip()
        if answer:
            leading = _LEADING_NUMBER_RE.match(answer)
            if parse_number(answer) is None and leading:
                return leading.group(1)
            return answer
    numbers = _NUMBER_IN_TEXT_RE.findall(text)
    return numbers[-1].strip() if numbers else None


def normalize_gold(answer: str) -> str:
    """The gold answer to compare against.

    Args:
        answer: The dataset's answer: a bare answer, or a GSM8K-style solution ending in
            ``#### 72``.

    Returns:
        The text after the last ``####`` (to the end of that line) if there is one,
        otherwise ``answer`` stripped.
    """
    hashes = _HASHES_RE.findall(answer)
    return hashes[-1].strip() if hashes else answer.strip()


def _strip_math(text: str) -> str:
    r"""Remove math delimiters, spacing commands, ``\left``/``\right`` and surrounding space."""
    s = text.strip()
    for delims in (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        while len(s) >= 2 and s.startswith(delims[0]) and s.endswith(delims[1]):
            s = s[len(delims[0]) : -len(delims[1])].strip()
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", s)
    s = re.sub(r"\\[,!;: ]|~", " ", s)
    return s.replace("{,}", ",").strip()


def _parse_unsigned(text: str) -> Fraction | None:
    """An unsigned integer/decimal (thousands commas allowed) as an exact Fraction."""
    s = text.strip()
    if not _UNSIGNED_RE.match(s):
        return None
    return Fraction(s.replace(",", ""))


def _parse_signed(text: str) -> Fraction | None:
    r"""A signed plain number, ``a/b`` or ``\frac{a}{b}`` (no units, no delimiters)."""
    s = text.strip()
    sign = 1
    if s[:1] in ("-", "+", "\N{MINUS SIGN}"):
        sign = -1 if s[0] != "+" else 1
        s = s[1:].strip()
    if not s:
        return None
    short = _SIMPLE_FRAC_RE.match(s)
    if short:
        num, den = Fraction(short.group(1)), Fraction(short.group(2))
    elif re.match(r"^\\[dt]?frac\s*\{", s):
        parts = re.fullmatch(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", s)
        if not parts:
            return None
        num, den = _parse_signed(parts.group(1)), _parse_signed(parts.group(2))
    elif "/" in s:
        top, _, bottom = s.partition("/")
        num, den = _parse_unsigned(top), _parse_unsigned(bottom)
    else:
        value = _parse_unsigned(s)
        return None if value is None else sign * value
    if num is None or den is None or den == 0:
        return None
    return sign * num / den


def parse_number(text: str | None) -> Fraction | None:
    r"""Read ``text`` as an exact number.

    Accepts integers, decimals, thousands commas (``"1,234"``), a sign, ``a/b``,
    ``\frac{a}{b}`` / ``\dfrac`` / ``\tfrac`` (also ``-\frac{1}{2}``), a currency
    ``$`` (``"$12"``), a trailing ``%`` (``"12%"`` is 12), a trailing period, ``$...$`` /
    ``\(...\)`` delimiters and ``\text{...}`` units next to the number
    (``"5 \text{ apples}"`` is 5).

    Args:
        text: The answer text.

    Returns:
        The value as a Fraction (exact, also for decimals), or None if ``text`` is not a
        number.
    """
    if text is None:
        return None
    s = _strip_math(text.strip().rstrip("."))
    whole_text = re.fullmatch(r"\\(?:text|mathrm|mbox|textrm)\s*\{([^{}]*)\}", s)
    s = whole_text.group(1) if whole_text else _TEXT_RE.sub(" ", s)
    s = s.replace("\\$", "$").replace("\\%", "%")
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)  # degrees
    s = s.strip().rstrip(".").strip()
    s = s.rstrip("%").strip()
    s = re.sub(r"^([-+\N{MINUS SIGN}]?)\s*\$", r"\1", s)  # currency: "$12", "-$5"
    s = _strip_math(s)
    if not s:
        return None
    return _parse_signed(s)


def _is_long_decimal(text: str) -> bool:
    """Whether ``text`` holds a decimal with at least ``LONG_DECIMAL_DIGITS`` decimals."""
    return re.search(rf"\.\d{{{LONG_DECIMAL_DIGITS},}}", text) is not None


def _normalize_text(text: str) -> str:
    """Canonical form for string comparison of non-numeric answers."""
    s = _strip_math(text)
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox|textrm)\s*\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\s+", "", s).replace("$", "")
    return s.rstrip(".").lower()


def answers_match(predicted: str | None, gold: str | None, rel_tol: float = 1e-6) -> bool:
    r"""Whether a predicted final answer equals the gold answer.

    When both parse as numbers (:func:`parse_number`) they must be exactly equal, except
    that if either was written as a long decimal (at least ``LONG_DECIMAL_DIGITS``
    decimals, e.g. ``0.3333333``) they match within ``rel_tol * max(1, |gold|)``. So
    ``"0.5"`` matches ``"\frac{1}{2}"`` but ``"0.333"`` does not match ``"1/3"``.
    Otherwise the normalized strings are compared: spaces, ``$``, a trailing period and
    ``\left``/``\right`` removed, ``\text{X}`` unwrapped, ``\dfrac`` read as ``\frac``,
    case ignored.

    Args:
        predicted: The extracted answer of the completion (None never matches).
        gold: The gold answer, already extracted (see :func:`normalize_gold`).
        rel_tol: Relative tolerance for long decimals.

    Returns:
        True when the answers are equivalent.
    """
    if predicted is None or gold is None:
        return False
    p, g = parse_number(predicted), parse_number(gold)
    if p is not None and g is not None:
        if p == g:
            return True
        if _is_long_decimal(predicted) or _is_long_decimal(gold):
            return abs(p - g) <= Fraction(rel_tol) * max(1, abs(g))
        return False
    normalized = _normalize_text(predicted)
    return bool(normalized) and normalized == _normalize_text(gold)
