"""The demo's progress bar."""
from __future__ import annotations

from typing import Any

from fastops.apps.demo.generator import PlayerEventSource
from fastops.runtime import progress as _progress

__all__ = ["Progress"]


class Progress(_progress.Progress):
    """The demo's bar: :class:`fastops.runtime.progress.Progress` labelled "reward
    engine", counting the rows of the ``player_events`` source tasks (also
    when used without a plan, as a bare ``progress(metrics)`` callback)."""

    def __init__(self, total: int | None = None, stream: Any = None, enabled: bool = True,
                 label: str = "reward engine"):
        super().__init__(total, stream, enabled, label, sources=(PlayerEventSource.name,))
