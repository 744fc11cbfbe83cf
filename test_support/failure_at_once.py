"""A pytest plugin for the jobs of ``tools/gpu-suite.sh`` (``GPU_SUITE_JOB`` set): a failure is written the moment it
happens, not in the summary at the end.  A job cut at its time limit is SIGKILLed 10 s after its SIGINT when a test
hangs, and then prints no summary: what failed before the hang, and why, would be lost with it."""

from __future__ import annotations

import os
from typing import Any

import pytest


class _WriteFailuresAtOnce:
    def __init__(self, terminal: Any) -> None:
        self._terminal = terminal

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._terminal.ensure_newline()
            self._terminal.write_sep("!", f"failed, at once ({report.when}): {report.nodeid}")
            self._terminal.write_line(report.longreprtext)
            self._terminal.write_sep("!", "the job goes on")


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered (in its own pytest_configure)
def pytest_configure(config: pytest.Config) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get("GPU_SUITE_JOB") and terminal is not None:
        config.pluginmanager.register(_WriteFailuresAtOnce(terminal), "failure_at_once_writer")
