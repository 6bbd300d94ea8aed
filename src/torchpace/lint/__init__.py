"""``torchpace lint``: find the slow patterns of the guides in source code, statically.

Parses with the standard library's ``ast`` and never imports torch.
"""

from __future__ import annotations

from torchpace.lint.engine import FileResult, LintError, lint_paths, lint_source, select
from torchpace.lint.rules import RULES, get

__all__ = ["RULES", "FileResult", "LintError", "get", "lint_paths", "lint_source", "select"]
