"""Command-line arguments are outside input: checking them costs at most a constant times their size, in CPU time and
in tracemalloc's peak, whatever they hold (test_support/parser_cost.py), and a refusal is one bounded line."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cost import measure
from rclpy.parameter import Parameter

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_core.node.arguments import RosArgumentsError, check_ros_arguments, topic_name
from ros2_cuda_ipc_core.node.node_cli import parse_node_arguments
from ros2_cuda_ipc_core.node.parameters import unknown_parameters

COST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
#: Parameters rclpy declares on every node itself: an override of one with an integer fails the node's making (a
#: Jazzy run drew ``use_sim_time``: hypothesis seeds its strings with constants from the code it runs).
RCLPY_OWN = frozenset({"use_sim_time", "start_type_description_service"})

#: Pieces of arguments as a newcomer (or a fuzzer) types them: flags, rules, names, junk.
PIECES = st.one_of(
    st.sampled_from(["-p", "-r", "--params-file", "--log-level", "-e", "--enclave", "--remap", "--param", "-h",
                     "--version", "--ros-args", "--", ":=", "__ns:=", "__node:=", "width:=640", "image:=/cam",
                     "/missing.yaml", "bad topic", ", at /x.c:1", ". Error: ", "[1,", "{a: 1}", "~/x", "1abc"]),
    st.text(min_size=0, max_size=40),
)
ARGUMENTS = st.lists(st.lists(PIECES, min_size=1, max_size=4).map("".join), min_size=0, max_size=24)


def size_of(args: list[str]) -> int:
    return sum(len(arg.encode("utf-8", "surrogatepass")) + 1 for arg in args) + 1


def _check(args: list[str]) -> object:
    return check_ros_arguments(["prog", "--ros-args", *args])


@COST
@given(args=ARGUMENTS)
def test_checking_ros_arguments_costs_at_most_their_size(args):
    args = [arg.replace("\x00", "") for arg in args]  # a C string ends there: no command line holds one
    result, cost = measure(lambda: _check(args), (RosArgumentsError,))
    cost.assert_within(size_of(args), "check_ros_arguments")
    if isinstance(result, RosArgumentsError):
        message = str(result)
        assert "\n" not in message and message.startswith("--ros-args: ")
        assert len(message) <= 1200, message  # bounded, however long the argument it names


@pytest.mark.parametrize("length", [10_000, 200_000])
def test_a_huge_argument_is_checked_in_proportion_and_named_in_a_bounded_line(length):
    for args in (["-r", f"image:={'a' * length} b"], ["-p", f"{'w' * length}"], ["-r", "x:=/y", "z" * length],
                 ["-r", f"image:=/{', at /x.c:1' * (length // 11)}"]):
        result, cost = measure(lambda args=args: _check(args), (RosArgumentsError,))
        cost.assert_within(size_of(args), f"check_ros_arguments of a {length}-byte argument")
        assert isinstance(result, RosArgumentsError) and len(str(result)) <= 1200, result


@COST
@given(text=st.text(max_size=300) | st.sampled_from(["camera/image", "/a b", "~/x", "{node}/x", "1abc", ""]))
def test_a_topic_name_argument_costs_at_most_its_size(text):
    text = text.replace("\x00", "")
    result, cost = measure(lambda: topic_name(text), (argparse.ArgumentTypeError,))
    cost.assert_within(len(text.encode("utf-8", "surrogatepass")) + 1, "topic_name")
    if isinstance(result, argparse.ArgumentTypeError):
        assert "\n" not in str(result) and " is not a topic name: " in str(result)


class Tabled:
    """A node class's table, as parse_node_arguments reads it (for its --help)."""

    PARAMETERS = (NodeParameter("width", 640, "image width"), NodeParameter("height", 480, "image height"))


@COST
@given(args=ARGUMENTS)
def test_a_nodes_own_arguments_cost_at_most_their_size(args):
    def parse() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return parse_node_arguments(Tabled, args, "tabled")  # help, version, or a refusal: SystemExit

    _, cost = measure(parse, (SystemExit,))
    # --version reads the installed distribution's metadata (tens of ms, whatever the arguments): a fixed cost
    cost.assert_within(size_of(args), "parse_node_arguments", cpu_fixed=0.5, peak_fixed=2 << 20)


@COST
@given(names=st.lists(st.text(alphabet=st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")) | st.just("_"),
                                min_size=1, max_size=600).filter(lambda name: name not in RCLPY_OWN),
                      min_size=1, max_size=12, unique=True))
def test_unknown_parameters_cost_at_most_the_names_given(node, names):
    """The closest-name look (difflib) over a real node's overrides: long or many names cost in proportion."""
    from rclpy.node import Node

    given_node = Node("unknown_cost", parameter_overrides=[Parameter(name, value=1) for name in names])
    try:
        for declared in ("width", "height", "frame_id"):
            given_node.declare_parameter(declared, 1)
        result, cost = measure(lambda: unknown_parameters(given_node))
        cost.assert_within(sum(len(name) + 1 for name in names), "unknown_parameters")
        assert set(result) == set(names) - {"width", "height", "frame_id"}
    finally:
        given_node.destroy_node()
