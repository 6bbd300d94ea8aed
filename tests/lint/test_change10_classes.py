"""Classes issue 32's tenth change set showed (lucidrains/imagen-pytorch, facebookresearch/
denoiser, benedekrozemberczki/pytorch_geometric_temporal, p-christ's RL algorithms,
jcjohnson/pytorch-examples; judged before any rule changed against it). Each fixture has the
shape of the code it is cut from, shortened; each test fails on the rules before the change and
keeps the finding where the shape differs in what matters."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from lint_findings import findings as _findings

from torchpace.cli import main
from torchpace.lint import RULES, FileResult, lint_source

# The shape of pytorch_geometric_temporal's recurrent examples (MIT): train on the CPU, then
# evaluate after model.eval() without torch.no_grad().
CPU_EVALUATION = """
import torch
import torch.nn.functional as F

model = RecurrentGCN(node_features=4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
model.train()
for epoch in range(200):
    cost = 0
    for time, snapshot in enumerate(train_dataset):
        y_hat = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr)
        cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
    cost.backward()
    optimizer.step()
    optimizer.zero_grad()

model.eval()
cost = 0
for time, snapshot in enumerate(test_dataset):
    y_hat = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr)
    cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
print(cost.item())
"""


def test_an_evaluation_in_a_cpu_only_file_is_no_gpu_runs():
    assert ("TP403", 19) not in _findings(CPU_EVALUATION)
    on_gpu = CPU_EVALUATION.replace(
        "RecurrentGCN(node_features=4)", "RecurrentGCN(node_features=4).cuda()"
    )
    assert ("TP403", 19) in _findings(on_gpu)


# The shape of minimalRL's dqn.py (MIT): a CPU-only acting loop, every environment step, runs the
# Q-network with autograd on only to choose the action; the update recomputes what it trains on.
CPU_ACTING = """
import random

import gym
import torch
import torch.nn as nn
import torch.nn.functional as F


class Qnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 128)
        self.fc2 = nn.Linear(128, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def sample_action(self, obs, epsilon):
        out = self.forward(obs)
        if random.random() < epsilon:
            return random.randint(0, 1)
        return out.argmax().item()


def train(q, memory, optimizer):
    s, a, r, s_prime, done = memory.sample(32)
    loss = F.smooth_l1_loss(q(s).gather(1, a), r)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def main():
    env = gym.make("CartPole-v1")
    q = Qnet()
    optimizer = torch.optim.Adam(q.parameters(), lr=0.0005)
    for n_epi in range(10000):
        s, _ = env.reset()
        done = False
        while not done:
            a = q.sample_action(torch.from_numpy(s).float(), 0.01)
            s_prime, r, done, truncated, info = env.step(a)
            memory.put((s, a, r, s_prime, done))
            s = s_prime
        if memory.size() > 2000:
            train(q, memory, optimizer)


main()
"""


def test_an_acting_loop_is_reported_on_the_cpu_too():
    # it runs at every environment step of training: the judges called these true on the CPU
    assert [f for f in _findings(CPU_ACTING) if f[0] == "TP403"] == [("TP403", 41)]


# The shape of pytorch_geometric_temporal (MIT): an example's model builds A3TGCN2 (re-exported by
# the package's __init__), which builds TGCN2 in a method its __init__ calls; TGCN2's forward
# starts its hidden state with zeros made on the host and moved, for the None it is given.
TGCN = """
import torch


class TGCN2(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.out_channels = out_channels
        self.linear = torch.nn.Linear(in_channels + out_channels, out_channels)

    def _set_hidden_state(self, X, H):
        if H is None:
            H = torch.zeros(X.shape[0], X.shape[1], self.out_channels).to(X.device)
        return H

    def forward(self, X, H=None):
        H = self._set_hidden_state(X, H)
        return self.linear(torch.cat([X, H], dim=-1))
"""
A3TGCN = """
import torch
from .temporalgcn import TGCN2


class A3TGCN2(torch.nn.Module):
    def __init__(self, in_channels, out_channels, periods):
        super().__init__()
        self.in_channels, self.out_channels, self.periods = in_channels, out_channels, periods
        self._setup_layers()

    def _setup_layers(self):
        self._base_tgcn = TGCN2(self.in_channels, self.out_channels)

    def forward(self, X):
        return sum(self._base_tgcn(X[..., p]) for p in range(self.periods))
"""
EXAMPLE = """
import torch
from tgt.recurrent import A3TGCN2


class TemporalGNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tgnn = A3TGCN2(2, 32, 12)
        self.linear = torch.nn.Linear(32, 12)

    def forward(self, x):
        return self.linear(self.tgnn(x))


model = TemporalGNN().cuda()
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    loss = torch.mean((model(x.cuda()) - y.cuda()) ** 2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_layer_built_in_a_setup_method_through_a_re_export_runs_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "tgt" / "recurrent"
    pkg.mkdir(parents=True)
    (tmp_path / "tgt" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(
        "from .temporalgcn import TGCN2\nfrom .attentiontemporalgcn import A3TGCN2\n"
    )
    (pkg / "temporalgcn.py").write_text(textwrap.dedent(TGCN))
    (pkg / "attentiontemporalgcn.py").write_text(textwrap.dedent(A3TGCN))
    (tmp_path / "train.py").write_text(textwrap.dedent(EXAMPLE))
    main(["lint", "--format", "json", "--select", "TP207", "."])
    found = {(f["path"], f["line"]) for f in json.loads(capsys.readouterr().out)}
    assert found == {("tgt/recurrent/temporalgcn.py", 13)}


def test_a_parameter_tested_for_none_is_set_at_every_call():
    # ``if H is None: H = ...`` on a parameter is no first-value test: each call starts afresh
    entries = frozenset({"TGCN2.forward"})
    result = lint_source("temporalgcn.py", textwrap.dedent(TGCN).encode(), RULES, entries)
    assert isinstance(result, FileResult)
    assert [(f.code, f.location.line) for f in result.findings] == [("TP207", 13)]
    # A name the function keeps across its own loop is set once there
    kept = textwrap.dedent(TGCN).replace(
        "    def forward(self, X, H=None):\n        H = self._set_hidden_state(X, H)\n",
        "    def forward(self, X, H=None):\n        for t in range(3):\n            if H is None:\n"
        "                H = torch.zeros(X.shape[0], X.shape[1], self.out_channels).to(X.device)\n",
    )
    result = lint_source("temporalgcn.py", kept.encode(), RULES, entries)
    assert isinstance(result, FileResult)
    assert [f.code for f in result.findings] == []
