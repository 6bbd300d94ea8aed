from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from rich.console import Console

from torchpace import catalog
from torchpace.bench.configs import CONFIGS, TrainConfig, naive, tuned
from torchpace.bench.run import SCHEMA, run_bench
from torchpace.bench.table import render
from torchpace.bench.trainer import build_step
from torchpace.measure.env import bf16_supported
from torchpace.workloads import NAMES, cnn

CPU = torch.device("cpu")


@pytest.mark.parametrize("workload", NAMES)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_configs_name_catalogue_techniques(workload: str, device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        # The CUDA branch of tuned() only reads capability flags; exercise it where it can run.
        pytest.skip("needs a CUDA GPU; none on this machine")
    dev = torch.device(device)
    for make in CONFIGS.values():
        cfg = make(workload, dev)
        unknown = set(cfg.techniques) - set(catalog.ids())
        assert not unknown, f"{cfg.name} names techniques missing from the catalogue: {unknown}"


def test_tuned_on_this_cpu_follows_measurement() -> None:
    cfg = tuned("cnn", CPU)
    assert cfg.channels_last and cfg.optimizer == "adamw-fused" and cfg.set_to_none
    assert not cfg.sync_every_step and cfg.num_workers == 0 and not cfg.pin_memory
    assert cfg.amp == ("bf16" if bf16_supported(CPU) else "off")
    assert tuned("seqcls", CPU).amp == "off"
    assert naive("cnn", CPU) == TrainConfig(name="naive")


def _recording_recipe(seen: list[list[int]]) -> Any:
    def loss(model: torch.nn.Module, batch: Any) -> torch.Tensor:
        seen.append(batch[1].tolist())
        return cnn.loss(model, batch)

    return SimpleNamespace(
        model=lambda: cnn.ResNet(width=4),
        dataset=lambda split, seed=0: cnn.synthetic_images(256, seed=seed),
        loss=loss,
        optimizer=cnn.optimizer,
        count_samples=cnn.count_samples,
        count_tokens=cnn.count_tokens,
        batch_size=16,
        lr=1e-3,
    )


def test_configurations_see_the_same_batches_in_the_same_order() -> None:
    a_seen: list[list[int]] = []
    b_seen: list[list[int]] = []
    step_a = build_step(_recording_recipe(a_seen), naive("cnn", CPU), CPU, seed=7)
    step_b = build_step(_recording_recipe(b_seen), tuned("cnn", CPU), CPU, seed=7)
    for _ in range(20):  # past one epoch of 16 batches
        assert step_a().samples == 16
        step_b()
    assert a_seen == b_seen


def test_naive_steps_train() -> None:
    losses: list[float] = []
    recipe = _recording_recipe([])
    base_loss = recipe.loss

    def loss(model: torch.nn.Module, batch: Any) -> torch.Tensor:
        out = base_loss(model, batch)
        losses.append(float(out.detach()))
        return out

    recipe.loss = loss
    step = build_step(recipe, TrainConfig("t", optimizer="adamw"), CPU)
    for _ in range(40):
        step()
    assert sum(losses[-5:]) < sum(losses[:5])


def test_run_bench_result_and_table() -> None:
    data = run_bench("cnn", steps=4, block=2, warmup=1, device="cpu")
    assert data["schema"] == SCHEMA and data["workload"] == "cnn"
    json.dumps(data)  # serialisable
    res = data["result"]
    assert [v["name"] for v in res["variants"]] == ["naive", "tuned"]
    assert res["rounds"] == 2 and set(res["speedup"]) == {"tuned"}
    assert res["speedup"]["tuned"]["median"] > 0
    assert data["environment"]["device"] == "cpu"
    for v in res["variants"]:
        assert v["peak_memory_bytes"] > 0 and len(v["warmup_seconds"]) == 1

    buf = io.StringIO()
    Console(file=buf, width=100, force_terminal=False, color_system=None).print(render(data))
    text = buf.getvalue()
    assert "torchpace bench cnn" in text
    assert "speed-up vs naive" in text
    assert "1 (baseline)" in text
    assert "median [q1–q3] over 2 interleaved rounds of 2 steps" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_table_flags_a_noisy_result() -> None:
    data = run_bench("cnn", steps=4, block=2, warmup=0, device="cpu")
    data["result"]["noisy"] = ["tuned: the paired ratios spread 40%"]
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(render(data))
    assert "NOISY: do not trust these ratios" in buf.getvalue()
