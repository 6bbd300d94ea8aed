"""What linting one file gives back: a result with its findings, or an error naming the cause."""

from __future__ import annotations

from dataclasses import dataclass

from torchpace.findings import Finding


@dataclass(frozen=True)
class LintError:
    """A file that could not be linted (or a rule that crashed on it), and why."""

    path: str
    cause: str

    def __str__(self) -> str:
        return f"{self.path}: error: {self.cause}"


@dataclass(frozen=True)
class FileResult:
    """One linted file. ``errors`` name rules that crashed on it; other rules' findings stand."""

    path: str
    source: bytes  # the file as read, byte-order mark included (a notebook's JSON as is)
    findings: tuple[Finding, ...]
    errors: tuple[LintError, ...] = ()
    notebook: bool = False
    # (module, function) its training loops call on every step (torchpace.lint.project)
    calls_out: tuple[tuple[str, str], ...] = ()
    # Notebook cells left out as not Python ("cell 4: syntax error at line 2: ..."): said,
    # never a failure of the run (a shell line IPython runs, such as ``ls -l x``).
    skipped_cells: tuple[str, ...] = ()
