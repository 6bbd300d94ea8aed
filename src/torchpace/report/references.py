"""The report's reference section: the catalogue entry of every technique and the documentation
of every lint rule the report names, so that each finding and trial links to its explanation on
the page itself (the page must work offline). The text comes from the catalogue and the rule
registry, the same single sources as docs/techniques.md and docs/rules.md. No torch here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from torchpace import catalog
from torchpace.report.document import Block, Cell, Code, Entry, Facts, Link, Paragraph, Section


def technique_anchor(technique_id: str) -> str:
    return f"technique-{technique_id}"


def rule_anchor(code: str) -> str:
    return f"rule-{code.lower()}"


def _technique(technique_id: str) -> Entry:
    anchor = technique_anchor(technique_id)
    try:
        t = catalog.get(technique_id)
    except KeyError:
        text = f"{technique_id} is not in this version's catalogue (a result from another version)."
        return Entry(anchor, technique_id, (Paragraph(text, tone="note"),))
    numerics = (
        "changes numerics: accepted only if the loss lands in the baseline's seed band"
        if t.changes_numerics
        else "preserves numerics: the same loss trajectory as the baseline, up to rounding"
    )
    facts: tuple[tuple[str, Cell], ...] = (
        ("id", t.id),
        ("devices", ", ".join("CUDA" if d == "cuda" else "CPU" for d in t.devices)),
        ("numerics", numerics),
    )
    blocks: list[Block] = [
        Facts(facts),
        Paragraph(f"Why it is faster. {t.mechanism}"),
        Paragraph(f"Helps when. {t.helps_when}"),
        Paragraph(f"Hurts when. {t.hurts_when}"),
        Paragraph(f"Measured. {t.measured or 'Not yet measured on this project’s hardware.'}"),
        Code(t.how, "python"),
    ]
    return Entry(anchor, f"{t.title} ({t.id})", tuple(blocks))


def _doc_blocks(doc: str) -> list[Block]:
    """A rule's markdown doc as blocks: '## Heading' paragraphs and fenced code."""
    blocks: list[Block] = []
    heading, fenced = "", False
    lines: list[str] = []
    code: list[str] = []

    def flush(before_code: bool = False) -> None:
        nonlocal heading
        text = " ".join(line.strip() for line in lines if line.strip())
        if text:
            blocks.append(Paragraph(f"{heading}. {text}" if heading else text))
            heading = ""
        elif heading and before_code:
            blocks.append(Paragraph(f"{heading}:"))
            heading = ""
        lines.clear()

    for line in doc.splitlines():
        if line.startswith("```"):
            if fenced:
                blocks.append(Code("\n".join(code), "python"))
                code.clear()
            else:
                flush(before_code=True)
            fenced = not fenced
        elif fenced:
            code.append(line)
        elif line.startswith("## "):
            flush()
            heading = line[3:].strip()
        else:
            lines.append(line)
    flush()
    return blocks


def _rule(code: str) -> Entry:
    from torchpace.lint.rules import get

    anchor = rule_anchor(code)
    try:
        rule = get(code)
    except KeyError:
        text = f"{code} is not a rule of this version (a result from another version)."
        return Entry(anchor, code, (Paragraph(text, tone="note"),))
    facts: tuple[tuple[str, Cell], ...] = (
        ("message", rule.message),
        ("technique", Link(rule.technique, technique_anchor(rule.technique))),
        ("enabled by default", "yes" if rule.default else "no"),
        ("level", rule.level),
    )
    return Entry(anchor, f"{rule.code} {rule.name}", (Facts(facts), *_doc_blocks(rule.doc)))


def references(*, techniques: Iterable[str], rules: Iterable[str] = ()) -> Section | None:
    """The section for the named techniques and rules (each once, in first-named order); rules'
    techniques are included too. None when nothing is named."""
    codes = list(dict.fromkeys(rules))
    ids = list(dict.fromkeys(techniques))
    if codes:
        from torchpace.lint.rules import get

        for code in codes:
            with contextlib.suppress(KeyError):  # an unknown code gets its own note
                ids.append(get(code).technique)
        ids = list(dict.fromkeys(ids))
    if not ids and not codes:
        return None
    entries = [_rule(c) for c in codes] + [_technique(t) for t in ids]
    return Section("references", "Techniques and rules referenced", tuple(entries))
