"""The ``torchpace`` command line. Each subcommand imports torch only when it runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchpace._version import __version__


def _cmd_techniques(args: argparse.Namespace) -> int:
    from torchpace.catalog import TECHNIQUES
    from torchpace.catalog_docs import render_markdown

    if args.write_docs:
        from torchpace._files import atomic_write_text

        atomic_write_text(args.write_docs, render_markdown())
        print(f"wrote {args.write_docs}")
        return 0
    if args.json:
        from dataclasses import asdict

        print(json.dumps([asdict(t) for t in TECHNIQUES], indent=2, ensure_ascii=False))
        return 0
    from rich.table import Table

    table = Table(title=f"{len(TECHNIQUES)} techniques (docs/techniques.md has the details)")
    for col in ("id", "family", "devices", "numerics", "title"):
        table.add_column(col, overflow="fold")
    for t in TECHNIQUES:
        numerics = "changes" if t.changes_numerics else "preserves"
        table.add_row(t.id, t.family, ",".join(t.devices), numerics, t.title)
    _console().print(table)
    return 0


def _cmd_env(args: argparse.Namespace) -> int:
    from torchpace.measure.clock import resolve_device
    from torchpace.measure.env import fingerprint

    fp = fingerprint(resolve_device(args.device), measure_peak=not args.no_peak).to_dict()
    if args.json:
        print(json.dumps(fp, indent=2))
        return 0
    from rich.table import Table

    table = Table(title="torchpace env", show_header=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    for k, v in fp.items():
        table.add_row(k, "—" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)))
    _console().print(table)
    return 0


def _cmd_lint(args: argparse.Namespace) -> int:
    from torchpace.lint import RULES, FileResult, LintError, lint_paths, select
    from torchpace.lint.fixes import apply_fixes, unified_diff, write_fixed
    from torchpace.lint.output import render_json, render_text

    rules = select(RULES, args.select, args.ignore)
    results = lint_paths(args.paths, rules)
    errors = [r for r in results if isinstance(r, LintError)]
    files = [r for r in results if isinstance(r, FileResult)]
    findings = [f for r in files for f in r.findings]
    fixed = 0
    if args.fix or args.diff:
        changed = 0
        remaining = []
        for r in files:
            result = apply_fixes(r.source, r.findings, unsafe=args.unsafe_fixes)
            done = set(result.applied)
            remaining += [f for f in r.findings if f not in done]
            if result.source == r.source:
                continue
            changed += 1
            if args.diff:
                print(unified_diff(r.path, r.source, result.source), end="")
            else:
                write_fixed(r.path, result.source)
                fixed += len(result.applied)
        if args.diff:
            for e in errors:
                print(e, file=sys.stderr)
            return 2 if errors else (1 if changed else 0)
        findings = remaining
    if args.format == "json":
        print(render_json(findings))
    else:
        print(render_text(findings, files=len(files), fixed=fixed))
    for e in errors:
        print(e, file=sys.stderr)
    return 2 if errors else (1 if findings else 0)


def _cmd_rules(args: argparse.Namespace) -> int:
    from torchpace.lint import RULES

    for rule in RULES:
        print(f"{rule.code}  {rule.name:<28} {rule.technique:<20} {rule.message}")
    return 0


def _cmd_rule(args: argparse.Namespace) -> int:
    from torchpace.lint import get

    try:
        rule = get(args.code)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    print(f"# {rule.code} {rule.name}\n\n{rule.message}.\n\nTechnique: {rule.technique}\n")
    print(rule.doc, end="")
    return 0


def _console() -> Any:
    """A rich console; 100 columns when the output is not a terminal (pipes, CI logs)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=100)


def _bench(workload: str, args: argparse.Namespace) -> int:
    from torchpace.bench.run import run_bench
    from torchpace.bench.table import render

    configs = [c.strip() for c in args.compare.split(",") if c.strip()]
    data = run_bench(
        workload,
        configs=configs,
        steps=args.steps,
        block=args.block,
        warmup=args.warmup,
        device=args.device,
        seed=args.seed,
    )
    _console().print(render(data))
    if args.json:
        from torchpace._files import atomic_write_text

        atomic_write_text(args.json, json.dumps(data, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    return _bench(args.workload, args)


def _cmd_demo(args: argparse.Namespace) -> int:
    print("torchpace demo: the cnn workload, naive script settings against hand-tuned ones\n")
    return _bench("cnn", args)


def _add_bench_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compare", default="naive,tuned", help="configurations, baseline first (naive,tuned)"
    )
    p.add_argument("--steps", type=int, default=40, help="measured steps per configuration")
    p.add_argument("--block", type=int, default=4, help="steps per configuration per round")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps per configuration")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write the result, with the fingerprint, here")


def build_parser() -> argparse.ArgumentParser:
    from torchpace.workloads import NAMES

    parser = argparse.ArgumentParser(
        prog="torchpace",
        description="Make PyTorch training fast, and prove it.",
    )
    parser.add_argument("--version", action="version", version=f"torchpace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("techniques", help="list the technique catalogue")
    p.add_argument("--json", action="store_true", help="print the catalogue as JSON")
    p.add_argument("--write-docs", type=Path, metavar="PATH", help="write docs/techniques.md")
    p.set_defaults(func=_cmd_techniques)

    p = sub.add_parser("env", help="print the environment fingerprint")
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", default="auto")
    p.add_argument("--no-peak", action="store_true", help="skip measuring peak matmul FLOP/s")
    p.set_defaults(func=_cmd_env)

    p = sub.add_parser(
        "bench",
        help="paired benchmark of a built-in workload: naive against tuned settings",
        description="Interleaved, paired benchmark of a built-in workload's configurations.",
    )
    p.add_argument("workload", choices=NAMES)
    _add_bench_options(p)
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("demo", help="the main job on the built-in example (bench cnn)")
    _add_bench_options(p)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser(
        "lint",
        help="find slow PyTorch patterns in source code (never imports torch)",
        description="Statically lint Python files for the slow patterns of the performance guides.",
    )
    p.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--fix", action="store_true", help="apply the safe fixes")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix, also apply unsafe ones")
    p.add_argument("--diff", action="store_true", help="print the fixes as a diff; write nothing")
    p.add_argument("--select", metavar="CODES", help="comma-separated rule codes or prefixes")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes or prefixes")
    p.set_defaults(func=_cmd_lint)

    p = sub.add_parser("rules", help="list the lint rules")
    p.set_defaults(func=_cmd_rules)

    p = sub.add_parser("rule", help="print a lint rule's documentation")
    p.add_argument("code", metavar="CODE", help="a rule code, e.g. TP101")
    p.set_defaults(func=_cmd_rule)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rc: int = args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"torchpace: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("torchpace: interrupted", file=sys.stderr)
        return 130
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
