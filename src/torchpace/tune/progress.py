"""The tune's progress bar: the stage and the trial running now, how many ran, the share of the
budget used and the time left of it."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

_STEPS = 1000  # the bar's resolution: the budget in thousandths


class TuneProgress:
    def __init__(self, budget_s: float) -> None:
        self._progress = Progress(
            TextColumn("tune"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}% of the {task.fields[budget]} budget"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),  # at most the budget left: the search stops there
            TextColumn("{task.description}"),
            console=Console(stderr=True),
            transient=True,
        )
        minutes = f"{budget_s / 60:g} min"
        self._task = self._progress.add_task("", total=_STEPS, budget=minutes)

    def __enter__(self) -> TuneProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.__exit__(kind, err, tb)

    def update(self, trial: str, used: float) -> None:
        self._progress.update(self._task, completed=min(used, 1.0) * _STEPS, description=trial)
