"""The ``torchpace`` command line. Each subcommand imports torch only when it runs."""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchpace._args import non_negative_int, positive_int
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
    from torchpace.measure.noise import peak_loaded

    if args.remeasure and args.no_peak:
        raise SystemExit("torchpace env: --remeasure measures the peak; drop --no-peak")
    fp = fingerprint(
        resolve_device(args.device), measure_peak=not args.no_peak, remeasure=args.remeasure
    ).to_dict()
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
    if peak_loaded(fp):
        print(
            f"torchpace env: other processes used {fp['peak_load']:.2f} cores while the peak was "
            "measured: it reads low and was not cached; run `torchpace env --remeasure` on a "
            "quiet machine",
            file=sys.stderr,
        )
    return 0


def _cmd_lint(args: argparse.Namespace) -> int:
    from torchpace.lint.command import run

    return run(args)


def _cmd_rules(args: argparse.Namespace) -> int:
    from torchpace.lint import RULES

    if args.write_docs:
        from torchpace._files import atomic_write_text
        from torchpace.lint.docs import render_markdown

        atomic_write_text(args.write_docs, render_markdown(RULES))
        print(f"wrote {args.write_docs}")
        return 0
    name_width = max(len(r.name) for r in RULES)
    technique_width = max(len(r.technique) for r in RULES)
    for rule in RULES:
        default = "on" if rule.default else "off"
        print(
            f"{rule.code}  {rule.name:<{name_width}}  {rule.technique:<{technique_width}}  "
            f"{default:<3}  {rule.level}"
        )
    return 0


def _cmd_rule(args: argparse.Namespace) -> int:
    from torchpace.lint import get
    from torchpace.lint.docs import render_rule

    try:
        rule = get(args.code)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    print(render_rule(rule), end="")
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


def _demo_script() -> Path:
    script = Path(__file__).resolve().parents[2] / "examples" / "naive_cnn.py"
    if not script.is_file():
        raise FileNotFoundError(
            f"the demo runs examples/naive_cnn.py from a source checkout, and {script} is "
            "missing; run `make demo` in the repository"
        )
    return script


def _cmd_demo(args: argparse.Namespace) -> int:
    from torchpace.doctor import command as doctor
    from torchpace.lint import command as lint

    script = _demo_script()
    shown = os.path.relpath(script)
    out = Path(args.out)
    print(f"torchpace demo, 1/4 lint: the slow patterns in {shown}, statically\n", flush=True)
    lint.run(build_parser().parse_args(["lint", str(script)]))
    print(f"\ntorchpace demo, 2/4 doctor: {shown} run and measured, unmodified\n", flush=True)
    doctor_args = ["doctor", "--steps", "20", "--json", str(out / "doctor.json"), str(script)]
    rc = doctor.run(build_parser().parse_args([*doctor_args, "--", "--steps", "200"]))
    if rc != 0:
        return rc
    print(
        f"\ntorchpace demo, 3/4 tune: the techniques tried on the cnn recipe {shown} trains, "
        f"each in a fresh process, within a {args.tune_budget} budget\n",
        flush=True,
    )
    from torchpace.tune import command as tune

    tune_args = ["tune", "cnn", "--budget", args.tune_budget, "--steps", "12", "--out", str(out)]
    rc = tune.run(build_parser().parse_args(tune_args))
    if rc != 0:
        return rc
    from torchpace.report import command as report

    html = out / "report.html"
    print("\ntorchpace demo, 4/4 report: the doctor's and the tune's results on one page\n")
    results = [str(out / "doctor.json"), str(out / "torchpace-tune.json")]
    rc = report.run(build_parser().parse_args(["report", *results, "-o", str(html), "--quiet"]))
    if rc == 0:
        print(f"open it in a browser: {html.resolve().as_uri()}")
    return rc


def _add_bench_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compare", default="naive,tuned", help="configurations, baseline first (naive,tuned)"
    )
    p.add_argument(
        "--steps", type=positive_int, default=40, help="measured steps per configuration"
    )
    p.add_argument(
        "--block", type=positive_int, default=4, help="steps per configuration per round"
    )
    p.add_argument(
        "--warmup", type=non_negative_int, default=3, help="warm-up steps per configuration"
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write the result, with the fingerprint, here")


_LINT_EPILOG = """\
rule selection:
  Without --select, every rule that is on by default runs. Entries are codes (TP201) or
  prefixes (TP2). Rules that are off by default run only when --select or --extend-select
  names their full code: a prefix such as TP or TP6 never turns them on. `torchpace rules`
  shows which rules are off. --select and --ignore replace the lists of [tool.torchpace.lint]
  in pyproject.toml; --extend-select adds to its list. `# noqa: TP201` silences one line.

exit status:
  0 no findings, 1 findings, 2 a usage, config or input error (after linting the rest).
"""


# Commands this module defines itself: a run of one of them builds no other verb's parser, and so
# imports none of their modules (``torchpace lint``'s start-up: about 0.1 s of the 0.25 s).
_OWN_COMMANDS = ("techniques", "env", "bench", "demo", "lint", "rules", "rule")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the ``command`` about to run, when it is one of
    ``_OWN_COMMANDS``, without the other verbs (their modules are not imported). ``--help`` and
    an unknown command build every verb."""
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
    p.add_argument(
        "--remeasure",
        action="store_true",
        help="measure the peak FLOP/s again instead of reading the cache (cached when quiet)",
    )
    p.set_defaults(func=_cmd_env)

    p = sub.add_parser(
        "bench",
        help="paired benchmark of a built-in workload: naive against tuned settings",
        description="Interleaved, paired benchmark of a built-in workload's configurations.",
    )
    p.add_argument("workload", choices=NAMES)
    _add_bench_options(p)
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser(
        "demo",
        help="the main job on the built-in example: lint, doctor and tune of the naive cnn",
    )
    p.add_argument(
        "--out", default="torchpace-demo", help="folder for the demo's results (torchpace-demo)"
    )
    p.add_argument("--tune-budget", default="2m", help="time for the demo's tune (2m)")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser(
        "lint",
        help="find slow PyTorch patterns in source code (never imports torch)",
        description="Statically lint Python files and Jupyter notebooks for the slow patterns "
        "of the performance guides.",
        epilog=_LINT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        default=["."],
        metavar="PATH",
        help="files, directories (searched for .py and .ipynb files) or notebooks",
    )
    p.add_argument(
        "--format",
        choices=("text", "json", "sarif", "github"),
        default="text",
        help="text (default), json, sarif (SARIF 2.1.0) or github (Actions annotations)",
    )
    p.add_argument("--fix", action="store_true", help="apply the safe fixes (not in notebooks)")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix, also apply unsafe ones")
    p.add_argument("--diff", action="store_true", help="print the fixes as a diff; write nothing")
    p.add_argument(
        "--select", metavar="CODES", help="run only these rule codes or prefixes (comma list)"
    )
    p.add_argument(
        "--extend-select", metavar="CODES", help="run these rule codes or prefixes as well"
    )
    p.add_argument("--ignore", metavar="CODES", help="do not run these rule codes or prefixes")
    p.add_argument(
        "--exclude",
        metavar="PATTERNS",
        help="gitignore patterns that directory walks skip, comma separated, replacing the "
        "default (tests/, test_*.py, conftest.py, benchmarks/, benchmark*.py, bug_report*, "
        "logs/, wandb/, ...); '' skips none",
    )
    p.add_argument(
        "--extend-exclude", metavar="PATTERNS", help="patterns to skip as well as the default"
    )
    p.add_argument(
        "--include-unreferenced",
        action="store_true",
        help="also report findings in top-level definitions nothing in a linted directory names",
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="read [tool.torchpace.lint] from this file (default: the nearest pyproject.toml)",
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="lint on N processes (default: the usable cores; small inputs use one)",
    )
    p.set_defaults(func=_cmd_lint)

    if command not in _OWN_COMMANDS:
        _add_verbs(sub)

    p = sub.add_parser("rules", help="list the lint rules")
    p.add_argument(
        "--write-docs", type=Path, metavar="PATH", help="write docs/rules.md from the rules"
    )
    p.set_defaults(func=_cmd_rules)

    p = sub.add_parser("rule", help="print a lint rule's documentation")
    p.add_argument("code", metavar="CODE", help="a rule code, e.g. TP101")
    p.set_defaults(func=_cmd_rule)
    return parser


def _add_verbs(sub: Any) -> None:
    """The parsers of the verbs that live in their own packages."""
    from torchpace.doctor.command import add_parser as add_doctor

    add_doctor(sub)

    from torchpace.train.command import add_parser as add_fit

    add_fit(sub)

    from torchpace.tune.command import add_parser as add_tune

    add_tune(sub)

    from torchpace.script.command import add_parser as add_run

    add_run(sub)

    from torchpace.script.apply_command import add_parser as add_apply

    add_apply(sub)

    from torchpace.script.compare_command import add_parser as add_compare

    add_compare(sub)

    from torchpace.report.command import add_parser as add_report

    add_report(sub)


# Commands that take a script's own arguments after `--` (the doctor takes them as a remainder).
_SCRIPT_COMMANDS = ("tune", "run", "compare")


def _split_script_args(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``tune train.py --budget 5m -- --lr 3`` -> the command's arguments and the script's."""
    if argv and argv[0] in _SCRIPT_COMMANDS and "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    from torchpace._signals import Terminated, catch_sigterm, handled

    previous = catch_sigterm()
    try:
        # Parsing imports the verbs' modules (seconds, with torch): a Ctrl-C or SIGTERM there
        # ends as one anywhere else does (the fault injection caught one exiting by signal 2).
        own, script_args = _split_script_args(list(sys.argv[1:] if argv is None else argv))
        args = build_parser(own[0] if own else None).parse_args(own)
        if script_args is not None:
            args.script_args = script_args
        rc: int = args.func(args)
    except Terminated:
        handled()
        print("torchpace: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"torchpace: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`torchpace lint | head`): stop quietly, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        # A full disk, a permission, a vanished directory, met while working (issue 17: a full
        # disk in tune was a traceback). What was written before stays; say what and where.
        where = f": {exc.filename}" if exc.filename else ""
        hint = " (free some space and run it again)" if exc.errno == errno.ENOSPC else ""
        print(f"torchpace: error: {exc.strerror or exc}{where}{hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("torchpace: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
