"""Output files written whole: beside their name, then renamed, so a stop while one is written (Ctrl-C while the
benchmark plots) leaves no half-written file, and a previous run's file whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_whole", "write_whole"]


def replace_whole(path: Path, write: Callable[[Path], object]) -> Path:
    """``write(temporary path)``, then that file renamed to ``path``; ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writing = path.with_name(f".{path.name}.writing")
    try:
        write(writing)
        writing.replace(path)
    finally:
        writing.unlink(missing_ok=True)
    return path


def write_whole(path: Path, text: str) -> Path:
    """``text`` as the file ``path``, whole or not at all."""
    return replace_whole(path, lambda writing: writing.write_text(text))
