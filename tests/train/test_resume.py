"""Checkpoints and resume: an interrupted run continues with the same loss trajectory."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import mlp_loss, mlp_setup

from torchpace.train import Plan, fit
from torchpace.train import checkpoint as ckpt

STEPS = 20  # 8 batches per epoch: the run crosses two epoch boundaries


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[float], Path]:
    folder = tmp_path_factory.mktemp("ckpt")
    model, opt, loader = mlp_setup()
    result = fit(
        model,
        opt,
        loader,
        mlp_loss,
        plan=Plan(log_every=3),
        steps=STEPS,
        checkpoint_dir=folder,
        checkpoint_every=4,
        progress=False,
    )
    assert [Path(p).name for p in result.checkpoints] == [
        f"step-{s}.pt" for s in (4, 8, 12, 16, 20)
    ]
    return result.losses, folder


# step 4 and 12: mid-epoch (the epoch's shuffle and the batches drawn so far must be replayed);
# step 8 and 16: on an epoch boundary.
@pytest.mark.parametrize("at", [4, 8, 12, 16])
def test_resume_gives_the_same_trajectory(uninterrupted: tuple[list[float], Path], at: int) -> None:
    losses, folder = uninterrupted
    torch.manual_seed(1234)  # a fresh process's RNG is not the one the run had: resume restores it
    model, opt, loader = mlp_setup(seed=0)
    result = fit(
        model,
        opt,
        loader,
        mlp_loss,
        plan=Plan(log_every=3),
        steps=STEPS,
        resume=folder / f"step-{at}.pt",
        progress=False,
    )
    assert result.steps == STEPS - at
    assert result.losses == losses  # bit for bit: the same float32 work in the same order


def test_checkpoint_content_and_safe_loading(uninterrupted: tuple[list[float], Path]) -> None:
    _, folder = uninterrupted
    state = ckpt.load(folder / "step-12.pt")  # torch.load(weights_only=True) inside
    assert state["step"] == 12 and state["epoch"] == 1 and state["next_batch"] == 4
    assert state["writer_rank"] == 0
    assert set(state) >= {"model", "optimizer", "scaler", "scheduler", "rng", "epoch_rng", "plan"}
    assert ckpt.latest(folder) == folder / "step-20.pt"


def test_a_checkpoint_read_for_another_device_keeps_its_rng_states_on_the_host(
    uninterrupted: tuple[list[float], Path],
) -> None:
    # A GPU run's map_location: "meta" stands in for "cuda" on a machine without one. The RNG
    # setters take CPU ByteTensors only (torch.set_rng_state raised on a CUDA-loaded state).
    _, folder = uninterrupted
    state = ckpt.load(folder / "step-12.pt", map_location="meta")
    assert next(iter(state["model"].values())).device.type == "meta"
    before = torch.get_rng_state()
    gens = [torch.Generator() for _ in state["rng"]["generators"]]
    ckpt.set_rng_state(state["epoch_rng"], gens)
    ckpt.set_rng_state(state["rng"], gens)
    assert torch.equal(torch.get_rng_state(), state["rng"]["torch"])
    torch.set_rng_state(before)


def test_a_missing_or_foreign_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        ckpt.load(tmp_path / "nope.pt")
    torch.save({"format": 99}, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="checkpoint format 99"):
        ckpt.load(tmp_path / "old.pt")
    # Our loader never unpickles arbitrary objects.
    torch.save({"format": ckpt.FORMAT, "x": object()}, tmp_path / "evil.pt")
    with pytest.raises(Exception, match=r"[Ww]eights only load failed"):
        ckpt.load(tmp_path / "evil.pt")


def test_a_crash_while_writing_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "step-1.pt"
    ckpt.save(path, {"step": 1})

    def crash(*args: object, **kw: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save(path, {"step": 2})
    monkeypatch.undo()
    assert ckpt.load(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["step-1.pt"]


def test_resuming_under_another_plan_or_batch_size_is_said(
    uninterrupted: tuple[list[float], Path], recwarn: pytest.WarningsRecorder
) -> None:
    # Issue 17: it continued without a word, with losses no longer those of the interrupted run.
    _, folder = uninterrupted
    model, opt, loader = mlp_setup(seed=0)
    fit(
        model,
        opt,
        loader,
        mlp_loss,
        plan=Plan(log_every=3),
        steps=STEPS,
        resume=folder / "step-8.pt",
        progress=False,
    )
    assert not [w for w in recwarn if "other settings" in str(w.message)]
    model, opt, loader = mlp_setup(seed=0)
    with pytest.warns(UserWarning, match=r"plan log_every: 3 -> 5"):
        fit(
            model,
            opt,
            loader,
            mlp_loss,
            plan=Plan(log_every=5),
            steps=STEPS,
            resume=folder / "step-8.pt",
            progress=False,
        )
    model, opt, loader = mlp_setup(seed=0, batch_size=16)
    with pytest.warns(UserWarning, match=r"batch size: 8 -> 16"):
        fit(
            model,
            opt,
            loader,
            mlp_loss,
            plan=Plan(log_every=3),
            steps=STEPS,
            resume=folder / "step-8.pt",
            progress=False,
        )
