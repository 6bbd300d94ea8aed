"""Classes of patterns from the recorded recall lists (issue 32), session 28: each cut from the
code it was seen in, and checked the other way round."""

from __future__ import annotations

from lint_findings import findings

# pytorch-ddpm and pytorch-cifar100: TensorBoard's add_scalar handed the CUDA loss (or a gradient
# norm) converts it with .cpu().numpy() on every step, a wait no .item() in the source shows.
LOGGED = """
import torch
import wandb
from torch.utils.tensorboard import SummaryWriter

writer = SummaryWriter()
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {log}
"""


def test_a_tensor_handed_to_a_logger_is_a_read_on_the_host() -> None:
    def tp201(log: str) -> list[tuple[str, int]]:
        return findings(LOGGED.format(log=log), "TP201")

    assert tp201('writer.add_scalar("loss", loss, step)') == [("TP201", 14)]
    assert tp201('writer.add_scalar("loss", scalar_value=loss, global_step=step)') == [
        ("TP201", 14)
    ]
    grad_norm = 'for p in model.parameters():\n        writer.add_histogram("g", p.grad, step)'
    assert tp201(grad_norm) == [("TP201", 15)]
    assert tp201('wandb.log({"loss": loss, "lr": 0.1})') == [("TP201", 14)]
    # read once, where the source reads it; host values and cadences cost nothing
    assert tp201('writer.add_scalar("loss", loss.item(), step)') == [("TP201", 14)]
    assert tp201('writer.add_scalar("lr", 0.1, step)') == []
    assert tp201('wandb.log({"step": step})') == []
    assert tp201('if step % 100 == 0:\n        writer.add_scalar("loss", loss, step)') == []


# sweetice's SAC: update() runs `for _ in range(args.gradient_steps)` (default 1) on every
# environment step, whose action read already waits: one gradient step an environment step is
# the environment loop's. TD3's update(10) runs ten, and stays reported.
SAC = """
import argparse
import gym
import torch
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_steps", default={steps}, type=int)
args = parser.parse_args()
env = gym.make("Pendulum-v0")


class SAC:
    def __init__(self):
        self.net = Net().cuda()
        self.optimizer = torch.optim.Adam(self.net.parameters())
        self.writer = SummaryWriter()

    def select_action(self, state):
        return self.net(torch.FloatTensor(state).cuda()).cpu().numpy()

    def update(self, s):
        for _ in range(args.gradient_steps):
            loss = self.net(s).mean()
            self.losses.append(loss.item())
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


agent = SAC()
for episode in range(1000):
    state = env.reset()
    for t in range(200):
        action = agent.select_action(state)
        state, reward, done, info = env.step(action)
        agent.update(batch)
"""


def test_one_gradient_step_each_environment_step_is_the_environment_loops() -> None:
    assert findings(SAC.format(steps=1), "TP201") == []
    assert findings(SAC.format(steps=10), "TP201") == [("TP201", 25)]  # the .item()
