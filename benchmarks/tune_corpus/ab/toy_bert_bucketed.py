"""(A/B variant of toy_bert.py: batches of similar lengths, by hand.)
A toy BERT: masked language modelling on synthetic token sequences from a random Markov chain.

Sequences have variable lengths and are padded per batch in a collate_fn with a key padding mask;
15% of tokens are masked with the 80/10/10 rule; AdamW with linear warm-up then linear decay.
"""

import argparse
import random
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

PAD, CLS, SEP, MASK = 0, 1, 2, 3
N_SPECIAL = 4


def make_markov_corpus(n_seqs, n_words, min_len, max_len, rng):
    # each word is followed by one of a few likely successors
    successors = rng.integers(0, n_words, size=(n_words, 4))
    probs = np.array([0.6, 0.2, 0.1, 0.1])
    seqs = []
    for _ in range(n_seqs):
        length = int(rng.integers(min_len, max_len + 1))
        choices = rng.choice(4, size=length, p=probs)
        jumps = rng.random(length) < 0.05
        w = int(rng.integers(n_words))
        seq = [w]
        for i in range(1, length):
            w = int(rng.integers(n_words)) if jumps[i] else int(successors[w, choices[i]])
            seq.append(w)
        seqs.append([CLS] + [t + N_SPECIAL for t in seq] + [SEP])
    return seqs


class SequenceDataset(Dataset):
    def __init__(self, seqs):
        self.seqs = seqs

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, idx):
        return torch.tensor(self.seqs[idx], dtype=torch.long)


class BucketBatchSampler:
    """Shuffled batches of sequences of similar length: shuffle, sort chunks of 50 batches by
    length, cut them into batches, shuffle the batches."""

    def __init__(self, lengths, batch_size, drop_last=True, chunk=50):
        self.lengths, self.batch_size = lengths, batch_size
        self.drop_last, self.chunk = drop_last, chunk

    def __iter__(self):
        order = torch.randperm(len(self.lengths)).tolist()
        size = self.batch_size * self.chunk
        batches = []
        for i in range(0, len(order), size):
            part = sorted(order[i : i + size], key=lambda k: self.lengths[k])
            for j in range(0, len(part), self.batch_size):
                b = part[j : j + self.batch_size]
                if len(b) == self.batch_size or not self.drop_last:
                    batches.append(b)
        for k in torch.randperm(len(batches)).tolist():
            yield batches[k]

    def __len__(self):
        n = len(self.lengths) // self.batch_size
        return n if self.drop_last else -(-len(self.lengths) // self.batch_size)


class MaskingCollator:
    def __init__(self, vocab_size, mask_prob=0.15):
        self.vocab_size = vocab_size
        self.mask_prob = mask_prob

    def __call__(self, batch):
        max_len = max(len(s) for s in batch)
        input_ids = torch.full((len(batch), max_len), PAD, dtype=torch.long)
        for i, s in enumerate(batch):
            input_ids[i, : len(s)] = s
        padding_mask = input_ids == PAD

        labels = input_ids.clone()
        special = (input_ids == PAD) | (input_ids == CLS) | (input_ids == SEP)
        prob = torch.full(input_ids.shape, self.mask_prob)
        prob.masked_fill_(special, 0.0)
        masked = torch.bernoulli(prob).bool()
        labels[~masked] = -100

        # 80% [MASK], 10% random token, 10% unchanged
        replace = torch.bernoulli(torch.full(input_ids.shape, 0.8)).bool() & masked
        input_ids[replace] = MASK
        randomize = torch.bernoulli(torch.full(input_ids.shape, 0.5)).bool() & masked & ~replace
        random_tokens = torch.randint(N_SPECIAL, self.vocab_size, input_ids.shape)
        input_ids[randomize] = random_tokens[randomize]
        return input_ids, padding_mask, labels


class ToyBert(nn.Module):
    def __init__(self, vocab_size, max_len, d_model=128, nhead=4, num_layers=2, dropout=0.1):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.emb_ln = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            d_model,
            nhead,
            dim_feedforward=4 * d_model,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.mlm_head = nn.Sequential(
            nn.Linear(d_model, d_model),
            nn.GELU(),
            nn.LayerNorm(d_model),
            nn.Linear(d_model, vocab_size),
        )

    def forward(self, input_ids, padding_mask):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.dropout(self.emb_ln(self.tok_emb(input_ids) + self.pos_emb(pos)))
        h = self.encoder(h, src_key_padding_mask=padding_mask)
        return self.mlm_head(h)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warmup-steps", type=int, default=40)
    parser.add_argument("--n-seqs", type=int, default=4000)
    parser.add_argument("--n-words", type=int, default=40)
    parser.add_argument("--min-len", type=int, default=8)
    parser.add_argument("--max-len", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    rng = np.random.default_rng(args.seed)
    seqs = make_markov_corpus(args.n_seqs, args.n_words, args.min_len, args.max_len, rng)
    vocab_size = args.n_words + N_SPECIAL
    lengths = [len(s) for s in seqs]
    print(f"{len(seqs)} sequences, lengths {min(lengths)}-{max(lengths)}, vocab {vocab_size}")

    loader = DataLoader(
        SequenceDataset(seqs),
        batch_sampler=BucketBatchSampler(lengths, args.batch_size, drop_last=False),
        num_workers=args.workers,
        collate_fn=MaskingCollator(vocab_size),
    )

    model = ToyBert(vocab_size, args.max_len + 2, d_model=args.d_model, num_layers=args.layers)
    print(f"{sum(p.numel() for p in model.parameters()) / 1e3:.1f}k parameters")

    no_decay = ["bias", "LayerNorm.weight", "ln.weight", "norm"]
    params = [
        {
            "params": [
                p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)
            ],
            "weight_decay": args.weight_decay,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(params, lr=args.lr)

    def lr_lambda(step):
        if step < args.warmup_steps:
            return (step + 1) / args.warmup_steps
        return max(0.0, (args.steps - step) / max(1, args.steps - args.warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    criterion = nn.CrossEntropyLoss(ignore_index=-100)

    step = 0
    running_loss = 0.0
    running_acc = 0.0
    start = time.time()
    model.train()
    while step < args.steps:
        for input_ids, padding_mask, labels in loader:
            logits = model(input_ids, padding_mask)
            loss = criterion(logits.view(-1, vocab_size), labels.view(-1))

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1

            with torch.no_grad():
                sel = labels != -100
                acc = (logits.argmax(-1)[sel] == labels[sel]).float().mean().item()
            running_loss += loss.item()
            running_acc += acc
            if step % args.log_every == 0:
                print(
                    f"step {step}: loss {running_loss / args.log_every:.4f}, "
                    f"masked acc {running_acc / args.log_every:.3f}, "
                    f"lr {scheduler.get_last_lr()[0]:.2e} ({time.time() - start:.1f}s)"
                )
                running_loss = 0.0
                running_acc = 0.0
            if step >= args.steps:
                break

    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
