"""benchmarks/peers.py's pure parts: pairing rounds, the why sentence, the table, the arguments.

None of this imports Lightning or Accelerate (the peers are optional benchmark dependencies)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = str(Path(__file__).resolve().parents[1] / "benchmarks")
sys.path.insert(0, BENCH)
import _peers_setup as setup  # noqa: E402
import _peers_summary as summary  # noqa: E402
import peers  # noqa: E402

sys.path.remove(BENCH)


def test_the_pure_parts_import_no_peer() -> None:
    assert "lightning" not in sys.modules and "accelerate" not in sys.modules


def run(samples_per_s: float, techniques: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    return {
        "samples_per_s": samples_per_s,
        "peak_memory_bytes": 500 * 2**20,
        "memory_kind": "rss",
        "train_loss": 2.0,
        "val_loss": 2.1,
        "tflops": 0.1,
        "mfu": 0.05,
        "compile_s": 0.0,
        "first_step_s": 1.0,
        "foreign_cores": 0.01,
        "techniques": list(techniques),
        "settings": {},
        **kw,
    }


def test_ratios_pair_each_contestant_with_the_naive_run_of_its_round() -> None:
    rounds = [
        {"naive": run(100.0), "torchpace": run(300.0)},
        {"naive": run(50.0), "torchpace": run(200.0)},  # a slow round: the ratio stays paired
        {"naive": {"error": "exit 1: boom"}, "torchpace": run(900.0)},  # no pair: left out
    ]
    s = summary.summarize_contestant(rounds, "torchpace")
    assert s["ratios"] == [3.0, 4.0]
    assert (s["ratio"]["median"], s["ratio"]["q1"], s["ratio"]["q3"]) == (3.5, 3.25, 3.75)
    assert s["rounds"] == 3 and s["failed"] == 0
    assert s["samples_per_s"]["median"] == 300.0
    naive = summary.summarize_contestant(rounds, "naive")
    assert naive["ratios"] == [1.0, 1.0] and naive["failed"] == 1
    assert naive["errors"] == ["exit 1: boom"]


def test_a_contestant_that_never_ran_has_no_ratio() -> None:
    rounds = [{"naive": run(100.0), "lightning": {"error": "exit 1: ImportError"}}]
    s = summary.summarize_contestant(rounds, "lightning")
    assert s == {"rounds": 0, "failed": 1, "errors": ["exit 1: ImportError"]}


def test_other_load_marks_a_ratio_noisy() -> None:
    rounds = [{"naive": run(100.0, foreign_cores=0.9), "handtuned": run(200.0)}] * 2
    s = summary.summarize_contestant(rounds, "handtuned")
    assert s["foreign_cores_max"] == 0.9
    assert s["noisy"] == ["other processes used 0.90 cores during the run, over the 0.25 limit"]


def side(median: float, q1: float, q3: float, *techniques: str) -> dict[str, Any]:
    return {"ratio": {"median": median, "q1": q1, "q3": q3}, "techniques": list(techniques)}


TP = side(2.5, 2.4, 2.6, "amp-bf16", "channels-last", "grad-set-to-none", "avoid-syncs")
TUNE_ROWS = [
    {"name": "fused optimizer", "techniques": ["fused-optimizer"], "verdict": "kept alone"},
    {"name": "+ fused optimizer", "techniques": ["fused-optimizer"], "verdict": "not worth it"},
    {"name": "compile", "techniques": ["torch-compile"], "verdict": "kept alone"},
]


def test_no_sentence_where_torchpace_is_ahead() -> None:
    assert summary.why_not_ahead("lightning", side(2.0, 1.9, 2.1, "amp-bf16"), TP) is None
    assert summary.why_not_ahead("torchpace", TP, TP) is None


def test_within_the_spread_with_the_same_techniques() -> None:
    row = side(2.55, 2.45, 2.65, "amp-bf16", "channels-last", "grad-set-to-none")
    assert summary.why_not_ahead("handtuned", row, TP) == (
        "hand-tuned loop applies what the plan applies (bf16 autocast, channels_last); the "
        "difference (2.55× against torchpace's 2.50×) is within the spread."
    )


def test_within_the_spread_with_other_techniques() -> None:
    row = side(2.6, 2.5, 2.7, "amp-bf16", "grad-set-to-none")
    assert summary.why_not_ahead("lightning", row, TP) == (
        "Lightning Trainer differs from the plan by leaving out channels_last; the difference "
        "(2.60× against torchpace's 2.50×) is within the spread."
    )


def test_ahead_by_a_technique_the_tune_left_out_quotes_its_verdict() -> None:
    row = side(3.5, 3.4, 3.6, *TP["techniques"], "fused-optimizer", "torch-compile", "tf32")
    assert summary.why_not_ahead("handtuned", row, TP, TUNE_ROWS) == (
        "hand-tuned loop adds fused optimizer, torch.compile, TF32, which the plan leaves out: "
        "the tune found fused optimizer not worth it; the tune kept torch.compile in a row the "
        "plan did not take; `torchpace tune` does not try TF32; 3.50× against torchpace's 2.50×."
    )
    assert "no tune results to say why for fused optimizer" in str(
        summary.why_not_ahead("handtuned", row, TP, None)
    )


def test_ahead_with_fewer_techniques_or_the_same() -> None:
    fewer = side(3.0, 2.9, 3.1, "amp-bf16", "grad-set-to-none", "avoid-syncs")
    assert summary.why_not_ahead("accelerate", fewer, TP) == (
        "Accelerate leaves out the plan's channels_last and runs 3.00× against torchpace's 2.50×: "
        "here they cost more than the tune measured them to give."
    )
    same = side(3.0, 2.9, 3.1, *TP["techniques"])
    assert summary.why_not_ahead("accelerate", same, TP) == (
        "Accelerate applies the same techniques as the plan and runs 3.00× against torchpace's "
        "2.50×: the gap is per-step work outside them (loop, loader, framework)."
    )


def test_ahead_by_batching_with_less_padding() -> None:
    row = {**side(30.0, 29.0, 31.0, *TP["techniques"]), "useful_tokens": 0.97}
    tp = {**TP, "useful_tokens": 0.80}
    assert summary.why_not_ahead("handtuned", row, tp) == (
        "hand-tuned loop has the plan's techniques, but its batches are 97% real tokens against "
        "the plan's 80%: 30.00× against torchpace's 2.50×."
    )
    near = {**row, "useful_tokens": 0.83}  # within 5 points: not the reason given
    assert "per-step work outside them" in str(summary.why_not_ahead("handtuned", near, tp))


def results() -> dict[str, Any]:
    tp = ("amp-bf16", "channels-last", "grad-set-to-none", "avoid-syncs")
    part = {
        "rounds": [
            {
                "naive": run(100.0),
                "torchpace": run(250.0, tp),
                "lightning": run(260.0, ("amp-bf16", "grad-set-to-none")),
            },
            {
                "naive": run(110.0),
                "torchpace": run(270.0, tp),
                "lightning": run(280.0, ("amp-bf16", "grad-set-to-none")),
            },
        ],
        "tune_rows": None,
        "tune": {"from": "tune", "command": "python -m torchpace tune cnn", "wall_s": 3.2},
    }
    env = {
        "fingerprint": {"device_name": "Test CPU", "cores": 2, "python_version": "3.11.7"},
        "torch": "2.13.0+cpu",
        "peer_versions": {"lightning": "2.6.6", "accelerate": "1.15.0"},
        "torchpace_git": "abc1234",
        "date": "2026-11-24T10:00:00+00:00",
        "command": "python benchmarks/peers.py",
        "wall_s": 600.0,
    }
    return {"environment": env, "workloads": {"cnn": part}}


def test_markdown_renders_the_readme_table() -> None:
    res = results()
    summary.summarize_part(res["workloads"]["cnn"], ["naive", "torchpace", "lightning"])
    assert summary.markdown(res) == (
        "Machine: Test CPU (2 cores), torch 2.13.0+cpu, Python 3.11.7, lightning 2.6.6, "
        "accelerate 1.15.0, torchpace at abc1234, 2026-11-24. Command: "
        "`python benchmarks/peers.py` (10.0 minutes).\n"
        "\n"
        "| workload | contestant | speed-up [q1–q3] | samples/s | peak memory | train loss | "
        "val loss | lm MFU | applies | why torchpace is not ahead |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
        "| cnn | naive script | 1 (baseline) | 105 | 500 MiB RSS | 2.000 | 2.100 | — | "
        "the script as written |  |\n"
        "| cnn | torchpace (tune → fit) | 2.48× [2.47–2.49] | 260 | 500 MiB RSS | 2.000 | "
        "2.100 | — | bf16 autocast, channels_last |  |\n"
        "| cnn | Lightning Trainer | 2.57× [2.56–2.59] | 270 | 500 MiB RSS | 2.000 | 2.100 | — "
        "| bf16 autocast | Lightning Trainer leaves out the plan's channels_last and runs 2.57× "
        "against torchpace's 2.48×: here they cost more than the tune measured them to give. |\n"
        "\n"
        "- cnn: `python -m torchpace tune cnn` took 3 s.\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--workloads", "cnn,vision"],
        ["--workloads", ""],
        ["--contestants", "deepspeed"],
        ["--rounds", "0"],
        ["--warmup", "1"],
        ["--samples", "0"],
        ["--budget", "soon"],
        ["--lm-size", "7b"],
        ["--plan-dir", "/nonexistent/plans"],
    ],
)
def test_bad_arguments_are_rejected(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        peers.parse_args(argv)
    assert e.value.code == 2
    assert "error: argument" in capsys.readouterr().err or "--plan-dir" in argv


def test_arguments_keep_the_baseline_and_a_fixed_order() -> None:
    a = peers.parse_args(["--contestants", "handtuned,torchpace", "--workloads", "lm"])
    assert a.contestants == ["naive", "torchpace", "handtuned"]
    assert a.workloads == ["lm"] and a.rounds == 3 and a.budget == "2m"


def test_an_lm_size_is_a_recipe_file_that_registers_its_preset(tmp_path: Path) -> None:
    assert setup.recipe_spec("lm", "1m", tmp_path) == "lm"
    assert setup.recipe_spec("cnn", "300m", tmp_path) == "cnn"
    spec = setup.recipe_spec("lm", "300m", tmp_path)
    assert spec == str(tmp_path / "lm_300m.py")
    import torch

    from torchpace.recipes import load_recipe
    from torchpace.workloads import lm

    recipe = load_recipe(spec)
    with torch.device("meta"):
        params = sum(p.numel() for p in recipe.model().parameters())
    assert 300e6 < params < 310e6  # GPT-2 medium's shape on a byte vocabulary
    assert (recipe.batch_size, recipe.lr) == (lm.batch_size, 3e-4)
    assert len(recipe.dataset("val")) == len(lm.dataset("val", preset="300m"))
    lm.PRESETS.pop("300m")  # registered by the recipe file: leave the module as it was
