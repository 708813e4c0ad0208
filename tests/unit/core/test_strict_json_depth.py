"""The strict JSON reader's nesting check (run on every certificate before parsing).

It finds the bracket depth outside strings with regular expressions; these tests hold it
against the plain character walk it replaced, on generated texts full of quotes, escapes and
brackets, including unterminated strings and trailing backslashes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.core.io import StrictJSONError, _check_depth_text, loads_strict


def walk_accepts(text: str, max_depth: int) -> bool:
    """The reference: walk the text, tracking strings and escapes, counting brackets outside."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def accepts(text: str, max_depth: int) -> bool:
    try:
        _check_depth_text(text, max_depth)
    except StrictJSONError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='"\\[]{}a \n', max_size=40), st.integers(min_value=0, max_value=5))
def test_agrees_with_the_character_walk(text: str, max_depth: int) -> None:
    assert accepts(text, max_depth) == walk_accepts(text, max_depth)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("[" * 64 + "]" * 64, True),
        ("[" * 65 + "]" * 65, False),
        ('["' + "[" * 100 + '"]', True),  # brackets inside a string do not count
        ('["\\"' + "[" * 100 + '"]', True),  # nor after an escaped quote inside it
        ('["\\\\"' + "[" * 100 + "]", False),  # an escaped backslash ends nothing: the string ends
        ('"' + "[" * 100, True),  # unterminated string: the parser refuses it, not this check
        ("]]]]" + "[" * 64, True),
    ],
)
def test_edges(text: str, ok: bool) -> None:
    assert accepts(text, 64) is ok
    assert walk_accepts(text, 64) is ok


def test_a_deep_document_is_refused_before_parsing() -> None:
    with pytest.raises(StrictJSONError, match="nesting deeper than 64"):
        loads_strict(b"[" * 10_000 + b"]" * 10_000)
    assert loads_strict(b'{"a": [[["x]]]]"]]]}') == {"a": [[["x]]]]"]]]}
