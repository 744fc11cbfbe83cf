"""The READMEs' code blocks run as pasted: each host block is executed here, in a subprocess, the way a user would.

A block is marked by an HTML comment on the line before its fence (invisible on GitHub):

    <!-- snippet: host[, group NAME][, ctrl-c after SECONDS][, timeout SECONDS][, expect TEXT] -->
    <!-- snippet: cuda[, runs][, expect TEXT] -->   needs a GPU; a host block must follow it in the same file;
                                        ``runs``: complete as pasted, run where a GPU and torch are
    <!-- snippet: fragment (why) -->    a line or command list to adapt, not a program

A host block runs to its end with exit code 0 (within ``timeout``, default 120 s), or, with ``ctrl-c after``,
is sent SIGINT that many seconds after it started and must then end with exit code 0 and no traceback.
The blocks of one ``group`` run at the same time (a publisher and its subscriber); ``expect`` is text
its output must contain.  Every ``python`` block must carry a marker.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = sorted(path for path in [ROOT / "README.md", *ROOT.glob("ros2_cuda_ipc_*/README.md")] if path.exists())
MARKER = re.compile(r"^<!-- snippet: (.*?) -->$")
FENCE = re.compile(r"^```(\w*)")


@dataclass
class Snippet:
    readme: Path
    line: int
    language: str
    code: str
    kind: str  # host, cuda, fragment, or "" (no marker)
    group: str | None = None
    ctrl_c_after: float | None = None
    timeout: float = 120.0
    expect: str | None = None
    runs: bool = False  # a CUDA block complete as pasted

    @property
    def name(self) -> str:
        return f"{self.readme.relative_to(ROOT)}:{self.line}"


def parse_marker(text: str) -> dict[str, object]:
    if text.startswith("fragment"):  # the rest is free text: why it is not a program
        return {"kind": "fragment"}
    parts = [part.strip() for part in text.split(",")]
    fields: dict[str, object] = {"kind": parts[0].split()[0]}
    for part in parts[1:]:
        if part.startswith("group "):
            fields["group"] = part[len("group "):]
        elif part.startswith("ctrl-c after "):
            fields["ctrl_c_after"] = float(part[len("ctrl-c after "):])
        elif part.startswith("timeout "):
            fields["timeout"] = float(part[len("timeout "):])
        elif part.startswith("expect "):
            fields["expect"] = part[len("expect "):]
        elif part == "runs" and fields["kind"] == "cuda":
            fields["runs"] = True
        else:
            raise ValueError(f"unknown snippet marker part {part!r}")
    return fields


def snippets(readme: Path) -> list[Snippet]:
    found, lines = [], readme.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        marker = MARKER.match(lines[index - 1]) if index else None
        fields = parse_marker(marker.group(1)) if marker else {"kind": ""}
        found.append(Snippet(readme, index + 1, fence.group(1), "\n".join(lines[index + 1:end]) + "\n",
                             **fields))  # type: ignore[arg-type]
        index = end + 1
    return found


ALL = [snippet for readme in READMES for snippet in snippets(readme)]
HOST = [snippet for snippet in ALL if snippet.kind == "host"]
CUDA_RUNS = [snippet for snippet in ALL if snippet.kind == "cuda" and snippet.runs]
GROUPS: dict[str, list[Snippet]] = {}
for _snippet in HOST:
    GROUPS.setdefault(_snippet.group or _snippet.name, []).append(_snippet)


def test_every_python_block_is_marked_and_every_cuda_block_has_a_host_variant_after_it():
    assert HOST, "no host snippets found"
    for snippet in ALL:
        if snippet.language == "python":
            assert snippet.kind in ("host", "cuda", "fragment"), f"{snippet.name}: python block without a marker"
        if snippet.kind == "cuda":
            later = [s for s in ALL if s.readme == snippet.readme and s.line > snippet.line and s.language == "python"]
            assert any(s.kind == "host" for s in later), f"{snippet.name}: a CUDA block with no host variant after it"


def _start(snippet: Snippet, tmp_path: Path) -> subprocess.Popen:
    script = tmp_path / f"snippet_{snippet.line}.{'py' if snippet.language == 'python' else 'sh'}"
    script.write_text(snippet.code)
    command = [sys.executable, str(script)] if snippet.language == "python" else ["bash", "-e", str(script)]
    return subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_host_snippets_run_as_pasted(group, tmp_path):
    members = GROUPS[group]
    processes = [(_start(snippet, tmp_path), snippet) for snippet in members]
    started = time.monotonic()
    outputs = {}
    for process, snippet in processes:
        if snippet.ctrl_c_after is not None:
            time.sleep(max(0.0, started + snippet.ctrl_c_after - time.monotonic()))
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        try:
            outputs[snippet.name] = process.communicate(timeout=snippet.timeout)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"{snippet.name} still ran after {snippet.timeout:g} s:\n{process.communicate()[0]}")
    for process, snippet in processes:
        out = outputs[snippet.name]
        assert process.returncode == 0, f"{snippet.name} ended with {process.returncode}:\n{out}"
        assert "Traceback" not in out, f"{snippet.name}:\n{out}"
        if snippet.expect:
            assert snippet.expect in out, f"{snippet.name}: {snippet.expect!r} not in its output:\n{out}"


def _cuda_and_torch_missing() -> str | None:
    from gpu_marks import NO_GPU

    if NO_GPU is not None:
        return f"needs a CUDA GPU: {NO_GPU}"
    import importlib.util

    return None if importlib.util.find_spec("torch") else "needs torch"


@pytest.mark.timeout(300)
@pytest.mark.skipif(_cuda_and_torch_missing() is not None, reason=str(_cuda_and_torch_missing()))
@pytest.mark.parametrize("snippet", CUDA_RUNS, ids=[snippet.name for snippet in CUDA_RUNS])
def test_cuda_snippets_marked_runs_run_as_pasted(snippet, tmp_path):
    """Before: the core README's first CUDA block raised NameError: name 'torch' is not defined."""
    process = _start(snippet, tmp_path)
    out = process.communicate(timeout=snippet.timeout)[0]
    assert process.returncode == 0 and "Traceback" not in out, f"{snippet.name} ended with {process.returncode}:\n{out}"
    if snippet.expect:
        assert snippet.expect in out, f"{snippet.name}: {snippet.expect!r} not in its output:\n{out}"


def _undefined_names(code: str) -> set[str]:
    """Names a module-level program reads but never binds (imports, assignments, with / for / except targets)."""
    import ast
    import builtins

    tree = ast.parse(code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ExceptHandler)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)} - bound


def test_cuda_blocks_marked_runs_use_no_name_they_do_not_define():
    """Where no GPU runs them: every name each reads is imported or assigned in it (the core README's first used
    torch, camera_frame, msg and publisher, defining none)."""
    assert any(snippet.readme.parent.name == "ros2_cuda_ipc_core" for snippet in CUDA_RUNS)
    for snippet in CUDA_RUNS:
        assert not _undefined_names(snippet.code), (snippet.name, _undefined_names(snippet.code))
    assert _undefined_names("frame = torch.zeros(1)\nmsg.core = 1") == {"torch", "msg"}  # the check's own check


ROS2_RUN = re.compile(r"\bros2 run ([a-z0-9_]+) ([a-z0-9_]+)")


def test_every_ros2_run_names_an_executable_a_make_setup_workspace_has_on_its_path():
    """A ``make setup`` workspace has no ``ros2`` command: the examples README says so and to type the executable
    itself, which works only if every ``ros2 run PACKAGE EXECUTABLE`` the READMEs show is on the workspace's PATH."""
    import os
    import shutil

    if shutil.which("ros2") is not None:
        pytest.skip("a ROS install: ros2 run works here, and its executables are not on PATH")
    runs = {match.groups() for readme in READMES for match in ROS2_RUN.finditer(readme.read_text())}
    assert runs, "no ros2 run in the READMEs"
    for package, executable in sorted(runs):
        found = shutil.which(executable)
        assert found and f"{os.sep}lib{os.sep}{package}{os.sep}" in found, (package, executable, found)
    first = (ROOT / "ros2_cuda_ipc_examples" / "README.md").read_text()
    said = first.index("`ros2 run PACKAGE EXECUTABLE` needs a ROS 2 install")
    assert said < first.index("ros2 run ros2_cuda_ipc_examples synthetic_camera"), "said after the first example"
