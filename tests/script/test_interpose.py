"""The interposer in this process: autocast spans the forward and the loss and ends at
backward(); the script's own autocast is left alone; every patch comes out again."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from torchpace.script.interpose import Interposer
from torchpace.speedups import precision
from torchpace.train.plan import Plan


def _interposer(monkeypatch, plan: Plan) -> Interposer:
    # Autocast to bf16 runs on any CPU; the device check would refuse it on one without bf16.
    monkeypatch.setattr(precision, "bf16_supported", lambda device: True)
    return Interposer(plan, device=torch.device("cpu"))


def test_autocast_covers_forward_and_loss_and_ends_at_backward(monkeypatch):
    ip = _interposer(monkeypatch, Plan(amp="bf16"))
    seen = {}
    ip.install()
    try:
        model = nn.Linear(4, 2)
        out = model(torch.randn(3, 4))
        seen["forward"] = out.dtype
        seen["loss"] = torch.is_autocast_enabled("cpu")
        loss = out.float().pow(2).mean()
        loss.backward()
        seen["after backward"] = torch.is_autocast_enabled("cpu")
        with torch.no_grad():
            model(torch.randn(3, 4))
        seen["no_grad forward"] = torch.is_autocast_enabled("cpu")
    finally:
        ip.uninstall()
    assert seen == {
        "forward": torch.bfloat16,
        "loss": True,
        "after backward": False,
        "no_grad forward": False,
    }
    assert [a.technique for a in ip.applied if a.changed] == ["amp-bf16"]


def test_the_scripts_own_autocast_is_kept_and_ours_stays_out(monkeypatch):
    ip = _interposer(monkeypatch, Plan(amp="bf16"))
    ip.install()
    try:
        model = nn.Linear(4, 2)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(torch.randn(3, 4)).float().mean()
        loss.backward()
        assert not torch.is_autocast_enabled("cpu")
    finally:
        ip.uninstall()
    assert ip.own_autocast
    assert "already runs its forward under autocast" in ip.not_applied()["amp-bf16"]


def _patched() -> tuple[object, ...]:
    """What the interposer replaces while it is installed."""
    return (
        DataLoader.__init__,
        torch.optim.Optimizer.__init__,
        torch.optim.Optimizer.zero_grad,
        nn.Module.zero_grad,
        torch.Tensor.backward,
        torch.autograd.backward,
        torch.amp.GradScaler.scale,
    )


def test_uninstall_puts_every_patch_back(monkeypatch):
    before = _patched()
    hooks = dict(nn.modules.module._global_forward_pre_hooks)
    ip = _interposer(monkeypatch, Plan(amp="bf16", loader="auto", batch_size=8))
    ip.install()
    loader = DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4, shuffle=True)
    assert loader.batch_size == 8
    ip.uninstall()
    assert _patched() == before
    assert dict(nn.modules.module._global_forward_pre_hooks) == hooks
    assert DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4).batch_size == 4


def test_an_evaluation_loader_keeps_its_batch_size_and_an_iterable_gets_no_workers(monkeypatch):
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(4))

    ip = _interposer(monkeypatch, Plan(loader_workers=1, batch_size=8))
    ip.install()
    try:
        loader = DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4)
        stream = DataLoader(Stream(), batch_size=2)
    finally:
        ip.uninstall()
    assert loader.batch_size == 4  # not shuffled: its batch as written
    assert stream.num_workers == 0
    assert "IterableDataset" in ip.not_applied().get("loader-workers", "") or any(
        "IterableDataset" in a.reason for a in ip.applied
    )


def test_fp16_steps_go_through_a_grad_scaler_and_losses_are_recorded_unscaled(monkeypatch):
    from torchpace.script import interpose
    from torchpace.speedups.applied import done
    from torchpace.speedups.precision import Precision

    # fp16 autocast pays off on CUDA only; its GradScaler wiring is the same on the CPU.
    fp16 = Precision("cpu", torch.float16)
    monkeypatch.setattr(interpose, "choose_precision", lambda d, a: (fp16, done("amp-fp16", ["x"])))
    ip = Interposer(Plan(amp="fp16"), device=torch.device("cpu"))
    seen: list[float] = []
    ip.on_backward = lambda loss: seen.append(float(loss))
    ip.install()
    try:
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model.weight.detach().clone()
        loss = model(torch.randn(8, 4)).float().pow(2).mean()
        expected = float(loss.detach())
        loss.backward()
        opt.step()
    finally:
        ip.uninstall()
    assert seen == [pytest.approx(expected)]  # not times the scale
    assert ip._scaler is not None and ip._scaler.get_scale() == 65536.0  # updated, no inf
    assert not torch.equal(before, model.weight)
    assert "with a GradScaler" in ip.applied[-1].changes[0]


def _fit(ip: Interposer) -> tuple[DataLoader, DataLoader]:
    """A training loop and an evaluation one, as a script writes them (lint reads a function
    named test_* as evaluation, so they live here)."""
    data = TensorDataset(torch.zeros(16, 2))
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ip.install()
    try:
        train_loader = DataLoader(data, batch_size=4, shuffle=True)
        val_loader = DataLoader(data, batch_size=4)
        for (x,) in train_loader:
            model(x).sum().backward()
            optimizer.step()
        with torch.no_grad():
            for (x,) in val_loader:
                model(x)
    finally:
        ip.uninstall()
    return train_loader, val_loader


def test_workers_go_only_into_loaders_that_feed_training(monkeypatch):
    # issue 31: the interposer gave the plan's workers to every loader, where apply and lint's
    # TP101 leave an evaluation loader alone; it now reads the same lint reading of the call
    # it is running (a val loader, iterated under no_grad)
    ip = _interposer(monkeypatch, Plan(loader_workers=1))
    train_loader, val_loader = _fit(ip)
    assert train_loader.num_workers == 1
    assert val_loader.num_workers == 0
    reasons = [a.reason for a in ip.applied if a.technique == "loader-workers"]
    assert any("serves evaluation" in r and "test_interpose.py:" in r for r in reasons), reasons


def _peek(model: nn.Module, loader: DataLoader, n: int) -> None:
    with torch.no_grad():
        for i, (x,) in enumerate(loader):
            if i >= n:
                break
            model(x)


def _train_with_peeks(ip: Interposer) -> tuple[DataLoader, int]:
    """Two epochs whose every step peeks at a batch of the training loader (out of a test_*
    function, which lint reads as evaluation)."""
    data = TensorDataset(torch.zeros(16, 2))
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ip.install()
    steps = 0
    try:
        train_loader = DataLoader(data, batch_size=4, shuffle=True)
        for _ in range(2):
            for (x,) in train_loader:
                model(x).sum().backward()
                optimizer.step()
                steps += 1
                _peek(model, train_loader, 1)
                if steps >= 20:  # an epoch that never ends fails the test, not hangs it
                    return train_loader, steps
    finally:
        ip.uninstall()
    return train_loader, steps


def test_a_loader_iterated_inside_its_own_loop_keeps_its_workers_restarting(monkeypatch):
    # as lint's TP104 and apply read it: persistent workers keep one iterator, which _peek's
    # pass would reset, so the training epoch would restart and never end
    ip = _interposer(monkeypatch, Plan(loader_workers=1))
    train_loader, steps = _train_with_peeks(ip)
    assert train_loader.num_workers == 1 and not train_loader.persistent_workers
    assert steps == 8  # two whole epochs of 4 batches
    reasons = [a.reason for a in ip.applied if a.technique == "persistent-workers"]
    assert any("iterated again inside its own loop" in r for r in reasons), reasons
