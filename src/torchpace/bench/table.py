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


def _ms_fmt(ms: float) -> str:
    return ".0f" if ms >= 100 else ".1f"


_MEMORY_KINDS = {
    "cuda-allocator": "CUDA allocator peak during the configuration's rounds",
    "rss": "process RSS peak during the configuration's rounds (all configurations are resident)",
    "rss-lifetime": "process lifetime RSS peak (this OS cannot reset it per phase)",
}


def render(data: dict[str, Any]) -> Group:
    res = data["result"]
    env = data["environment"]
    mem_kind = res["variants"][0]["memory_kind"]
    table = Table(
        title=f"torchpace bench {data['workload']} on {env['device_name']} ({env['device']})",
        caption=escape(
            f"median [q1–q3] over {res['rounds']} interleaved rounds of {res['block']} steps per "
            f"configuration; {res['warmup']} warm-up steps each excluded (the first is shown "
            f"apart); peak memory: {_MEMORY_KINDS.get(mem_kind, mem_kind)}; "
            f"torch {env['torch_version']}, {env['cores']} cores"
        ),
    )
    table.add_column("config")
    table.add_column(escape("ms/step [q1–q3]"), justify="right")
    table.add_column("samples/s", justify="right")
    has_tokens = any(v["tokens_per_s"] for v in res["variants"])
    if has_tokens:
        table.add_column("tokens/s", justify="right")
    table.add_column(escape(f"speed-up vs {res['baseline']} [q1–q3]"), justify="right")
    table.add_column("peak mem", justify="right")
    table.add_column("1st step", justify="right")
    for v in res["variants"]:
        ms = {k: v["step_seconds"][k] * 1e3 for k in ("median", "q1", "q3")}
        row = [
            escape(v["name"]),
            _spread(ms, _ms_fmt(ms["median"])),
            f"{v['samples_per_s']['median']:,.0f}",
        ]
        if has_tokens:
            row.append(f"{v['tokens_per_s']['median']:,.0f}" if v["tokens_per_s"] else "—")
        sp = res["speedup"].get(v["name"])
        row.append(_spread(sp, ".2f").replace(" [", "× [") if sp else "1 (baseline)")
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
