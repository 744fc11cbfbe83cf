"""The child's side of the runner's report requests (``nodes/report_requests.py``): lines read from a pipe, each
bounded, garbage ignored, a stream cut anywhere read the same, and in a real process its reader thread triggers the
nodes named and ends at EOF; a process without the variable has no channel, one with a bad variable a clear error."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros2_cuda_ipc_examples.nodes import report_requests
from ros2_cuda_ipc_examples.nodes.report_requests import (
    MAX_LINE_BYTES,
    REPORT_REQUESTS_VARIABLE,
    ChannelError,
    register,
    request_lines,
)
from ros2_cuda_ipc_examples.pipelines.request_pipe import RequestPipe
from ros2_cuda_ipc_examples.pipelines.runner import _start


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def test_names_are_read_and_garbage_overlong_and_unended_lines_are_dropped():
    overlong = b"/lidar/" + b"x" * MAX_LINE_BYTES
    data = (b"/lidar/voxel\n\n\xff\xfe\n/a\x1b[31m\n" + overlong + b"\n*\n/lidar/preview\n/lidar/unended")
    assert list(request_lines(iter([data]))) == ["/lidar/voxel", "*", "/lidar/preview"]
    # an overlong line cut into pieces longer than the limit: dropped through its newline, the next line read
    pieces = [b"/x" * MAX_LINE_BYTES, b"y" * (3 * MAX_LINE_BYTES), b"z\n/lidar/voxel\n"]
    assert list(request_lines(iter(pieces))) == ["/lidar/voxel"]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.one_of(st.sampled_from([b"/lidar/voxel", b"*", b"\xff", b"", b"\x00", b"a" * 2000]),
                          st.binary(max_size=300)), max_size=40),
       st.lists(st.integers(min_value=0, max_value=20_000), max_size=20))
def test_a_stream_cut_anywhere_reads_the_same_names_in_memory_bounded_by_the_line_limit(lines, cuts):
    data = b"\n".join(lines) + b"\n"
    whole = list(request_lines(iter([data])))
    tracemalloc.start()
    try:
        pieces = list(request_lines(iter(_cut(data, cuts))))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pieces == whole
    expected = [line.decode() for line in data.split(b"\n")[:-1] if 0 < len(line) <= MAX_LINE_BYTES
                and _printable(line)]
    assert whole == expected
    # the reader keeps one pending line (at most the limit) beside the chunk it was given and the names it yields
    assert peak <= 4 * MAX_LINE_BYTES + 2 * max(map(len, _cut(data, cuts)), default=0) + len(data) + 16 * 1024


def _printable(line: bytes) -> bool:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ord(c) >= 0x20 and ord(c) != 0x7F for c in text)


def test_a_process_without_the_variable_has_no_channel(monkeypatch):
    monkeypatch.delenv(REPORT_REQUESTS_VARIABLE, raising=False)
    monkeypatch.setattr(report_requests, "_channel", None)
    assert register("/ns/node", lambda: None) is None
    assert report_requests._channel is None


@pytest.mark.parametrize(("value", "said"), [("abc", "is not a file descriptor number"),
                                             ("9" * 40, "is not a file descriptor number"),
                                             ("999999", "Bad file descriptor"), ("regular", "is not a pipe")])
def test_a_bad_variable_is_a_clear_error_and_leaves_no_channel(monkeypatch, tmp_path, value, said):
    monkeypatch.setattr(report_requests, "_channel", None)
    with open(tmp_path / "file", "w") as regular:
        if value == "regular":
            value = str(regular.fileno())
        monkeypatch.setenv(REPORT_REQUESTS_VARIABLE, value)
        with pytest.raises(ChannelError, match=said):
            register("/ns/node", lambda: None)
    assert report_requests._channel is None and REPORT_REQUESTS_VARIABLE not in os.environ


CHILD = """
import sys, threading
from ros2_cuda_ipc_examples.nodes.report_requests import register
a = register("/ns/a", lambda: print("a", flush=True))
b = register("/ns/b", lambda: print("b", flush=True))
gone = register("/ns/gone", lambda: print("gone", flush=True))
gone.close()
def fail():
    raise RuntimeError("a node whose start failed")
register("/ns/a", fail)
# Found before "ready": the test may ask everything and close the pipe (the thread then ends) before this main
# thread runs again, and a look after that found no thread (4 runs of 12 on a busy machine).
reader = next(t for t in threading.enumerate() if t.name == "report-requests")
print("ready", flush=True)
reader.join(60)
print("ended" if not reader.is_alive() else "still reading", flush=True)
"""


@pytest.mark.timeout(120)
def test_a_child_s_reader_triggers_the_nodes_named_and_ends_when_the_runner_closes_its_pipe():
    pipe = RequestPipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **pipe.environment()}, pass_fds=(pipe.child_end,))
    pipe.started()
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        assert pipe.ask("/ns/a")
        assert child.stdout.readline() == "a\n"
        os.write(pipe._fd, b"\xff\xfe garbage\n" + b"/ns/b" * 300 + b"\n/ns/gone\n")  # dropped: nothing comes
        assert not pipe.ask("/ns/two\nlines") and not pipe.ask("/ns/" + "x" * MAX_LINE_BYTES)
        assert pipe.ask("/ns/b") and child.stdout.readline() == "b\n"
        assert pipe.ask("*")
        assert sorted([child.stdout.readline(), child.stdout.readline()]) == ["a\n", "b\n"]
        pipe.close()  # EOF: the reader ends
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
        pipe.close()
    assert out == "ended\n" and child.returncode == 0, (out, err)
    assert not pipe.ask("/ns/a")  # closed: nothing written, nothing raised


SHOW_PIPE = ("import os, stat; fd = int(os.environ['ROS2_CUDA_IPC_REPORT_REQUESTS']); st = os.fstat(fd); "
             "print(stat.S_ISFIFO(st.st_mode), st.st_ino, b''.join(iter(lambda: os.read(fd, 100), b'')))")


@pytest.mark.timeout(60)
def test_each_start_of_a_child_restarts_included_gets_a_pipe_of_its_own(tmp_path):
    """The runner's side: a child started, then started again (``--restart``), each reads its own pipe to EOF,
    which comes when the runner closes its write end (no child holds a write end, not even the one started
    while the first's pipe was open)."""
    key = bytes(32)
    children = [_start("node", [sys.executable, "-c", SHOW_PIPE], tmp_path, key)]
    try:
        children.append(_start("node", [sys.executable, "-c", SHOW_PIPE], tmp_path, key, "a"))
        for child in children:
            assert child.requests.ask("/ns/node")
            child.requests.close()  # EOF after the line: the child's reading ends
            assert child.process.wait(timeout=30) == 0
    finally:  # a failed assertion leaves no child or pipe behind
        for child in children:
            child.process.kill()
            child.process.wait()
            child.requests.close()
    lines = [line for line in (tmp_path / "node.log").read_text().splitlines() if line.startswith("True ")]
    assert len(lines) == 2 and lines[0].split()[1] != lines[1].split()[1], lines  # two pipes (inodes)
    assert all(line.endswith("b'/ns/node\\n'") for line in lines), lines


def test_the_read_end_taken_is_made_blocking_and_not_inheritable(monkeypatch):
    """A non-blocking read end ended the reader at its first empty read (BlockingIOError)."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_inheritable(read_end, True)
    monkeypatch.setenv(REPORT_REQUESTS_VARIABLE, str(read_end))
    try:
        assert report_requests._channel_from_environment() == read_end
        assert os.get_blocking(read_end) and not os.get_inheritable(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize("end", ["stdin", "write end"])
def test_a_standard_stream_or_a_write_end_is_refused(monkeypatch, end):
    """A stale or mistaken number must not take the process's own stdin (a pipe under ``cmd | node``) or another
    pipe's write end, which the reader would close when reading it failed."""
    read_end, write_end = os.pipe()
    try:
        monkeypatch.setenv(REPORT_REQUESTS_VARIABLE, "0" if end == "stdin" else str(write_end))
        said = "is a standard stream" if end == "stdin" else "is not a pipe's read end"
        with pytest.raises(ChannelError, match=said):
            report_requests._channel_from_environment()
        assert os.get_inheritable(write_end) is False and os.fstat(write_end)  # left as it was, open
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_pipe_that_fails_is_said_once(caplog):
    write_only = os.open(os.devnull, os.O_WRONLY)  # reading it fails (EBADF), and its number stays this test's
    try:
        assert list(report_requests._chunks(write_only)) == []
    finally:
        os.close(write_only)
    said = [record.getMessage() for record in caplog.records]
    assert said == ["report requests: reading the runner's pipe failed (Bad file descriptor); no more requests are "
                    "read"], said
