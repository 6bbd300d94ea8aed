"""Whole-file conditions of the loop-aware rules, which one golden fixture per rule cannot hold."""

from __future__ import annotations

import textwrap

from torchpace.lint import RULES, FileResult, lint_source


def _codes(source: str) -> list[tuple[int, str]]:
    result = lint_source("t.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult)
    return [(f.location.line, f.code) for f in result.findings]


def test_set_epoch_anywhere_silences_the_sampler_rule() -> None:
    source = """
        from torch.utils.data import DistributedSampler
        sampler = DistributedSampler(ds)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for x, y in train_loader:
                model(x).sum().backward()
                opt.step()
    """
    assert _codes(source) == []
    assert _codes(source.replace("sampler.set_epoch(epoch)", "pass")) == [(3, "TP504")]


def test_sampler_rule_needs_several_epochs() -> None:
    source = """
        from torch.utils.data import DistributedSampler
        sampler = DistributedSampler(ds)
        for x, y in train_loader:
            model(x).sum().backward()
            opt.step()
    """
    assert _codes(source) == []


ACCUMULATION = """
    import contextlib
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(net)
    for i, (x, y) in enumerate(loader):
        ctx = model.no_sync() if (i + 1) % 4 else contextlib.nullcontext()
        with ctx:
            model(x).sum().backward()
        if (i + 1) % 4 == 0:
            optimizer.step()
"""


def test_no_sync_silences_the_accumulation_rule() -> None:
    assert _codes(ACCUMULATION) == []
    unsynced = ACCUMULATION.replace("model.no_sync()", "contextlib.nullcontext()")
    assert _codes(unsynced) == [(8, "TP502")]
    assert _codes(unsynced.replace("DistributedDataParallel(net)", "net")) == []


CUDA_LOOP = """
    import torch
    model = Net().cuda()
    for x, y in train_loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
"""


def test_autocast_or_other_precision_silences_the_cuda_loop_rule() -> None:
    assert _codes(CUDA_LOOP) == [(4, "TP302")]
    with_autocast = CUDA_LOOP.replace(
        "loss = model(x.cuda()).sum()",
        'with torch.autocast("cuda"):\n            loss = model(x.cuda()).sum()',
    )
    assert _codes(with_autocast) == []
    assert _codes(CUDA_LOOP.replace("Net().cuda()", "Net().cuda().half()")) == []
    assert _codes(CUDA_LOOP.replace(".cuda()", "")) == [], "a CPU loop is not flagged"


def test_syncs_are_found_through_methods_and_module_forwards() -> None:
    source = """
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                if x.abs().max().item() > 0:
                    x = x * 2
                return x

        class Trainer:
            def step(self, x):
                loss = self.model(x).sum()
                loss.backward()
                return loss

            def fit(self, loader):
                for x in loader:
                    loss = self.step(x)
                    print(loss)

        net = Net().to(device)
        for x, y in train_loader:
            net(x).sum().backward()
            optimizer.step()
    """
    found = _codes(source)
    assert (6, "TP201") in found, "Net.forward runs on every step through net(x)"
    assert (19, "TP202") in found, "self.step() does the training step, so fit's loop trains"


def test_a_cpu_only_script_has_no_syncs() -> None:
    # pytorch/examples regression and reinforcement_learning (issue 16): nothing is ever put on
    # a device, so reading a value waits for nothing.
    source = """
        import torch
        for step in range(100):
            loss = model(torch.randn(8, 4)).sum()
            loss.backward()
            optimizer.step()
            print(loss.item())
    """
    assert _codes(source) == []
    assert _codes(source.rstrip(" ") + "        model.to(device)\n") == [(7, "TP201")]
    assert _codes(source.rstrip(" ") + "        model.to(torch.float64)\n") == []
    assert _codes(source.rstrip(" ") + "        torch.cuda.synchronize()\n") == [(7, "TP201")]


def test_recursive_functions_terminate() -> None:
    source = """
        def step(x, n):
            if n:
                return step(x, n - 1)
            x.backward()
            return x.item()

        for x in batches:
            step(x.to(device), 3)
    """
    assert _codes(source) == [(6, "TP201")]


def test_cadence_gated_and_short_circuits_the_test() -> None:
    source = """
        for step, (x, y) in enumerate(loader):
            loss = model(x, y)
            loss.backward()
            if step % 10 == 0 and loss.item() > 5:
                pass
            if loss.item() > 5 and step % 10 == 0:
                pass
        model.to(device)
    """
    assert _codes(source) == [(7, "TP201")]


def test_whole_file_conditions_of_tp305_and_tp501() -> None:
    # timm's train.py offers --torchscript beside --torchcompile; its validate.py and
    # inference.py wrap DataParallel without training (issue 16): none of these is advice.
    scripted = "import torch\nm = torch.jit.script(model)\n"
    assert _codes(scripted) == [(2, "TP305")]
    assert _codes(scripted + "c = torch.compile(model)\n") == []
    parallel = "import torch\nm = torch.nn.DataParallel(model)\nout = m(x)\n"
    assert _codes(parallel) == []
    assert _codes(parallel + "out.sum().backward()\n") == [(2, "TP501")]


def test_zero_grad_to_zero_is_needed_where_grads_are_added_into() -> None:
    source = "optimizer.zero_grad(set_to_none=False)\n"
    assert _codes(source) == [(1, "TP402")]
    assert _codes(source + "for p, g in zip(params, grads):\n    p.grad += g\n") == []
    assert _codes(source + "p.grad.add_(g)\n") == []


def test_framework_backward_does_not_make_a_tensor() -> None:
    # accelerate's early_stopping example: `accelerator.backward(loss)` made `accelerator` a
    # tensor, so `if accelerator.check_trigger():` was reported as a tensor branch.
    source = """
        for batch in train_dataloader:
            loss = model(batch.to(device)).loss
            accelerator.backward(loss)
            optimizer.step()
            if accelerator.check_trigger():
                break
    """
    assert _codes(source) == []


def test_torchscript_beside_a_compile_option_is_not_advice() -> None:
    # timm's train.py: `--torchscript` and `--torchcompile` are alternatives; it compiles
    # through `task.compile(...)` and checks `hasattr(torch, "compile")`.
    scripted = "import torch\nif args.torchscript:\n    m = torch.jit.script(model)\n"
    assert _codes(scripted) == [(3, "TP305")]
    assert _codes(scripted + "else:\n    task.compile(backend=args.torchcompile)\n") == []
    assert _codes(scripted + "has_compile = hasattr(torch, 'compile')\n") == []


def test_lightning_training_step_runs_every_step() -> None:
    # Lightning's GAN template: the Trainer calls training_step once per batch.
    source = """
        import torch
        from lightning.pytorch import LightningModule

        class GAN(LightningModule):
            def training_step(self, batch):
                imgs, _ = batch
                z = torch.randn(imgs.shape[0], 100)
                z = z.type_as(imgs)
                loss = self.generator(z).mean()
                self.log("loss", loss.item())
                return loss

            def validation_step(self, batch):
                return self.generator(batch).mean().item()
    """
    assert _codes(source) == [(8, "TP207"), (11, "TP201")]


def test_a_loader_handed_to_a_logger_is_still_iterated() -> None:
    # MAE's engine: `for step, (x, _) in enumerate(metric_logger.log_every(data_loader, ...))`.
    source = """
        import torch
        def train_one_epoch(model, data_loader, loss_scaler, metric_logger):
            for step, (x, _) in enumerate(metric_logger.log_every(data_loader, 20)):
                loss = model(x.cuda(non_blocking=True))
                loss_scaler(loss, optimizer)
                torch.cuda.synchronize()
    """
    assert (7, "TP205") in _codes(source)


def test_a_seeded_branch_that_turns_the_autotuner_off_leaves_the_default_run() -> None:
    # pytorch/examples imagenet turns benchmark off only for seeded runs, and never on.
    source = """
        import torch
        import torchvision.models as models
        if args.seed is not None:
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
        model = models.__dict__[args.arch]().cuda()
        for x, y in train_loader:
            model(x).sum().backward()
    """
    assert _codes(source) == [(7, "TP303"), (8, "TP302")]
    decided = source.replace("benchmark = False", "benchmark = True")
    assert _codes(decided) == [(8, "TP302")]  # turned on, even in a branch: the author chose
    unconditional = (
        "import torch\ntorch.backends.cudnn.benchmark = False\n"
        "m = torch.nn.Conv2d(3, 8, 3).cuda()\n"
    )
    assert _codes(unconditional) == []


def test_held_out_shapes_of_yolov5_and_swin() -> None:
    # Found on repositories judged after the rules were written (benchmarks/realworld, held-out).
    wrapped_no_grad = """
        import torch
        from utils.torch_utils import smart_inference_mode

        @smart_inference_mode()
        def run(model, dataloader):
            model.eval()
            for im, targets in dataloader:
                out = model(im.cuda())
            return out.mean(0).tolist()
    """
    assert _codes(wrapped_no_grad) == []
    scaler_steps = """
        import torch
        def train_one_epoch(model, data_loader, optimizer, loss_scaler):
            model.train()
            for samples, targets in data_loader:
                loss = model(samples.cuda(non_blocking=True)).mean()
                loss_scaler(loss, optimizer, clip_grad=5.0, parameters=model.parameters())
                print(loss.item())
    """
    assert _codes(scaler_steps) == [(5, "TP302"), (8, "TP201")]  # training, not eval (TP403)
    gated = """
        import torch
        for i, (imgs, targets) in enumerate(train_loader):
            loss = model(imgs.cuda()).mean()
            loss.backward()
            optimizer.step()
            if ni < 3:
                plot(imgs.cpu())
            if i == len(train_loader) - 1:
                print(targets.cuda().sum().item())
            if step == 10:
                print(loss.item())
    """
    assert _codes(gated) == [(3, "TP302")]  # no sync: each read is behind a one-step gate
    seeded = """
        import torch
        from utils.general import init_seeds
        init_seeds(0, deterministic=True)
        model = torch.nn.Conv2d(3, 8, 3).cuda()
        for x in loader:
            model(x.cuda()).sum().backward()
    """
    assert [c for c in _codes(seeded) if c[1] == "TP303"] == []
    graph = "import torch\ntb.add_graph(torch.jit.trace(model, im))\n"
    assert _codes(graph) == []


def test_scale_reads_formatted_norms_and_a_framework_on_the_cpu() -> None:
    source = """
        import torch
        for x, y in train_loader:
            loss = model(x.to(device)).mean()
            scaler.scale(loss).backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scale = scaler.get_scale()
            print(f"norm {norm:.2f}")
            desc = ("%10s" + "%10.4g" * 3) % ("train", *mloss)
            logged = loss_scaler.state_dict()["scale"]
        mloss = torch.zeros(3, device=device)
    """
    assert _codes(source) == [(8, "TP201"), (9, "TP202"), (10, "TP202"), (11, "TP201")]
    # Lightning's RL templates: Trainer(accelerator="cpu"); the .cuda() branch never runs.
    on_cpu = """
        import torch
        from lightning.pytorch import LightningModule, Trainer

        class DQN(LightningModule):
            def training_step(self, batch):
                state = torch.tensor([self.state]).cuda()
                return self.net(state).sum()

        Trainer(accelerator="cpu").fit(DQN())
    """
    assert _codes(on_cpu) == []


# After detectron2's engine/train_loop.py (set new-change): a base trainer's loop calls
# ``self.run_step()``, which only a subclass defines; the subclass writes its metrics through a
# static method, behind a period whose constructor default is 1.
TRAINER = """
    import torch

    class TrainerBase:
        def train(self, start, end):
            for self.iter in range(start, end):
                self.run_step()

        def run_step(self):
            raise NotImplementedError

    class SimpleTrainer(TrainerBase):
        def __init__(self, model, loader, optimizer, gather_metric_period=1):
            self.model, self.loader, self.optimizer = model, loader, optimizer
            self.gather_metric_period = gather_metric_period

        def run_step(self):
            data = next(self.loader).to("cuda")
            losses = self.model(data)
            self.optimizer.zero_grad()
            losses.backward()
            if (self.iter + 1) % self.gather_metric_period == 0:
                SimpleTrainer.write_metrics(losses)
            self.optimizer.step()

        @staticmethod
        def write_metrics(loss):
            return loss.detach().item()
"""


def test_a_subclass_step_and_a_period_of_one_by_default() -> None:
    assert (28, "TP201") in _codes(TRAINER)
    # a period of 20 by default is a logging cadence
    assert (28, "TP201") not in _codes(TRAINER.replace("period=1)", "period=20)"))
    # a period set again elsewhere is not known to be 1
    again = TRAINER.replace(
        "def run_step(self):\n            data",
        "def run_step(self):\n            self.gather_metric_period = 5\n            data",
    )
    assert not any(code == "TP201" for _, code in _codes(again))


def test_a_module_constant_period_of_one_is_every_step() -> None:
    source = """
        import torch
        log_interval = 1
        for it, (x, y) in enumerate(loader):
            loss = model(x.cuda()).mean()
            loss.backward()
            opt.step()
            if it % log_interval == 0:
                print(loss.item())
    """
    assert (9, "TP201") in _codes(source)
    assert (9, "TP201") not in _codes(source.replace("log_interval = 1", "log_interval = 10"))
    # nanoGPT: a configurator run into the globals sets the real interval (10 in its configs)
    configured = source.replace(
        "log_interval = 1\n", "log_interval = 1\n        exec(open('configurator.py').read())\n"
    )
    assert (10, "TP201") not in _codes(configured)


def test_hand_written_attention_in_a_script_that_trains_on_the_cpu() -> None:
    # graykode/nlp-tutorial's BERT: the attention maps are dropped by the model and the script
    # never names a device. It was judged false (cpu-only) while the rule said the fused kernels
    # were the GPU's advice; SDPA's CPU kernel runs float32 attention 1.4-3.4x faster
    # (benchmarks/sdpa_cpu.py), so the CPU script is reported as the CUDA one is.
    source = """
        import math
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def forward(self, Q, K, V):
                scores = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(64)
                attn = nn.Softmax(dim=-1)(scores)
                return torch.matmul(attn, V)

        model = Net()
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            opt.step()
    """
    assert (8, "TP307") in _codes(source)
    on_gpu = source.replace("model = Net()", "model = Net().cuda()")
    assert (8, "TP307") in _codes(on_gpu)


VERBOSE = """\
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("-v", "--verbose", action="store_true")
parser.add_argument("--print_freq", type=int, default=10)
parser.add_argument("--log_grads", action="store_true")
args = parser.parse_args()
model = model.cuda()
for x, y in loader:
    loss = model(x.cuda()).sum()
    loss.backward()
    optimizer.step()
    if args.verbose:
        print("loss", loss.item())
    if args.verbose and not quiet:
        print("loss", loss.item(), flush=True)
    if args.log_grads:
        writer.add_scalar("loss", loss.item())
"""


def test_diagnostics_behind_an_option_off_by_default_are_not_every_step() -> None:
    # eriklindernoren/PyTorch-YOLOv3 (change-4): `if args.verbose:` prints the loss with
    # .item() each step, only under -v (store_true); judged false (an opt-in debug flag)
    def syncs(source: str) -> list[int]:
        return [line for line, code in _codes(source) if code == "TP201"]

    assert syncs(VERBOSE) == [19]  # an option not named for diagnostics: may be on
    on = VERBOSE.replace('"--verbose", action="store_true"', '"--verbose", default=True')
    assert syncs(on) == [15, 17, 19]


ACCUMULATED = """\
import torch

model = model.cuda()
for step, (x, y) in enumerate(loader):
    loss = model(x.cuda()).sum() / args.gradient_accumulation_steps
    loss.backward()
    if step % args.gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
    if step % args.gradient_accumulation_steps == 0:
        scheduler.step()
        metrics = losses.mean().tolist()
    if step % args.log_every == 0:
        print(loss.item())
"""


def test_a_gate_on_the_accumulation_count_is_every_optimizer_step_not_a_cadence() -> None:
    # allenai/open-instruct's reward_modeling.py (change-4): metrics read with .tolist() under
    # `training_step % args.gradient_accumulation_steps == 0`, beside scheduler.step(): every
    # optimizer step, judged true; a logging period stays a cadence
    syncs = [line for line, code in _codes(ACCUMULATED) if code == "TP201"]
    assert syncs == [12]


def test_a_sync_behind_an_opt_in_timing_option_is_not_every_step() -> None:
    # timm's train.py: `if args.synchronize_step: torch.cuda.synchronize()`, with
    # --synchronize-step a store_true for exact host timings; judged false (an opt-in)
    source = VERBOSE.replace('"--log_grads"', '"--synchronize-step"').replace(
        '    if args.log_grads:\n        writer.add_scalar("loss", loss.item())\n',
        "    if args.synchronize_step:\n        torch.cuda.synchronize()\n",
    )
    assert "torch.cuda.synchronize()" in source
    assert not [line for line, code in _codes(source) if code in ("TP201", "TP205")]
    always = source.replace('action="store_true")\nargs', "default=True)\nargs")
    assert [line for line, code in _codes(always) if code == "TP205"] == [19]


def test_a_models_blocks_of_the_same_file_run_every_step_through_their_containers() -> None:
    # ogb's nodeproppred/mag RGCN (MIT), shortened: the model's __init__ builds its layers into
    # an nn.ModuleList and its forward calls them as ``self.convs[i](...)``; a transformer's
    # ``for block in self.blocks: x = block(x)``. Neither call names the class, but what a model
    # builds its forward runs, as lint.project reads it for classes of other files.
    source = """
        import torch
        import torch.nn as nn

        class Conv(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)

            def forward(self, x):
                print(x.sum().item())
                return self.lin(x)

        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)

            def forward(self, x):
                return self.lin(x) * x.max().item()

        class Unused(nn.Module):
            def forward(self, x):
                return x.sum().item()

        class Net(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.convs = nn.ModuleList()
                for _ in range(n):
                    self.convs.append(Conv(d))
                self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

            def forward(self, x):
                for i in range(len(self.convs)):
                    x = self.convs[i](x)
                for block in self.blocks:
                    x = block(x)
                return x

        model = Net(4096, 24).cuda()
        for x in loader:
            x = x.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).sum()
            loss.backward()
            opt.step()
    """
    assert _codes(source) == [(11, "TP201"), (20, "TP201")]  # not Unused.forward
