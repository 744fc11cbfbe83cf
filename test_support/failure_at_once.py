"""A pytest plugin for the jobs of ``tools/gpu-suite.sh`` (``GPU_SUITE_JOB`` set): a failure is written the moment it
happens, not in the summary at the end.  A job cut at its time limit is SIGKILLed 10 s after its SIGINT when a test
hangs, and then prints no summary: what failed before the hang, and why, would be lost with it."""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.failed or not os.environ.get("GPU_SUITE_JOB"):
        return
    terminal = _CONFIG[0].pluginmanager.get_plugin("terminalreporter") if _CONFIG else None
    if terminal is not None:
        terminal.ensure_newline()
        terminal.write_sep("!", f"failed, at once ({report.when}): {report.nodeid}")
        terminal.write_line(report.longreprtext)
        terminal.write_sep("!", "the job goes on")


_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG[:] = [config]
