"""Fixtures of the tools' tests."""

from collections.abc import Iterator

import pytest
from gl_marks import x_display


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    """An X display for the viewer's window tests (DISPLAY, or an Xvfb started for the module); skips without one."""
    with x_display() as name:
        yield name
