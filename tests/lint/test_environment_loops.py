"""Loops bound by an environment (issue 32): reading the action back to step a CPU environment
is what reinforcement learning needs every step, and autocast does not speed up the small
network that picks it. A DQN loop after seungeunrho/minimalRL's dqn.py (corpus 2, change half),
moved to CUDA as most RL code is."""

from __future__ import annotations

from torchpace.lint import RULES, FileResult, lint_source

DQN = """
import gymnasium as gym
import torch
import torch.nn.functional as F

device = torch.device("cuda")


def sample_action(q, obs, epsilon):
    out = q(obs)
    return out.argmax().item()  # the action goes to the CPU environment


def train(q, q_target, memory, optimizer):
    for i in range(10):
        s, a, r, s_prime, done_mask = memory.sample(32)
        loss = F.smooth_l1_loss(q(s).gather(1, a), r + 0.98 * q_target(s_prime).max(1)[0])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())  # LINE_UPDATE: a sync per gradient step, not per environment step


def main(q, q_target, memory, optimizer):
    env = gym.make("CartPole-v1")
    for n_epi in range(10000):
        s, _ = env.reset()
        done = False
        while not done:
            a = sample_action(q, torch.from_numpy(s).float().to(device), 0.08)
            s_prime, r, done, truncated, info = env.step(a)
            memory.put((s, a, r / 100.0, s_prime, done))
            td = q(torch.from_numpy(s_prime).float().to(device)).max() * 0.98 + r
            loss = (td.detach() - q(torch.from_numpy(s).float().to(device))[a]) ** 2
            optimizer.zero_grad()
            loss.backward()  # an online update at every environment step (actor-critic style)
            optimizer.step()
            total = float(loss)  # at the environment's pace: the loop syncs there anyway
            s = s_prime
        if memory.size() > 2000:
            train(q, q_target, memory, optimizer)
"""


def _findings(source: str) -> set[tuple[int, str]]:
    result = lint_source("dqn.py", source.encode(), RULES)
    assert isinstance(result, FileResult), result
    return {(f.location.line, f.code) for f in result.findings}


def test_an_environment_loop_keeps_its_host_reads_and_float32():
    found = _findings(DQN)
    update = next(i for i, ln in enumerate(DQN.splitlines(), 1) if "LINE_UPDATE" in ln)
    # The update's own loop trains without stepping the environment: its sync is reported.
    assert (update, "TP201") in found
    assert {code for _, code in found} & {"TP302"} == set()  # no autocast advice
    reported_lines = {line for line, code in found if code.startswith("TP20")}
    assert reported_lines == {update}, found  # nothing in the environment loop or sample_action


def test_the_same_loop_without_an_environment_is_reported():
    # Stepping a simulator object that is not an environment: the same reads are syncs of a
    # training loop, and are reported as before.
    plain = DQN.replace("env.step(a)", "sim.advance(a)").replace('gym.make("CartPole-v1")', "Sim()")
    lines = plain.splitlines()
    action = next(i for i, ln in enumerate(lines, 1) if "return out.argmax().item()" in ln)
    score = next(i for i, ln in enumerate(lines, 1) if "total = float(loss)" in ln)
    found = _findings(plain)
    assert {(action, "TP201"), (score, "TP201")} <= found, found
    assert any(code == "TP302" for _, code in found)  # and the float32 CUDA loop
