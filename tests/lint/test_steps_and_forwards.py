"""What the twenty-third session tried for recall (issue 32). TP203 reads `torch.unique`; two
wider readings of step code were tried, judged by helpers who wrote no rule, and taken back, and
their controls keep them out: a function that steps an optimizer read as step code wherever it is
called, and every module's forward read for data-dependent shapes. Each fixture has the shape of
the code a judge read (a prototypical network's loss, Rainbow's agent, PointNet++'s sampling),
shortened and renamed."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_findings import findings, project_findings

# An RL project: main.py steps the environment and calls the agent's learn() every few steps;
# agent.py's learn() is a whole training step (backward and the optimizer's step). Reading such
# a function as step code wherever it is called was tried (the twenty-third session) and taken
# back: of the 28 findings it added, the judges called 3 true. The interaction loop reads the
# action back every environment step anyway, the priorities go to a host-side tree, and many
# such agents run on the CPU unless asked.
AGENT = """
import torch
from torch import optim


class Agent:
    def __init__(self, args, net):
        self.net = net.to(args.device)
        self.optimiser = optim.Adam(self.net.parameters(), lr=args.lr)

    def act(self, state):
        with torch.no_grad():
            return self.net(state.unsqueeze(0)).argmax(1).item()

    def learn(self, mem):
        idxs, states, actions, returns = mem.sample(32)
        log_ps = self.net(states)
        loss = -torch.sum(log_ps * returns, 1)
        self.net.zero_grad()
        (loss.mean()).backward()
        self.optimiser.step()
        mem.update_priorities(idxs, loss.detach().cpu().numpy())
"""
MAIN = """
import argparse

import torch
from agent import Agent
from env import Env, Memory, Net

parser = argparse.ArgumentParser()
parser.add_argument("--replay-frequency", type=int, default=4)
args = parser.parse_args()
args.device = torch.device("cuda")
env, mem = Env(args), Memory(args)
dqn = Agent(args, Net())
state, done = env.reset(), False
for T in range(1, 1_000_000):
    if done:
        state = env.reset()
    action = dqn.act(state)
    state, reward, done = env.step(action)
    mem.append(state, action, reward, done)
    if T % args.replay_frequency == 0:
        dqn.learn(mem)
"""


def test_an_agents_update_called_from_an_environment_loop_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"agent.py": AGENT, "main.py": MAIN}
    assert project_findings(tmp_path, files, "TP201,TP203", capsys) == []


# PointNet++'s farthest point sampling, which each set-abstraction layer's forward calls: the
# model file has no loop. Reading every module's forward for TP203, whoever calls it, added 46
# findings on the corpus, judged 13 true, 13 false and 26 debatable: modules only inference runs
# (NMS wrappers, a head run from a demo notebook), packing that needs the lengths on the host
# anyway, paths off by default. A forward is read when a training loop lint follows calls it.
SAMPLING = """
import torch
import torch.nn as nn


def farthest_point_sample(xyz, npoint):
    device = xyz.device
    B, N, C = xyz.shape
    centroids = torch.zeros(B, npoint, dtype=torch.long, device=device)
    distance = torch.full((B, N), 1e10, device=device)
    farthest = torch.randint(0, N, (B,), dtype=torch.long, device=device)
    batch_indices = torch.arange(B, dtype=torch.long, device=device)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch_indices, farthest, :].view(B, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)
        mask = dist < distance
        distance[mask] = dist[mask]
        farthest = torch.max(distance, -1)[1]
    return centroids


class SetAbstraction(nn.Module):
    def __init__(self, npoint):
        super().__init__()
        self.npoint = npoint
        self.mlp = nn.Linear(3, 128)

    def forward(self, xyz, labels):
        idx = farthest_point_sample(xyz, self.npoint)
        keep = labels != -1
        if not self.training:
            return self.mlp(xyz[keep])
        return self.mlp(xyz), idx
"""


def test_a_modules_forward_that_no_training_loop_reaches_is_not_read_for_shapes() -> None:
    assert findings(SAMPLING, "TP203") == []


def test_the_same_selection_in_a_training_step_is_reported() -> None:
    step = (
        SAMPLING
        + """
device = torch.device("cuda")
model = SetAbstraction(512).to(device)
opt = torch.optim.Adam(model.parameters())
for xyz, labels in LOADER:
    out, idx = model(xyz.to(device), labels.to(device))
    out.sum().backward()
    opt.step()
"""
    )
    # the boolean-mask read in the function the forward calls (line 18); not the assignment
    # through the mask on the same line's left, nor the selection only evaluation runs (line 32)
    assert findings(step, "TP203") == [("TP203", 18)]


# A prototypical network's training step (learn2learn's protonet): the classes of the episode
# are the distinct labels, on the device.
PROTOTYPES = """
import torch
import pandas as pd
from torch.utils.data import DataLoader

device = torch.device("cuda")
table = pd.read_csv("episodes.csv")
loader = DataLoader(EPISODES, batch_size=None, num_workers=4)
model = Net().to(device)
opt = torch.optim.Adam(model.parameters())
for support, labels in loader:
    ways = len(torch.unique(torch.from_numpy(EPISODE_IDS)))
    support, labels = support.to(device), labels.to(device)
    classes = torch.unique(labels)
    names = table["label"].unique()
    prototypes = torch.stack([model(support)[labels == c].mean(0) for c in classes])
    loss = prototypes.pow(2).sum() / ways
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_unique_on_a_device_tensor_in_a_training_step_is_reported() -> None:
    # torch.unique of the moved labels (line 14) and the boolean-mask read (line 16); not
    # torch.unique of a tensor in host memory (line 12), nor a pandas column's .unique() (15)
    assert findings(PROTOTYPES, "TP203") == [("TP203", 14), ("TP203", 16)]
