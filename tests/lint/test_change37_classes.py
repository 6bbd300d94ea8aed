"""Classes of findings judged on change-37 (issue 32), each cut from the code it was seen in and
checked the other way round: what a GPU training step does is still reported."""

from __future__ import annotations

from lint_findings import findings, notebook_findings

# RITM's interactive-segmentation trainer drops the previous mask of a random share of the batch:
# the mask is a NumPy array of booleans, so its count is known on the host and nothing waits.
DROPPED_MASKS = """
import numpy as np
import torch

net = Net().cuda()
optimizer = torch.optim.Adam(net.parameters())
for batch in loader:
    image, prev_output = batch["image"].cuda(), batch["prev"].cuda()
    {mask}
    prev_output[zero_mask] = torch.zeros_like(prev_output[zero_mask])
    loss = net(torch.cat((image, prev_output), dim=1)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_mask_numpy_computes_selects_without_a_wait_and_a_device_comparison_still_waits() -> None:
    host = "zero_mask = np.random.random(size=prev_output.size(0)) < drop_prob"
    assert findings(DROPPED_MASKS.format(mask=host), "TP203") == []
    # on the device: the write through the mask and the read of it each wait
    device = "zero_mask = torch.rand(prev_output.size(0), device='cuda') < drop_prob"
    assert findings(DROPPED_MASKS.format(mask=device), "TP203") == [("TP203", 10)] * 2
    named = "zero_mask = prev_output.sum((1, 2, 3)) > 0"
    assert findings(DROPPED_MASKS.format(mask=named), "TP203") == [("TP203", 10)] * 2


# The Annotated Transformer's check_outputs: a loop that draws examples from the validation
# loader and decodes them greedily trains nothing; the same loop over the training loader, or one
# that trains on what it draws, is still a step loop.
EXAMPLES = """
import torch

def greedy_decode(model, src, max_len):
    ys = torch.zeros(1, 1).type_as(src.data)
    for i in range(max_len - 1):
        prob = model.generator(model.decode(src, ys)[:, -1])
        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(prob.argmax())], dim=1)
    return ys

def train(train_dataloader, model, optimizer):
    for b in train_dataloader:
        model(b[0].cuda()).mean().backward()
        optimizer.step()

def check_outputs({loader}, model, n_examples=15):
    for idx in range(n_examples):
        b = next(iter({loader}))
        out = greedy_decode(model, b[0].cuda(), 64)
        print(vocab.get_itos()[out[0, 1]])
"""


def test_a_loop_drawing_from_the_validation_loader_is_evaluation() -> None:
    assert findings(EXAMPLES.format(loader="valid_dataloader"), "TP207") == []
    assert findings(EXAMPLES.format(loader="train_dataloader"), "TP207") == [
        ("TP207", 5),
        ("TP207", 8),
    ]
    trains = EXAMPLES.format(loader="valid_dataloader").replace(
        "print(", "out.float().mean().backward()\n        print("
    )
    assert findings(trains, "TP207") == [("TP207", 5), ("TP207", 8)]


# Deep Learning Zero To All's and DeepSNAP's test passes after model.eval() without no_grad:
# the models are a few thousand weights, whose recorded history is negligible; a model the file
# does not size is still reported.
EVALUATION = """
import torch

linear1 = torch.nn.Linear(784, 32)
linear2 = torch.nn.Linear(32, 10)
model = torch.nn.Sequential(linear1, torch.nn.ReLU(), linear2).cuda()
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(15):
    model.train()
    for x, y in train_loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    for x, y in test_loader:
        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()
"""


def test_an_evaluation_pass_of_a_small_model_is_left_alone_and_of_a_large_one_reported() -> None:
    assert findings(EVALUATION, "TP403") == []
    large = EVALUATION.replace("(784, 32)", "(784, 4096)").replace("(32, 10)", "(4096, 4096)")
    assert findings(large, "TP403") == [("TP403", 16)]
    unknown = EVALUATION.replace("torch.nn.Linear(784, 32)", "make_layer(784)")
    assert findings(unknown, "TP403") == [("TP403", 16)]


# Deep Learning Zero To All's lab-11-1 turns CUDA off by hand: ``device = 'cpu'`` with the CUDA
# line commented out, and its seeding under ``if device == 'cuda':`` never runs. A CPU run wants
# no workers; the same file with the CUDA line back is a GPU run.
CPU_BY_HAND = """
import torch
import torchvision.datasets as dsets
import torchvision.transforms as transforms

{device}
torch.manual_seed(777)
if device == 'cuda':
    torch.cuda.manual_seed_all(777)
mnist_train = dsets.MNIST(root='MNIST_data/', train=True, transform=transforms.ToTensor())
data_loader = torch.utils.data.DataLoader(dataset=mnist_train, batch_size=100, shuffle=True)
model = torch.nn.Linear(784, 10).to(device)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(15):
    for X, Y in data_loader:
        X, Y = X.view(-1, 784).to(device), Y.to(device)
        loss = torch.nn.functional.cross_entropy(model(X), Y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_cuda_branch_of_a_device_bound_to_the_cpu_shows_no_gpu_run() -> None:
    assert findings(CPU_BY_HAND.format(device="device = 'cpu'"), "TP101") == []
    gpu = "device = 'cuda' if torch.cuda.is_available() else 'cpu'"
    assert findings(CPU_BY_HAND.format(device=gpu), "TP101") == [("TP101", 11)]


# Deep Learning Zero To All's ensemble: each model of a list trains itself in a method of its
# class; the loop over the batches is the training loop, not an evaluation pass without no_grad.
ENSEMBLE = """
import torch

class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4096, 4096)
        self.optimizer = torch.optim.Adam(self.parameters())

    def forward(self, x):
        return self.fc(x)

    def train_model(self, x, y):
        self.train()
        self.optimizer.zero_grad()
        cost = torch.nn.functional.mse_loss(self.forward(x), y)
        cost.backward()
        self.optimizer.step()
        return cost

models = []
for m in range(2):
    models.append(CNN().to('cuda'))
for epoch in range(15):
    for X, Y in data_loader:
        X, Y = X.to('cuda'), Y.to('cuda')
        for m_idx, m in enumerate(models):
            cost = m.{method}(X, Y)
"""


def test_a_loop_over_a_list_of_a_classs_instances_runs_their_methods() -> None:
    assert findings(ENSEMBLE.format(method="train_model"), "TP403") == []
    assert findings(ENSEMBLE.format(method="train_model"), "TP302") == [("TP302", 25)]
    evaluating = ENSEMBLE.replace("cost.backward()", "pass")
    evaluating = evaluating.replace("self.optimizer.step()", "pass")
    assert findings(evaluating.format(method="train_model"), "TP403") == [("TP403", 25)]


def test_a_loop_that_ends_in_break_shows_one_batch_and_trains_nothing() -> None:
    # Deep Learning Zero To All's visdom notebook: the loader is read once to draw a batch.
    cells = [
        "import torch\nimport torchvision\nimport visdom\nvis = visdom.Visdom()\n"
        "MNIST = torchvision.datasets.MNIST(root='.', train=True, download=True)\n"
        "model = torch.nn.Linear(784, 10).cuda()\n",
        "data_loader = torch.utils.data.DataLoader(dataset=MNIST, batch_size=32)\n",
        "for num, value in enumerate(data_loader):\n    vis.images(value[0])\n    break\n",
    ]
    assert notebook_findings(cells, "TP101") == []
    trains = cells[2].replace("    break\n", "    model(value[0].cuda()).sum().backward()\n")
    assert notebook_findings([*cells[:2], trains], "TP101") == [("TP101", 2, 1)]


# VQ-VAE-2's (and maskrcnn-benchmark's) pickle-based all_gather: each rank's byte count and bytes
# come back to the host to be unpickled, which is what the helper is for; the caller that
# gathers a Python float every step is what costs, and is reported there.
GATHER = """
import pickle
import torch
import torch.distributed as dist

def all_gather(data):
    buffer = pickle.dumps(data)
    tensor = torch.ByteTensor(torch.ByteStorage.from_buffer(buffer)).to("cuda")
    local_size = torch.IntTensor([tensor.numel()]).to("cuda")
    size_list = [torch.IntTensor([1]).to("cuda") for _ in range(dist.get_world_size())]
    dist.all_gather(size_list, local_size)
    size_list = [int(size.item()) for size in size_list]
    tensor_list = [torch.ByteTensor(size=(max(size_list),)).to("cuda") for _ in size_list]
    dist.all_gather(tensor_list, tensor)
    return [
        pickle.loads(t.cpu().numpy().tobytes()[:size]) for size, t in zip(size_list, tensor_list)
    ]

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
for img, label in loader:
    loss = model(img.cuda()).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    comm = all_gather({"mse_sum": loss.item()})
"""


def test_the_reads_of_a_pickle_based_gather_are_its_purpose_and_its_callers_read_is_reported():
    assert findings(GATHER, "TP201") == [("TP201", 26)]
    plain = GATHER.replace("pickle.dumps(data)", "bytes(data)").replace("pickle.loads(", "list(")
    assert findings(plain, "TP201") == [("TP201", 12), ("TP201", 16), ("TP201", 26)]


# RITM's iterative training simulates the user's next click on each step's prediction: OpenCV's
# distance transform runs on the host, so the prediction must come back first.
CLICKS = """
import cv2
import numpy as np
import torch

def get_next_points(pred, gt, points):
    pred = pred.cpu().numpy()[:, 0, :, :]
    gt = gt.cpu().numpy()[:, 0, :, :] > 0.5
    fn_mask = np.logical_and(gt, pred < 0.49)
    fn_mask = np.pad(fn_mask, ((0, 0), (1, 1), (1, 1)), "constant").astype(np.uint8)
    for bindx in range(fn_mask.shape[0]):
        {use}
    return points

net = Net().cuda()
optimizer = torch.optim.Adam(net.parameters())
for image, gt, points in loader:
    prev = torch.sigmoid(net(image.cuda(), points))
    points = get_next_points(prev, gt.cuda(), points)
    loss = net(image.cuda(), points).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_read_that_opencv_computes_on_is_needed_and_one_only_summed_is_reported() -> None:
    cv = "dt = cv2.distanceTransform(fn_mask[bindx], cv2.DIST_L2, 5)\n        points.append(dt)"
    assert findings(CLICKS.format(use=cv), "TP201") == []
    summed = "points.append(fn_mask[bindx].sum())"
    assert findings(CLICKS.format(use=summed), "TP201") == [("TP201", 7), ("TP201", 8)]


# AlpacaFarm's OPT layer: FlashAttention when there is no KV cache (training), a hand-written
# path only for cached decoding; the same hand-written path alone is reported.
FLASH_FALLBACK = """
import torch
from flash_attn.flash_attn_interface import flash_attn_unpadded_func

def attend(q, k, v, past_key_value=None):
    if past_key_value is None:
        return {fused}
    scores = torch.bmm(q, k.transpose(1, 2))
    probs = torch.nn.functional.softmax(scores, dim=-1)
    return torch.bmm(probs, v)
"""


def test_hand_written_attention_beside_a_flash_attention_kernel_is_a_fallback() -> None:
    fused = "flash_attn_unpadded_func(q, k, v, None, None, 0, 0, 0.0, causal=True)"
    assert findings(FLASH_FALLBACK.format(fused=fused), "TP307") == []
    assert findings(FLASH_FALLBACK.format(fused="None"), "TP307") == [("TP307", 8)]


# TRL's PPO trainer: each update draws a batch, rolls out, then runs epochs of minibatch steps;
# its metrics are read once an update, after them. A read in the minibatch loop is every step;
# and an update loop that itself steps the optimizer is a step loop, its reads every step.
UPDATES = """
import torch

model = Policy().cuda()
optimizer = torch.optim.Adam(model.parameters())
iter_dataloader = iter(dataloader)
for update in range(1, num_updates + 1):
    data = next(iter_dataloader)
    queries = data["input_ids"].cuda()
    responses = model.generate(queries)
    for ppo_epoch_idx in range(num_ppo_epochs):
        for start in range(0, queries.shape[0], mini_batch_size):
            loss = model(queries[start:start + mini_batch_size], responses).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            {inner}
    {outer}
    metrics["objective/kl"] = kl.mean().item()
"""


def test_an_update_loops_own_reads_run_once_an_update_and_its_inner_steps_are_reported() -> None:
    assert findings(UPDATES.format(inner="pass", outer="pass"), "TP201") == []
    inner = "stats.append(loss.item())"
    assert findings(UPDATES.format(inner=inner, outer="pass"), "TP201") == [("TP201", 17)]
    outer = "model(queries).mean().backward()\n    optimizer.step()"
    assert findings(UPDATES.format(inner="pass", outer=outer), "TP201") == [("TP201", 20)]


# TRL's generalized JSD loss: ``beta`` is the config's float until the ``else`` of the test makes
# it a tensor; the test reads the float. A parameter that is a tensor when passed, or one made a
# tensor before the test, is still read on the device.
JSD = """
import torch
import torch.nn.functional as F

def jsd(student_logits, teacher_logits, beta=0.5):
    student, teacher = F.log_softmax(student_logits, -1), F.log_softmax(teacher_logits, -1)
    {before}
    if beta == 0:
        return F.kl_div(student, teacher, log_target=True)
    elif beta == 1:
        return F.kl_div(teacher, student, log_target=True)
    else:
        beta = torch.tensor(beta, dtype=student.dtype, device=student.device)
        return beta * F.kl_div(student, teacher, log_target=True)

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
for x, t in loader:
    loss = jsd(model(x.cuda()), t.cuda(), beta=0.5)
    loss.backward()
    optimizer.step()
"""


def test_a_parameter_made_a_tensor_only_below_its_test_is_read_as_passed() -> None:
    assert findings(JSD.format(before="pass"), "TP204") == []
    made = "beta = torch.tensor(beta, device=student.device)"
    assert findings(JSD.format(before=made), "TP204") == [("TP204", 8), ("TP204", 10)]
    passed = JSD.format(before="pass").replace("beta=0.5)", "beta=torch.sigmoid(w.cuda()))")
    assert findings(passed, "TP204") == [("TP204", 8), ("TP204", 10)]
