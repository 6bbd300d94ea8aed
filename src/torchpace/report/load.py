"""Read a result file and tell which kind it is: a doctor result (``schema``
"torchpace.doctor/1") or a tune result (``kind`` "tune", ``version`` 1). Anything else is a
``ResultError`` that says what the file is and what the report reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchpace.report.document import Document

DOCTOR_SCHEMA = "torchpace.doctor/1"
COMPARE_SCHEMA = "torchpace.compare/1"  # torchpace.script.compare.SCHEMA (no torch there)
TUNE_VERSION = 1
_READS = (
    "the report reads the JSON that `torchpace doctor --json PATH` and `torchpace compare "
    "--json PATH` write, or the torchpace-tune.json that `torchpace tune` writes"
)


class ResultError(ValueError):
    """The file is not a result this version can render; the message names what to change."""


def kind_of(result: Any, where: str) -> str:
    if not isinstance(result, dict):
        raise ResultError(f"{where}: a JSON {type(result).__name__}, not a result object; {_READS}")
    if result.get("schema") == DOCTOR_SCHEMA:
        return "doctor"
    if result.get("schema") == COMPARE_SCHEMA:
        return "compare"
    if result.get("kind") == "tune":
        if result.get("version") != TUNE_VERSION:
            raise ResultError(
                f"{where}: a tune result of version {result.get('version')!r}; this torchpace "
                f"reads version {TUNE_VERSION}. Re-run `torchpace tune` with this version."
            )
        return "tune"
    schema = result.get("schema")
    if isinstance(schema, str) and schema.startswith("torchpace.doctor/"):
        raise ResultError(
            f"{where}: a doctor result of schema {schema!r}; this torchpace reads "
            f"{DOCTOR_SCHEMA!r}. Re-run `torchpace doctor --json` with this version."
        )
    raise ResultError(f"{where}: not a torchpace doctor, tune or compare result; {_READS}")


def load_result(path: str | Path) -> tuple[str, dict[str, Any]]:
    """(kind, result) from a result file; ``ResultError`` for anything the report cannot read."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultError(f"{p}: no such file; {_READS}") from None
    except IsADirectoryError:
        raise ResultError(f"{p}: a directory; give the result file inside it") from None
    except UnicodeDecodeError:
        raise ResultError(f"{p}: not UTF-8 text; {_READS}") from None
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultError(f"{p}: not valid JSON ({e.msg} at line {e.lineno}); {_READS}") from None
    return kind_of(result, str(p)), result


def document(kind: str, result: dict[str, Any], where: str = "the result") -> Document:
    """The report document of a result of this ``kind``; a result with the right schema but a
    missing field is a ``ResultError`` naming the field."""
    try:
        if kind == "doctor":
            from torchpace.report import doctor_doc

            return doctor_doc.build(result)
        if kind == "compare":
            from torchpace.report import compare_doc

            return compare_doc.build(result)
        from torchpace.report import tune_doc

        return tune_doc.build(result)
    except KeyError as e:
        raise ResultError(
            f"{where}: the {kind} result has no {e.args[0]!r} field; it was cut short or edited. "
            f"Re-run `torchpace {kind}` to write it again."
        ) from None
    except (TypeError, ValueError, AttributeError, IndexError) as e:
        # A field of the wrong type (a string where a list was written): edited by hand or by
        # another program. The report says so and exits 2, as docs/report.md promises.
        raise ResultError(
            f"{where}: the {kind} result has a field of the wrong type ({e}); it was edited. "
            f"Re-run `torchpace {kind}` to write it again."
        ) from None
