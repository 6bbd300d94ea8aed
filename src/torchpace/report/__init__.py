"""``torchpace report``: a doctor or tune result as one self-contained HTML page and as a
terminal view, both rendered from the same ``Document`` (STYLE rule 11).

    torchpace report torchpace-tune.json -o report.html
    torchpace report doctor.json torchpace-tune.json -o report.html

Importing this package imports neither torch nor matplotlib nor rich; ``html`` and
``terminal`` import theirs when used.
"""

from __future__ import annotations

__all__ = ["ResultError", "document", "load_result"]

from torchpace.report.load import ResultError, document, load_result
