"""DDPM on a 2-D "two moons" point cloud.

An MLP with a sinusoidal time embedding predicts the noise; a linear beta schedule; every few
epochs a few hundred points are sampled and their mean and standard deviation printed.
"""

import argparse
import math
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_moons(n, noise=0.05, rng=None):
    rng = rng or np.random.default_rng()
    n_top = n // 2
    n_bottom = n - n_top
    t_top = rng.uniform(0, math.pi, n_top)
    t_bottom = rng.uniform(0, math.pi, n_bottom)
    top = np.stack([np.cos(t_top), np.sin(t_top)], axis=1)
    bottom = np.stack([1 - np.cos(t_bottom), 0.5 - np.sin(t_bottom)], axis=1)
    x = np.concatenate([top, bottom], axis=0)
    x += rng.normal(scale=noise, size=x.shape)
    # roughly zero mean, unit scale
    x = (x - np.array([0.5, 0.25])) / np.array([0.87, 0.5])
    return x.astype(np.float32)


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class NoisePredictor(nn.Module):
    def __init__(self, hidden=256, time_dim=64, n_layers=4):
        super().__init__()
        self.time_dim = time_dim
        self.time_mlp = nn.Sequential(
            nn.Linear(time_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden)
        )
        self.inp = nn.Linear(2, hidden)
        self.layers = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(n_layers)])
        self.out = nn.Linear(hidden, 2)

    def forward(self, x, t):
        temb = self.time_mlp(timestep_embedding(t, self.time_dim))
        h = self.inp(x) + temb
        for layer in self.layers:
            h = h + F.silu(layer(h))
        return self.out(h)


class Diffusion:
    def __init__(self, num_steps=100, beta_start=1e-4, beta_end=0.02):
        self.num_steps = num_steps
        self.betas = torch.linspace(beta_start, beta_end, num_steps)
        self.alphas = 1.0 - self.betas
        self.alpha_bars = torch.cumprod(self.alphas, dim=0)

    def add_noise(self, x0, t, noise):
        ab = self.alpha_bars[t].unsqueeze(-1)
        return ab.sqrt() * x0 + (1 - ab).sqrt() * noise

    @torch.no_grad()
    def sample(self, model, n):
        x = torch.randn(n, 2)
        for i in reversed(range(self.num_steps)):
            t = torch.full((n,), i, dtype=torch.long)
            eps = model(x, t)
            alpha = self.alphas[i]
            ab = self.alpha_bars[i]
            mean = (x - (1 - alpha) / (1 - ab).sqrt() * eps) / alpha.sqrt()
            noise = torch.randn_like(x) if i > 0 else torch.zeros_like(x)
            x = mean + self.betas[i].sqrt() * noise
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--n-points", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--diffusion-steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--sample-every", type=int, default=5)
    parser.add_argument("--n-samples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    data = torch.from_numpy(make_moons(args.n_points, rng=np.random.default_rng(args.seed)))
    print(f"data mean {data.mean(0).tolist()}, std {data.std(0).tolist()}")
    loader = DataLoader(TensorDataset(data), batch_size=args.batch_size, shuffle=True)

    model = NoisePredictor(hidden=args.hidden)
    diffusion = Diffusion(num_steps=args.diffusion_steps)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    start = time.time()
    step = 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        total = 0.0
        for (x0,) in loader:
            t = torch.randint(0, diffusion.num_steps, (x0.shape[0],))
            noise = torch.randn_like(x0)
            xt = diffusion.add_noise(x0, t, noise)
            loss = F.mse_loss(model(xt, t), noise)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
        avg = total / len(loader)

        if epoch % args.sample_every == 0 or epoch == args.epochs:
            model.eval()
            samples = diffusion.sample(model, args.n_samples)
            mean = ", ".join(f"{v:.3f}" for v in samples.mean(0).tolist())
            std = ", ".join(f"{v:.3f}" for v in samples.std(0).tolist())
            print(
                f"epoch {epoch} step {step}: loss {avg:.4f}, samples mean [{mean}] "
                f"std [{std}] ({time.time() - start:.1f}s)"
            )
        else:
            print(f"epoch {epoch} step {step}: loss {avg:.4f}")

    print(f"final loss {avg:.4f}")


if __name__ == "__main__":
    main()
