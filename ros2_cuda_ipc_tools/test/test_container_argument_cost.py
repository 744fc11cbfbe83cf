"""The container's own command line (--load, --param NAME:=VALUE, --remap FROM:=TO, ...) costs at most a constant
times its size to parse, in CPU time and tracemalloc's peak, whatever it holds (test_support/parser_cost.py)."""

from __future__ import annotations

import contextlib
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cost import measure

from ros2_cuda_ipc_tools.components.container import build_parser, parse_value

COST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PIECES = st.one_of(st.sampled_from(["--load", "--name", "--namespace", "--param", "--remap", "--file", "--executor",
                                    "--list", "ros2_cuda_ipc_examples::Preview", "width:=640", ":=", "=", "1e999",
                                    "9" * 5000, "true", "-1", "nan"]),
                   st.text(max_size=40))
ARGUMENTS = st.lists(st.lists(PIECES, min_size=1, max_size=3).map("".join), max_size=24)


@COST
@given(args=ARGUMENTS)
def test_the_containers_arguments_cost_at_most_their_size(args):
    def parse() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return build_parser().parse_args(args)  # a refusal is argparse's SystemExit(2)

    _, cost = measure(parse, (SystemExit,))
    size = sum(len(arg.encode("utf-8", "surrogatepass")) + 1 for arg in args) + 1
    cost.assert_within(size, "the container's arguments", cpu_fixed=0.5, peak_fixed=2 << 20)  # --version: metadata


@COST
@given(text=st.text(max_size=2000) | st.sampled_from(["9" * 100_000, "1" + "0" * 4400, "1e999999", "-" * 50_000]))
def test_a_param_value_costs_at_most_its_size(text):
    value, cost = measure(lambda: parse_value(text))
    cost.assert_within(len(text.encode("utf-8", "surrogatepass")) + 1, "parse_value")
    assert isinstance(value, (bool, int, float, str))
