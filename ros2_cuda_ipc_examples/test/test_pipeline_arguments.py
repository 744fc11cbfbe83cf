"""The pipeline commands' parsers of outside text (``--size``, ``ROS_DOMAIN_ID``): any text gives a value or one
typed error, at a cost bounded by a constant times its length (issue 35's rule, measured, not timed out)."""

from __future__ import annotations

import argparse

from hypothesis import given, settings
from hypothesis import strategies as st
from parser_cost import measure

from ros2_cuda_ipc_examples.pipelines.arguments import SIZES, parse_size
from ros2_cuda_ipc_examples.pipelines.namespace_claim import MAX_DOMAIN_ID, InvalidDomainId, domain_id

#: Texts a user or a script may hand over: digits, the separators these parsers read, other scripts' digits,
#: spaces and control characters, and long runs of each (a value typed with far too many digits).
_OTHER_DIGITS = "".join(map(chr, range(0x660, 0x66A)))  # Arabic-Indic: str.isdigit() and int() take them
_TEXT = st.one_of(
    st.text(alphabet=st.sampled_from("0123456789xX+- \t\nabcdef\x1b" + _OTHER_DIGITS), max_size=64),
    st.builds(lambda digit, n, tail: digit * n + tail, st.sampled_from("019x "), st.integers(0, 200_000),
              st.text(max_size=8)),
    st.sampled_from([*SIZES, "1920x1080", "100000x100000", " 96", "+96", "96 ", "0x60", "0140"]),
)
_PROPERTY = settings(max_examples=200, deadline=None)


@_PROPERTY
@given(_TEXT)
def test_parse_size_gives_two_bounded_ints_or_one_usage_error_at_a_cost_bounded_by_the_text(text):
    result, cost = measure(lambda: parse_size(text), (argparse.ArgumentTypeError,))
    cost.assert_within(len(text.encode()), "parse_size")
    if isinstance(result, argparse.ArgumentTypeError):
        assert "is not one of" in str(result) and len(str(result)) < 200  # the text quoted, cut short by repr
    else:
        width, height = result
        assert type(width) is int and type(height) is int and 0 <= width < 10**9 and 0 <= height < 10**9


@_PROPERTY
@given(_TEXT)
def test_domain_id_gives_a_domain_or_one_clear_error_at_a_cost_bounded_by_the_text(text):
    result, cost = measure(lambda: domain_id(text), (InvalidDomainId,))
    cost.assert_within(len(text.encode()), "domain_id")
    if isinstance(result, InvalidDomainId):
        assert str(result).startswith("ROS_DOMAIN_ID=") and len(str(result)) < 200
    else:
        assert type(result) is int and 0 <= result <= MAX_DOMAIN_ID
