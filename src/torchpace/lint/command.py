"""``torchpace lint``: from the command line's arguments to the output and the exit code.

Exit codes: 0 no findings, 1 findings (or, with ``--diff``, changes to show), 2 a usage, config
or input error. Input errors are reported after every other file has been linted.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from torchpace._terminal import printable
from torchpace.findings import Finding
from torchpace.lint.config import (
    TABLE,
    ConfigError,
    LintConfig,
    find_config,
    load_config,
    selection,
)
from torchpace.lint.discovery import NOT_TRAINING_CODE, discover
from torchpace.lint.engine import lint_source
from torchpace.lint.fixes import NotFixable, apply_fixes, unified_diff, write_fixed
from torchpace.lint.output import render_github, render_json, render_text
from torchpace.lint.parallel import lint_jobs, usable_cpus
from torchpace.lint.project import forward_callees, new_run, step_callees
from torchpace.lint.results import FileResult, LintError
from torchpace.lint.rule import Rule
from torchpace.lint.rules.convs import settled_by_importers
from torchpace.lint.sarif import render_sarif
from torchpace.lint.selection import Selection
from torchpace.lint.unreferenced import Left, leave_out


def _applicable(finding: Finding, *, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.safety == "safe")


class _Fixer:
    """Applies fixes file by file (or prints them with ``--diff``); notebooks are left alone."""

    def __init__(self, chosen: Selection, rules: Sequence[Rule], *, unsafe: bool, diff: bool):
        self.chosen, self.by_code = chosen, {r.code: r for r in rules}
        self.unsafe, self.diff = unsafe, diff
        self.fixed = self.changed = self.notebook_unfixed = 0

    def __call__(self, r: FileResult) -> FileResult:
        if r.notebook:
            unfixed = sum(1 for f in r.findings if _applicable(f, unsafe=self.unsafe))
            self.notebook_unfixed += unfixed
            if unfixed and self.diff:
                print(f"{r.path}: note: fixes are not applied to notebooks", file=sys.stderr)
            return r
        result = apply_fixes(r.source, r.findings, unsafe=self.unsafe)
        if result.source == r.source:
            return r
        self.changed += 1
        if self.diff:
            print(unified_diff(r.path, r.source, result.source), end="")
            return r
        try:
            write_fixed(r.path, result.source)
        except NotFixable as exc:
            return dataclasses.replace(r, errors=(*r.errors, LintError(r.path, str(exc))))
        except OSError as exc:
            cause = f"cannot write the fixes: {exc.strerror or exc}"
            return dataclasses.replace(r, errors=(*r.errors, LintError(r.path, cause)))
        self.fixed += len(result.applied)
        # Lint the fixed file again: what remains is reported at its new position.
        rules = [self.by_code[c] for c in self.chosen.codes_for(r.path)]
        again = lint_source(r.path, result.source, rules)
        return _for_declared_torch(again) if isinstance(again, FileResult) else r


def _for_declared_torch(r: FileResult) -> FileResult:
    """Fixes that need a newer torch than the project declares become unsafe, saying so."""
    from torchpace.lint.torch_version import unsafe_reason

    changed = False
    findings = []
    for f in r.findings:
        fix = f.fix
        if fix is not None and fix.needs_torch and fix.safety == "safe":
            why = unsafe_reason(r.path, fix.needs_torch)
            if why:
                fix = dataclasses.replace(fix, safety="unsafe", title=f"{fix.title} ({why})")
                f = dataclasses.replace(f, fix=fix)
                changed = True
        findings.append(f)
    return dataclasses.replace(r, findings=tuple(findings)) if changed else r


def split_patterns(text: str | None) -> list[str]:
    """``"tests/,scratch/"`` → the patterns; None or ``""`` → none."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _with_step_callees(
    results: list[FileResult | LintError], chosen: Selection, workers: int
) -> list[FileResult | LintError]:
    """Lint again, with their entry points, the files whose functions and model classes another
    file's training loop calls on every step (:mod:`torchpace.lint.project`); usually none or a
    few. One file deep for functions as hot code: following what those files call in turn (a
    third file) with every rule found one true finding and three false ones in the
    42-repository corpus and cost about a fifth of lint's speed on it, relinting large library
    files twice. What they call is read once more only as a forward's code is
    (``loops.FORWARD``: TP207's host-built tensors, judged right in mask and window helpers).
    A model's submodules are followed further (``project.MODEL_DEPTH``): what its
    ``__init__`` builds, its forward runs."""
    files = [r for r in results if isinstance(r, FileResult)]
    entries = step_callees(files)
    if not entries:
        return results
    jobs = [(p, chosen.codes_for(p), e) for p, e in entries.items()]
    again = {r.path: r for r in lint_jobs(jobs, workers=workers)}
    # The helpers those files' step code calls in a further file, read there as a forward's
    # code (TP207): built on the host and moved, every step, in a mask or window helper.
    more = forward_callees([r for r in again.values() if isinstance(r, FileResult)], files, entries)
    jobs = [(p, chosen.codes_for(p), e) for p, e in more.items()]
    again.update({r.path: r for r in lint_jobs(jobs, workers=workers)})
    return [again.get(r.path, r) if isinstance(r, FileResult) else r for r in results]


def _errors(results: Sequence[FileResult | LintError]) -> list[LintError]:
    out: list[LintError] = []
    for r in results:
        out += [r] if isinstance(r, LintError) else list(r.errors)
    return out


def run(args: argparse.Namespace) -> int:
    """Lint ``args.paths`` as the parsed command line says; the exit code."""
    from torchpace.lint import rules as registry

    rules = registry.RULES
    new_run()
    flags = {"select": args.select, "extend_select": args.extend_select, "ignore": args.ignore}
    config_error: str | None = None
    try:
        config = load_config(args.config if args.config else find_config(Path.cwd()))
        chosen = selection(config, rules, **flags)
    except ConfigError as exc:
        # The files are still linted, with the defaults and the command line's flags; the
        # exit code says something was wrong.
        config_error = f"{exc}; linted with the default settings"
        config = LintConfig()
        chosen = selection(config, rules, **flags)
    skip = list(NOT_TRAINING_CODE if config.exclude is None else config.exclude)
    if args.exclude is not None:  # the command line replaces the config's list
        skip = split_patterns(args.exclude)
    skip += config.extend_exclude + split_patterns(args.extend_exclude)
    skipped: list[str] = []
    items = discover(args.paths, skip, skipped)
    jobs = [(p, chosen.codes_for(p), frozenset[str]()) for p in items if isinstance(p, str)]
    workers = args.jobs or usable_cpus()
    linted = iter(lint_jobs(jobs, workers=workers))
    results = [item if isinstance(item, LintError) else next(linted) for item in items]
    results = _with_step_callees(results, chosen, workers)
    results = settled_by_importers(results)
    left: list[Left] = []
    if not getattr(args, "include_unreferenced", False):
        results, left = leave_out(results, args.paths)
    results = [_for_declared_torch(r) if isinstance(r, FileResult) else r for r in results]
    fixer = _Fixer(chosen, rules, unsafe=args.unsafe_fixes, diff=args.diff)
    if args.fix or args.diff:
        results = [fixer(r) if isinstance(r, FileResult) else r for r in results]
    files = [r for r in results if isinstance(r, FileResult)]
    errors = _errors(results)
    if not args.diff:
        _print_report(args.format, files, errors, chosen.rules, fixer)
    if skipped and args.format == "text":
        shown = ", ".join(skipped[:3]) + (", ..." if len(skipped) > 3 else "")
        print(
            "note: not linted, as tests, benchmarks, templates or run snapshots rather than "
            "training code: "
            f"{shown} (--exclude '' lints them; see `exclude` in {TABLE})",
            file=sys.stderr,
        )
    if left:  # on stderr whatever the format: findings never leave without a word
        shown = ", ".join(f"{x.path}: {x.name}" for x in left[:3])
        count = sum(x.findings for x in left)
        print(
            printable(
                f"note: {count} finding{'s' if count != 1 else ''} left out in definitions that "
                f"nothing in the project names: {shown}{', ...' if len(left) > 3 else ''} "
                "(--include-unreferenced reports them)"
            ),
            file=sys.stderr,
        )
    for r in files:
        for cell in r.skipped_cells:
            print(printable(f"note: {r.path}: {cell}; the cell is not linted"), file=sys.stderr)
    if config_error is not None:
        print(config_error, file=sys.stderr)
    for e in errors:
        print(printable(str(e)), file=sys.stderr)
    failed = bool(errors) or config_error is not None
    if args.diff:
        return 2 if failed else (1 if fixer.changed else 0)
    return 2 if failed else (1 if any(r.findings for r in files) else 0)


def _print_report(
    form: str,
    files: Sequence[FileResult],
    errors: Sequence[LintError],
    rules: Sequence[Rule],
    fixer: _Fixer,
) -> None:
    findings = [f for r in files for f in r.findings]
    if form == "json":
        print(render_json(findings))
    elif form == "sarif":
        sources = {r.path: r.source for r in files}
        print(render_sarif(findings, rules=rules, errors=errors, sources=sources))
    elif form == "github":
        sources = {r.path: r.source for r in files if r.notebook}
        text = render_github(findings, errors, {r.code: r.level for r in rules}, sources)
        if text:
            print(text)
    else:
        print(
            render_text(
                findings,
                files=len(files),
                fixed=fixer.fixed,
                notebook_unfixed=fixer.notebook_unfixed,
                errors=len(errors),
            )
        )
