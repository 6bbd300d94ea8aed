"""Classes the nineteenth session found in the change-19 repositories (issue 32), fixed in
general. Each fixture has the shape of the code a judge read, shortened and renamed; each test
fails on the rules before the change."""

from __future__ import annotations

import pytest
from lint_findings import findings

# A DQN agent class in the style of the Rainbow tutorials: the interaction loop calls the
# agent's own ``step(action)``, which calls ``self.env.step(action)``. The loop is bound by the
# environment as much as one that calls ``env.step`` itself: the action read back to the host,
# the replay priorities and the loss read per update are what every environment step costs
# already, and the small Q-network's autocast cannot pay.
AGENT = """
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Agent:
    def __init__(self, env, hidden):
        self.env = env
        self.device = torch.device("cuda")
        obs_dim, n_actions = env.observation_space.shape[0], env.action_space.n
        self.dqn = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, n_actions)
        ).to(self.device)
        self.optimizer = torch.optim.Adam(self.dqn.parameters())

    def select_action(self, state):
        action = self.dqn(torch.as_tensor(state, device=self.device)).argmax()
        return action.detach().cpu().numpy()

    def STEP(self, action):
        next_state, reward, terminated, truncated, _ = ENV.step(action)
        return next_state, reward, terminated or truncated

    def update_model(self, batch):
        loss = F.smooth_l1_loss(self.dqn(batch["obs"]).max(1).values, batch["target"])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def train(self, num_frames, batch):
        state, _ = self.env.reset()
        losses = []
        for frame_idx in range(num_frames):
            action = self.select_action(state)
            state, reward, done = self.STEP(action)
            if done:
                state, _ = self.env.reset()
            losses.append(self.update_model(batch))


agent = Agent(gym.make("CartPole-v1"), hidden=int(input()))
"""


@pytest.mark.parametrize("method", ["step", "take_step"])
@pytest.mark.parametrize("env", ["self.env", "self.environment"])
def test_an_environment_stepped_in_a_method_the_loop_calls_binds_the_loop(
    method: str, env: str
) -> None:
    source = AGENT.replace("STEP", method).replace("ENV", env)
    assert findings(source, "TP201") == []
    assert findings(source, "TP302") == []


def test_a_method_that_steps_something_else_does_not_bind_the_loop() -> None:
    # the method's ``step(action)`` is not an environment's: the loop's reads stay reported
    source = AGENT.replace("STEP", "step").replace("ENV", "self.schedule")
    assert findings(source, "TP201") and findings(source, "TP302")


def test_a_method_that_steps_in_its_own_loop_does_not_bind_the_caller() -> None:
    # ``rollout()`` steps the environment many times per call, in its own loop (which is bound);
    # the caller's loop trains once per rollout: its reads are per update, still reported.
    source = """
    import torch


    class Runner:
        def __init__(self, env, model, opt):
            self.env, self.model, self.opt = env, model.cuda(), opt

        def rollout(self, obs):
            for t in range(128):
                obs, reward, done, info = self.env.step(self.act(obs))
            return obs

        def act(self, obs):
            return self.model(torch.as_tensor(obs).cuda()).argmax().cpu().numpy()

        def train(self, obs, batch):
            for update in range(1000):
                obs = self.rollout(obs)
                loss = self.model(batch).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                print(loss.item())
    """
    assert [code for code, _ in findings(source, "TP201")] == ["TP201"]


# EDM's preconditioning: ``torch.as_tensor(sigma)`` of what the caller hands (the step's noise
# levels, already on the GPU) returns that tensor as it is; nothing is built on the host. A
# literal list or a local host value is still made on the host.
AS_TENSOR = """
import torch
import torch.nn as nn


class Precond(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(64, 64)
        self.register_buffer("u", torch.zeros(1000))

    def round_sigma(self, sigma):
        sigma = torch.as_tensor(DATA)
        return sigma.to(self.u.device)

    def forward(self, x, sigma):
        return self.net(x) * self.round_sigma(sigma).reshape(-1, 1)


model = Precond().cuda()
opt = torch.optim.Adam(model.parameters())
for x in loader:
    x = x.cuda()
    loss = model(x, torch.rand(x.shape[0], device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(("data", "reported"), [("sigma", False), ("[0.5, 1.0]", True)])
def test_as_tensor_of_what_the_caller_hands_is_not_built_on_the_host(
    data: str, reported: bool
) -> None:
    assert bool(findings(AS_TENSOR.replace("DATA", data), "TP207")) is reported


# EDM's FID script: a loop over a loader feeds a detector loaded whole from a pickle, repeats
# grey images to three channels and sums the features; nothing trains, so the loader does not
# feed training steps and gets no pinned-memory advice. The same loop around a model the file
# builds from a class it cannot see into keeps the advice.
FID = """
import pickle

import torch


def calculate_stats(dataset, path, device=torch.device("cuda")):
    with open(path, "rb") as f:
        detector = MODEL
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=2)
    mu = torch.zeros([2048], dtype=torch.float64, device=device)
    for images, _labels in loader:
        if images.shape[1] == 1:
            images = images.repeat([1, 3, 1, 1])
        features = detector(images.to(device)).to(torch.float64)
        mu += features.sum(0)
    return mu.cpu().numpy()
"""


@pytest.mark.parametrize(
    ("model", "reported"),
    [
        ("pickle.load(f).to(device)", False),
        ("torch.jit.load(f).to(device)", False),
        ("Trainer(f).to(device)", True),
    ],
)
def test_a_loop_that_feeds_a_loaded_model_only_does_not_feed_training(
    model: str, reported: bool
) -> None:
    assert bool(findings(FID.replace("MODEL", model), "TP102")) is reported


# The sentiment tutorials' FastText and one-layer RNN: an embedding table over a vocabulary the
# data decides, then a small recurrence or an average and a narrow linear layer. A lookup reads
# one row a token, so the table's size is not the step's work: the model is small (judged
# debatable, negligible, each time). A wide layer after the embedding keeps the findings.
EMBEDDED = """
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab_size, embedding_dim, hidden_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.rnn = nn.RNN(embedding_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim, 1)

    def forward(self, text):
        output, hidden = self.rnn(self.embedding(text))
        return self.fc(hidden.squeeze(0))


model = Classifier(len(vocab), 100, HIDDEN).to("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
criterion = nn.BCEWithLogitsLoss()
for epoch in range(5):
    for text, label in iterator:
        optimizer.zero_grad()
        loss = criterion(model(text.cuda()).squeeze(1), label.cuda())
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


@pytest.mark.parametrize(("hidden", "reported"), [("256", False), ("4096", True)])
def test_an_embedding_table_counts_one_row_toward_a_small_model(
    hidden: str, reported: bool
) -> None:
    source = EMBEDDED.replace("HIDDEN", hidden)
    assert bool(findings(source, "TP302")) is reported
    assert bool(findings(source, "TP201")) is reported
