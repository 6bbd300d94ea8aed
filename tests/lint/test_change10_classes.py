"""Classes issue 32's tenth change set showed (lucidrains/imagen-pytorch, facebookresearch/
denoiser, benedekrozemberczki/pytorch_geometric_temporal, p-christ's RL algorithms,
jcjohnson/pytorch-examples; judged before any rule changed against it). Each fixture has the
shape of the code it is cut from, shortened; each test fails on the rules before the change and
keeps the finding where the shape differs in what matters."""

from __future__ import annotations

import textwrap

from torchpace.lint import RULES, FileResult, lint_source


def _findings(source: str) -> list[tuple[str, int]]:
    result = lint_source("train.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult), result
    return [(f.code, f.location.line) for f in result.findings]


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
