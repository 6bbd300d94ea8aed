"""fit() on 2 gloo processes under torchrun: shared gradients, one all-reduce per optimizer step
while accumulating, disjoint shards, and one checkpoint writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_python
from torchpace.train import checkpoint as ckpt

Ranks = list[dict[str, Any]]
SCRIPT = Path(__file__).parent / "scripts" / "ddp_check.py"


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ranks, Path]:
    out = tmp_path_factory.mktemp("ddp")
    done = run_python(
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(SCRIPT),
        str(out),
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)], out


def test_gradients_are_identical_across_ranks(ranks: tuple[Ranks, Path]) -> None:
    data, _ = ranks
    assert [d["world"] for d in data] == [2, 2]
    assert all(d["grads_equal_across_ranks"] for d in data)
    assert data[0]["losses"] != data[1]["losses"]  # each rank trained on its own shard


def test_one_allreduce_per_optimizer_step_while_accumulating(
    ranks: tuple[Ranks, Path],
) -> None:
    data, _ = ranks
    for d in data:
        assert d["per_sync"] >= 1
        # 2 optimizer steps of 4 micro-batches: 2 syncs, not 8.
        assert d["allreduce_accumulating"] == 2 * d["per_sync"]


def test_the_shards_do_not_overlap(ranks: tuple[Ranks, Path]) -> None:
    data, _ = ranks
    a, b = (set(d["indices"]) for d in data)
    assert len(data[0]["indices"]) == len(a) == 32 and not a & b and a | b == set(range(64))
    x, y = (d["bucket_indices"] for d in data)
    assert not set(x) & set(y) and sorted(x + y) == list(range(64))
    assert data[0]["bucket_batches"] == data[1]["bucket_batches"]


def test_each_rank_resumes_its_own_trajectory(ranks: tuple[Ranks, Path]) -> None:
    data, _ = ranks
    for d in data:
        assert d["resumed_losses"] == d["losses"]


def test_rank_zero_alone_writes_checkpoints(ranks: tuple[Ranks, Path]) -> None:
    data, out = ranks
    assert len(data[0]["checkpoints"]) == 2 and data[1]["checkpoints"] == []
    files = sorted((out / "ckpt").iterdir())
    assert [f.name for f in files] == ["step-1.pt", "step-2.pt"]
    assert all(ckpt.load(f)["writer_rank"] == 0 for f in files)


def test_cli_fit_launches_through_torchrun(tmp_path: Path) -> None:
    recipe = tmp_path / "tiny.py"
    recipe.write_text(
        "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
        "batch_size = 8\nlr = 0.05\n"
        "def model():\n    return nn.Linear(4, 2)\n"
        "def dataset(split='train', seed=0):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    return torch.utils.data.TensorDataset(torch.randn(64, 4, generator=g),"
        " torch.randint(0, 2, (64,), generator=g))\n"
        "def loss(model, batch):\n    x, y = batch\n    return F.cross_entropy(model(x), y)\n"
    )
    out = tmp_path / "fit.json"
    done = run_python(
        "-m",
        "torchpace",
        "fit",
        str(recipe),
        "--nproc",
        "2",
        "--steps",
        "3",
        "--preset",
        "safe",
        "--no-progress",
        "--json",
        str(out),
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["world_size"] == 2 and len(result["losses"]) == 3
    changes = [c for a in result["applied"] for c in a["changes"]]
    assert "DistributedDataParallel over 2 processes (gloo)" in changes
