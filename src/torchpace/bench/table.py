"""Render a bench result as a rich table (the terminal view)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def _spread(s: dict[str, Any], fmt: str) -> str:
    return f"{format(s['median'], fmt)} [{format(s['q1'], fmt)}–{format(s['q3'], fmt)}]"


def render(data: dict[str, Any]) -> Group:
    res = data["result"]
    env = data["environment"]
    table = Table(
        title=f"torchpace bench {data['workload']} on {env['device_name']} ({env['device']})",
        caption=escape(
            f"median [q1–q3] over {res['rounds']} interleaved rounds of {res['block']} steps per "
            f"configuration; {res['warmup']} warm-up steps each excluded and shown apart; "
            f"torch {env['torch_version']}, {env['cores']} cores"
        ),
    )
    table.add_column("config")
    table.add_column("ms/step", justify="right")
    table.add_column("samples/s", justify="right")
    has_tokens = any(v["tokens_per_s"] for v in res["variants"])
    if has_tokens:
        table.add_column("tokens/s", justify="right")
    table.add_column(f"speed-up vs {res['baseline']}", justify="right")
    table.add_column("peak mem", justify="right")
    table.add_column("first step", justify="right")
    for v in res["variants"]:
        ms = {k: v["step_seconds"][k] * 1e3 for k in ("median", "q1", "q3")}
        row = [escape(v["name"]), _spread(ms, ".1f"), _spread(v["samples_per_s"], ",.0f")]
        if has_tokens:
            row.append(_spread(v["tokens_per_s"], ",.0f") if v["tokens_per_s"] else "—")
        sp = res["speedup"].get(v["name"])
        row.append(f"{_spread(sp, '.2f')}×" if sp else "1 (baseline)")
        row.append(_mib(v["peak_memory_bytes"]))
        row.append(f"{v['warmup_seconds'][0] * 1e3:,.0f} ms" if v["warmup_seconds"] else "—")
        table.add_row(*row)
    parts: list[Any] = [table]
    applied = {c["name"]: c["techniques"] for c in data["configs"]}
    for name, techs in applied.items():
        if techs:
            parts.append(Text(f"{name}: " + ", ".join(techs), style="dim"))
    if res["noisy"]:
        parts.append(
            Text("NOISY: do not trust these ratios — " + "; ".join(res["noisy"]), style="bold red")
        )
    else:
        fc = res["foreign_cores"]
        load = "unknown" if fc is None else f"{fc:.2f} cores"
        parts.append(Text(f"quiet machine: ratio spread within limits, other load {load}"))
    return Group(*parts)
