"""False classes issue 32's seventh change set showed (jeffheaton/app_deep_learning, a course's
notebooks; judged before any rule changed against it, round 2026-11-27x). Each fixture has the
shape of one of its cells, shortened and renamed; each test fails on the rules before the
change and keeps the finding where the shape differs in what matters."""

from __future__ import annotations

import textwrap

from torchpace.lint import RULES, FileResult, lint_source
from torchpace.lint.dataloaders import yields_device_tensors
from torchpace.lint.engine import parse
from torchpace.lint.loops import DATALOADER
from torchpace.lint.rule import FileContext


def _codes(source: str) -> list[str]:
    result = lint_source("train.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult), result
    return [f.code for f in result.findings]


_MLP_ON_DEVICE = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    features = scale(table)
    features = torch.tensor(features, device=device, dtype=torch.float32)
    target = torch.tensor(labels, device=device)
    loader = DataLoader(TensorDataset(features, target), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(features.shape[1], 50), nn.ReLU(), nn.Linear(50, 3)).to(device)
    for epoch in range(100):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_tensor_dataset_made_on_the_device_gets_no_worker_advice():
    # Workers could not index CUDA tensors after a fork, and each batch is already on the device
    assert "TP101" not in _codes(_MLP_ON_DEVICE)
    # nor on the host: a batch of a TensorDataset is a slice either way (test_framework_loaders)
    on_host = _MLP_ON_DEVICE.replace(", device=device, dtype", ", dtype").replace(
        "torch.tensor(labels, device=device)", "torch.tensor(labels)"
    )
    assert "TP101" not in _codes(on_host)
    # a dataset class that reads files per item still gets it
    from_files = on_host.replace("TensorDataset(features, target)", "ImageFolder(root)")
    assert "TP101" in _codes(from_files)


def test_device_tensors_returned_by_a_function_or_sliced_per_fold():
    source = """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        device = "cuda" if torch.cuda.is_available() else "cpu"

        def load_data(device):
            x = torch.tensor(read_features(), device=device, dtype=torch.float32)
            y = torch.tensor(read_labels(), device=device)
            return x, y, ["a", "b"]

        x, y, names = load_data(device)
        model = build_model().to(device)
        for train_idx, val_idx in folds:
            fold = TensorDataset(x[train_idx], y[train_idx])
            loader = DataLoader(fold, batch_size=32, shuffle=True)
            for xb, yb in loader:
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
    """
    assert "TP101" not in _codes(source)
    assert _yields_device_tensors(source)  # apply's workers edit reads this too
    # Bound again on the host after the function call: the last binding before the loader counts
    rebound = source.replace(
        "x, y, names = load_data(device)\n",
        "x, y, names = load_data(device)\n"
        "        x = torch.tensor(read_features())\n"
        "        y = torch.tensor(read_labels())\n",
    )
    assert not _yields_device_tensors(rebound)


def _yields_device_tensors(source: str) -> bool:
    ctx = parse("train.py", textwrap.dedent(source).encode())
    assert isinstance(ctx, FileContext), ctx
    (loader,) = [c for c, name in ctx.calls if name == DATALOADER]
    return yields_device_tensors(ctx, loader)


_PRINTED_DEVICE = """
    import torch
    from torch import nn

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"Using device: {device}")

    x = torch.tensor(points, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.float32)
    model = build_model(width=args.width)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(500):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
"""


def test_a_device_that_is_only_printed_leaves_the_notebook_on_the_cpu():
    assert _codes(_PRINTED_DEVICE) == []
    for used in (
        "model = build_model(width=args.width).to(device)",
        "model = build_model(width=args.width, device=device)",
    ):
        moved = _PRINTED_DEVICE.replace("model = build_model(width=args.width)", used)
        assert "TP201" in _codes(moved), used
    as_torch_device = _PRINTED_DEVICE.replace(
        'device = "cuda" if torch.cuda.is_available() else "cpu"',
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
    )
    assert _codes(as_torch_device) == []


def test_a_non_blocking_copy_in_an_evaluation_loop_is_not_the_training_runs():
    source = """
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        train_loader = DataLoader(train_set, batch_size=64, num_workers=4)
        test_loader = DataLoader(test_set, batch_size=64, num_workers=4)
        model = build_model().to(device)
        for epoch in range(10):
            model.train()
            for x, y in train_loader:
                x = x.to(device, non_blocking=True)
                loss = criterion(model(x), y.to(device))
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                for x, y in test_loader:
                    x = x.to(device, non_blocking=True)
                    total += criterion(model(x), y.to(device))
    """
    result = lint_source("train.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult)
    assert [f.location.line for f in result.findings if f.code == "TP103"] == [12]


_TABLE_MLP = """
    import torch
    from torch import nn

    device = torch.device("cuda")
    x = torch.tensor(table[feature_columns].values, dtype=torch.float32).to(device)
    y = torch.tensor(table["target"].values, dtype=torch.float32).to(device)
    model = nn.Sequential(
        nn.Linear(x.shape[1], 50), nn.ReLU(), nn.Linear(50, 25), nn.ReLU(), nn.Linear(25, 1)
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(1000):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
"""


def test_a_narrow_model_over_the_datas_width_is_small():
    # The course's regression MLPs: 50 and 25 units over the table's columns
    assert not {"TP201", "TP302"} & set(_codes(_TABLE_MLP))
    for wide in (
        "nn.Linear(x.shape[1], 512), nn.ReLU(), nn.Linear(512, 25)",  # a wide side
        "nn.Linear(x.shape[1], y.shape[1]), nn.ReLU(), nn.Linear(50, 25)",  # data on both sides
        "nn.Linear(x.shape[1] * 64, 50), nn.ReLU(), nn.Linear(50, 25)",  # arithmetic of it
    ):
        source = _TABLE_MLP.replace("nn.Linear(x.shape[1], 50), nn.ReLU(), nn.Linear(50, 25)", wide)
        assert {"TP201", "TP302"} <= set(_codes(source)), wide


def test_the_datas_width_handed_to_a_model_class():
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, in_count, out_count):
                super().__init__()
                self.fc1 = nn.Linear(in_count, 50)
                self.fc2 = nn.Linear(50, 25)
                self.fc3 = nn.Linear(25, out_count)

            def forward(self, x):
                return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

        device = "cuda"
        x = torch.tensor(features, device=device)
        y = torch.tensor(targets, device=device)
        model = Net(x.shape[1], 1).to(device)
        loss_fn = nn.MSELoss()
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(1000):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            print(loss.item())
    """
    assert not {"TP201", "TP302"} & set(_codes(source))
    # A layer of another kind is not sized with the data's width (an embedding table is: it
    # counts one row whatever its size, test_change21_classes)
    convolved = source.replace("nn.Linear(in_count, 50)", "nn.Conv1d(in_count, 50, 3)")
    assert {"TP201", "TP302"} <= set(_codes(convolved))
