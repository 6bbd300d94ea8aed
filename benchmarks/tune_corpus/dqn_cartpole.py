"""DQN on a cart-pole environment written inline (classic cart-pole physics, no gym).

Epsilon-greedy actions from the Q-network, a replay buffer, a target network synced every N
updates, and one gradient update per environment step after a warm-up.
"""

import argparse
import math
import random
import time
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CartPole:
    """The classic cart-pole task: keep the pole upright by pushing the cart left or right."""

    gravity = 9.8
    mass_cart = 1.0
    mass_pole = 0.1
    total_mass = mass_cart + mass_pole
    length = 0.5  # half the pole's length
    pole_mass_length = mass_pole * length
    force_mag = 10.0
    tau = 0.02
    theta_limit = 12 * 2 * math.pi / 360
    x_limit = 2.4
    max_steps = 500

    def __init__(self, seed=None):
        self.rng = np.random.default_rng(seed)
        self.state = None
        self.steps = 0

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.steps = 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        cos_t = math.cos(theta)
        sin_t = math.sin(theta)
        temp = (force + self.pole_mass_length * theta_dot**2 * sin_t) / self.total_mass
        theta_acc = (self.gravity * sin_t - cos_t * temp) / (
            self.length * (4.0 / 3.0 - self.mass_pole * cos_t**2 / self.total_mass)
        )
        x_acc = temp - self.pole_mass_length * theta_acc * cos_t / self.total_mass

        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * x_acc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1

        terminated = abs(x) > self.x_limit or abs(theta) > self.theta_limit
        truncated = self.steps >= self.max_steps
        return self.state.astype(np.float32), 1.0, terminated, truncated


class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_actions),
        )

    def forward(self, x):
        return self.net(x)


class ReplayBuffer:
    def __init__(self, capacity):
        self.buffer = deque(maxlen=capacity)

    def push(self, state, action, reward, next_state, done):
        self.buffer.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)
        states, actions, rewards, next_states, dones = zip(*batch, strict=True)
        return (
            torch.tensor(np.array(states), dtype=torch.float32),
            torch.tensor(actions, dtype=torch.long),
            torch.tensor(rewards, dtype=torch.float32),
            torch.tensor(np.array(next_states), dtype=torch.float32),
            torch.tensor(dones, dtype=torch.float32),
        )

    def __len__(self):
        return len(self.buffer)


def epsilon_at(step, start, end, decay_steps):
    frac = min(step / decay_steps, 1.0)
    return start + frac * (end - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--total-steps", type=int, default=4000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--buffer-size", type=int, default=20000)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--target-sync", type=int, default=250)
    parser.add_argument("--eps-start", type=float, default=1.0)
    parser.add_argument("--eps-end", type=float, default=0.05)
    parser.add_argument("--eps-decay", type=int, default=2500)
    parser.add_argument("--log-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    env = CartPole(seed=args.seed)
    q_net = QNetwork(4, 2, args.hidden)
    target_net = QNetwork(4, 2, args.hidden)
    target_net.load_state_dict(q_net.state_dict())
    target_net.eval()
    optimizer = torch.optim.Adam(q_net.parameters(), lr=args.lr)
    buffer = ReplayBuffer(args.buffer_size)

    state = env.reset()
    episode_return = 0.0
    returns = []
    losses = []
    updates = 0
    loss = None
    start = time.time()

    for step in range(1, args.total_steps + 1):
        eps = epsilon_at(step, args.eps_start, args.eps_end, args.eps_decay)
        if random.random() < eps:
            action = random.randrange(2)
        else:
            with torch.no_grad():
                q = q_net(torch.tensor(state).unsqueeze(0))
                action = int(q.argmax(dim=1).item())

        next_state, reward, terminated, truncated = env.step(action)
        buffer.push(state, action, reward, next_state, terminated)
        episode_return += reward
        state = next_state
        if terminated or truncated:
            returns.append(episode_return)
            episode_return = 0.0
            state = env.reset()

        if len(buffer) >= args.warmup:
            states, actions, rewards, next_states, dones = buffer.sample(args.batch_size)
            q_values = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
            with torch.no_grad():
                next_q = target_net(next_states).max(dim=1).values
                targets = rewards + args.gamma * (1 - dones) * next_q
            loss = F.smooth_l1_loss(q_values, targets)

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(q_net.parameters(), 10.0)
            optimizer.step()
            updates += 1
            losses.append(loss.item())

            if updates % args.target_sync == 0:
                target_net.load_state_dict(q_net.state_dict())

        if step % args.log_every == 0:
            recent = returns[-10:]
            avg_return = sum(recent) / len(recent) if recent else float("nan")
            avg_loss = sum(losses[-100:]) / len(losses[-100:]) if losses else float("nan")
            print(
                f"step {step}: episodes {len(returns)}, avg return (last 10) {avg_return:.1f}, "
                f"loss {avg_loss:.4f}, eps {eps:.2f}, updates {updates} "
                f"({time.time() - start:.1f}s)"
            )

    print(f"episodes {len(returns)}, best return {max(returns, default=0.0):.0f}")
    print(f"final loss {sum(losses[-100:]) / max(len(losses[-100:]), 1):.4f}")


if __name__ == "__main__":
    main()
