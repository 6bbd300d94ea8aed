"""fit()'s progress bar (rich): step count, ETA, throughput and the last logged loss.

It shows only what the loop already knows on the host, so drawing it never syncs the device.
Off when not asked for or when stderr is not a terminal (rich then prints nothing).
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class StepProgress:
    def __init__(self, total: int, *, start: int = 0, enabled: bool = True) -> None:
        self._on = enabled
        self._progress = Progress(
            TextColumn("fit"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[loss]}"),
            console=Console(stderr=True),
            disable=not enabled,
            transient=False,
        )
        self._task = self._progress.add_task("fit", total=total, completed=start, rate="", loss="")

    def __enter__(self) -> StepProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.__exit__(kind, err, tb)

    def advance(self, samples_per_s: float) -> None:
        self._progress.update(self._task, advance=1, rate=f"{samples_per_s:,.0f} samples/s")

    def show_loss(self, loss: float) -> None:
        self._progress.update(self._task, loss=f"loss {loss:.4f}")

    def show_eval(self, loss: float) -> None:
        self._progress.update(self._task, loss=f"eval loss {loss:.4f}")
