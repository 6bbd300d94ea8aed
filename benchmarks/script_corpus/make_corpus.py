#!/usr/bin/env python
"""Materialise the script corpus: public training scripts at pinned commits, plus local data.

Every file taken from a repository is written byte for byte from the git blob at the pinned
commit; nothing fetched is edited.  The data the scripts expect (normally downloaded) is made
here instead, deterministically, from the Python standard library's own sources or from seeded
random numbers, so a run needs no network.

    python benchmarks/script_corpus/make_corpus.py --out .corpus/scripts
    python benchmarks/script_corpus/make_corpus.py --mirror /work/.mirror   # no network at all

Layout of OUT: one folder per repository, named ``owner+name``; ``corpus.json`` (beside this
file) gives each script's path, working folder and ``pythonpath`` relative to OUT.

Only the standard library, numpy and torch are used (torch only to run one upstream data
preparation script, ``time_sequence_prediction/generate_sine_wave.py``).  The two MNIST scripts
import torchvision, which is stood in for by ``stand_ins/torchvision`` beside this file (see
corpus.json's ``pythonpath``); their data is synthetic MNIST in the IDX format.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent

# Which files each pinned repository contributes.  A trailing "/" takes a whole folder.
SOURCES: dict[str, dict] = {
    "karpathy/nanoGPT": {
        "commit": "3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
        "files": [
            "LICENSE",
            "train.py",
            "model.py",
            "configurator.py",
            "config/train_shakespeare_char.py",
            "data/shakespeare_char/prepare.py",
            "data/shakespeare_char/readme.md",
        ],
    },
    "pytorch/examples": {
        "commit": "77f55b912142e11fcfdf5b530231fb9c52f181e8",
        "files": [
            "LICENSE",
            "word_language_model/README.md",
            "word_language_model/main.py",
            "word_language_model/data.py",
            "word_language_model/model.py",
            "word_language_model/generate.py",
            "word_language_model/requirements.txt",
            "time_sequence_prediction/train.py",
            "time_sequence_prediction/generate_sine_wave.py",
            "time_sequence_prediction/requirements.txt",
            "regression/main.py",
            "regression/requirements.txt",
            "gat/main.py",
            "gat/README.md",
            "gat/requirements.txt",
            "mnist_hogwild/README.md",
            "mnist_hogwild/main.py",
            "mnist_hogwild/train.py",
            "mnist_hogwild/requirements.txt",
            "vae/README.md",
            "vae/main.py",
            "vae/requirements.txt",
            "vae/results/.gitignore",
        ],
    },
    "karpathy/minGPT": {
        "commit": "37baab71b9abea1b76ab957409a1cc2fbfba8a26",
        "files": ["LICENSE", "mingpt/", "projects/chargpt/", "projects/adder/"],
    },
    "Lightning-AI/pytorch-lightning": {
        "commit": "7f0c3436cd3f6ad3753125672024fc415cbcb414",
        "files": [
            "LICENSE",
            "examples/pytorch/basics/transformer.py",
            "examples/fabric/language_model/train.py",
            "examples/fabric/language_model/README.md",
        ],
    },
    "lucidrains/x-transformers": {
        "commit": "9252ed7838021ee61e6c5be0930b3a9a88efdf06",
        "files": [
            "LICENSE",
            "pyproject.toml",
            "train_enwik8.py",
            "data/README.md",
            "x_transformers/",
        ],
    },
}


def repo_dirname(repo: str) -> str:
    return repo.replace("/", "+")


def git(gitdir: Path, *args: str, capture: bool = True) -> bytes:
    out = subprocess.run(
        ["git", "--git-dir", str(gitdir), *args],
        check=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return out.stdout if capture else b""


def find_mirror(mirror: Path, repo: str) -> Path | None:
    """A git dir for REPO under MIRROR: MIRROR/owner+name/repo, MIRROR/owner+name (bare), or a
    checkout's MIRROR/owner+name/repo/.git."""
    base = mirror / repo_dirname(repo)
    for cand in (base / "repo", base, base / "repo" / ".git"):
        if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
            return cand
    return None


def has_commit(gitdir: Path, commit: str) -> bool:
    probe = subprocess.run(
        ["git", "--git-dir", str(gitdir), "cat-file", "-e", commit + "^{commit}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return probe.returncode == 0


def fetch_commit(cache: Path, repo: str, commit: str) -> Path:
    """A bare git dir under CACHE holding COMMIT of github.com/REPO (shallow fetch by sha)."""
    gitdir = cache / repo_dirname(repo)
    if not (gitdir / "HEAD").is_file():
        gitdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", str(gitdir)], check=True)
    if not has_commit(gitdir, commit):
        url = f"https://github.com/{repo}.git"
        subprocess.run(
            ["git", "--git-dir", str(gitdir), "fetch", "-q", "--depth", "1", url, commit],
            check=True,
        )
    return gitdir


def list_blobs(
    gitdir: Path, commit: str, wanted: list[str], suffixes: tuple[str, ...] = ()
) -> list[tuple[str, str, str]]:
    """(mode, sha, path) for every file named in WANTED (a trailing '/' takes a folder, and ""
    the whole tree).

    With SUFFIXES, a folder contributes only the files whose names end in one of them."""
    specs = [] if "" in wanted else [w.rstrip("/") for w in wanted]
    raw = git(gitdir, "ls-tree", "-r", "-z", commit, "--", *specs)
    rows = []
    for rec in raw.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        name = path.decode()
        if kind == "blob" and (name in wanted or not suffixes or name.endswith(suffixes)):
            rows.append((mode, sha, name))
    found = {p for _, _, p in rows}
    for w in wanted:
        if w == "":
            if not found:
                raise SystemExit(f"no files at {commit}")
        elif w.endswith("/"):
            if not any(p.startswith(w) for p in found):
                raise SystemExit(f"{w} is empty or missing at {commit}")
        elif w not in found:
            raise SystemExit(f"{w} is missing at {commit}")
    return rows


CONTEXT_BYTES = 1 << 20


def materialise_repo(
    repo: str,
    spec: dict,
    out: Path,
    mirror: Path | None,
    cache: Path,
    suffixes: tuple[str, ...] = (),
    context: tuple[str, ...] = (),
) -> dict:
    """Write the files of ``spec`` whose names end in ``suffixes`` under ``out``; also those
    ending in ``context`` (a project's configuration files, which name its classes), where
    their blob is present and at most ``CONTEXT_BYTES`` (a mirror may lack one)."""
    commit = spec["commit"]
    gitdir = find_mirror(mirror, repo) if mirror else None
    if gitdir is None or not has_commit(gitdir, commit):
        gitdir = fetch_commit(cache, repo, commit)
    dest = out / repo_dirname(repo)
    manifest = {}
    for mode, sha, path in list_blobs(gitdir, commit, spec["files"], suffixes + context):
        if context and path.endswith(context) and not path.endswith(suffixes):
            size = subprocess.run(
                ["git", "--git-dir", str(gitdir), "cat-file", "-s", sha],
                capture_output=True,
                text=True,
            )
            if size.returncode != 0 or int(size.stdout) > CONTEXT_BYTES or mode == "120000":
                continue  # absent from the mirror, a data file, or a link: context only
        data = git(gitdir, "cat-file", "blob", sha)
        # the blob id is recomputed so that a truncated or absent blob cannot pass silently
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != sha:
            raise SystemExit(f"{repo}@{commit}:{path}: blob is incomplete in {gitdir}")
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        if mode == "120000":
            # a symbolic link's blob is its target: a link, as a checkout makes it (written as a
            # file, Practical_RL's ``runners.py -> ../week06_policy_based/runners.py`` became a
            # one-line file that is not Python)
            target.symlink_to(os.fsdecode(data))
        else:
            target.write_bytes(data)
            os.chmod(target, 0o755 if mode == "100755" else 0o644)
        manifest[path] = sha
    return {"repo": repo, "commit": commit, "files": manifest}


# --------------------------------------------------------------------------- local text


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo"}
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if skip.intersection(rel.parts[:-1]):
            continue
        files.append(path)
    return files


def stdlib_text(max_chars: int) -> str:
    """Printable-ASCII text from the standard library's sources, in a fixed file order."""
    parts, total = [], 0
    for path in stdlib_files():
        text = path.read_text(encoding="utf-8", errors="ignore")
        text = text.encode("ascii", "ignore").decode("ascii").replace("\t", "    ")
        text = "".join(ch for ch in text if ch == "\n" or " " <= ch <= "~")
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return "".join(parts)[:max_chars]


TOKEN = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


def word_lines(num_tokens: int, vocab: int) -> list[str]:
    """Lines of space-separated tokens (words, numbers, punctuation) from stdlib sources.

    Like WikiText, rare words are replaced by <unk>, so the vocabulary is at most VOCAB.
    """
    lines, count = [], 0
    for raw in stdlib_text(num_tokens * 6).splitlines():
        toks = TOKEN.findall(raw)
        if not toks:
            continue
        lines.append(toks)
        count += len(toks)
        if count >= num_tokens:
            break
    freq = collections.Counter(t for toks in lines for t in toks)
    keep = {w for w, _ in sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[: vocab - 1]}
    return [" " + " ".join(t if t in keep else "<unk>" for t in toks) + " " for toks in lines]


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


# --------------------------------------------------------------------------- per-script data


def data_nanogpt(root: Path) -> None:
    """data/shakespeare_char/{train.bin,val.bin,meta.pkl}: char ids as uint16, 90/10 split."""
    text = stdlib_text(1_000_000)
    alphabet = sorted(set(text))
    index = {ch: i for i, ch in enumerate(alphabet)}
    ids = np.fromiter((index[ch] for ch in text), dtype=np.uint16, count=len(text))
    cut = int(len(ids) * 0.9)
    folder = root / "data" / "shakespeare_char"
    folder.mkdir(parents=True, exist_ok=True)
    ids[:cut].tofile(folder / "train.bin")
    ids[cut:].tofile(folder / "val.bin")
    meta = {"vocab_size": len(alphabet), "itos": dict(enumerate(alphabet)), "stoi": index}
    with open(folder / "meta.pkl", "wb") as fh:
        pickle.dump(meta, fh)


def data_word_lm(root: Path) -> None:
    """word_language_model/data/localtext/{train,valid,test}.txt (a small WikiText-2 stand-in)."""
    lines = word_lines(110_000, 10_000)
    n = len(lines)
    folder = root / "word_language_model" / "data" / "localtext"
    write_lines(folder / "train.txt", lines[: int(n * 0.8)])
    write_lines(folder / "valid.txt", lines[int(n * 0.8) : int(n * 0.9)])
    write_lines(folder / "test.txt", lines[int(n * 0.9) :])


def data_sine(root: Path) -> None:
    """time_sequence_prediction/traindata.pt, made by the repository's own generator script."""
    folder = root / "time_sequence_prediction"
    subprocess.run([sys.executable, "generate_sine_wave.py"], cwd=folder, check=True)


def data_cora(root: Path) -> None:
    """gat/cora/{cora.content,cora.cites}: a synthetic graph in Cora's file format.

    2000 papers (Cora has 2708), 1433 binary word features, 7 classes, 4000 citations;
    features and citations lean towards each paper's class so that the task is learnable.
    """
    rng = np.random.RandomState(1234)
    n_nodes, n_feat, n_class, n_edges = 2000, 1433, 7, 4000
    labels = rng.randint(0, n_class, n_nodes)
    profiles = [rng.choice(n_feat, 120, replace=False) for _ in range(n_class)]
    feats = np.zeros((n_nodes, n_feat), dtype=np.int8)
    for i in range(n_nodes):
        k = rng.randint(10, 30)
        own = rng.choice(profiles[labels[i]], int(k * 0.7), replace=False)
        other = rng.randint(0, n_feat, k - len(own))
        feats[i, own] = 1
        feats[i, other] = 1
    ids = rng.choice(np.arange(30, 1_200_000), n_nodes, replace=False)
    names = [f"Topic_{c}" for c in range(n_class)]
    by_class = [np.flatnonzero(labels == c) for c in range(n_class)]
    edges = set()
    while len(edges) < n_edges:
        a = rng.randint(n_nodes)
        same_class = rng.rand() < 0.8
        b = rng.choice(by_class[labels[a]]) if same_class else rng.randint(n_nodes)
        if a != b:
            edges.add((int(a), int(b)))
    folder = root / "gat" / "cora"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "cora.content", "w") as fh:
        for i in range(n_nodes):
            fh.write(f"{ids[i]}\t" + "\t".join(map(str, feats[i])) + f"\t{names[labels[i]]}\n")
    with open(folder / "cora.cites", "w") as fh:
        for a, b in sorted(edges):
            fh.write(f"{ids[a]}\t{ids[b]}\n")


def data_chargpt(root: Path) -> None:
    """projects/chargpt/input.txt: plain text for the character model."""
    path = root / "projects" / "chargpt" / "input.txt"
    path.write_text(stdlib_text(400_000), encoding="ascii")


def data_lightning(root: Path, train_samples: int = 60, vocab: int = 600) -> None:
    """data/wikitext-2.txt beside both Lightning examples (the demo dataset's cache file).

    Both scripts split the 35-token samples into (rest, 2000, 2000) and run 20 epochs, so the
    file is sized to leave TRAIN_SAMPLES training samples, and the vocabulary is kept small.
    """
    need = 35 * (4000 + train_samples + 1) + 1  # tokens, counting the <eos> added per line
    lines, total = [], 0
    for line in word_lines(need, vocab):
        lines.append(line)
        total += len(line.split()) + 1
        if total >= need:
            break
    for folder in ("examples/pytorch/basics", "examples/fabric/language_model"):
        write_lines(root / folder / "data" / "wikitext-2.txt", lines)


def data_enwik8(root: Path) -> None:
    """data/enwik8.gz: 91 MB of text (the script reads 95e6 bytes and validates past 90e6).

    The bytes are runs of consecutive lines of stdlib source, drawn at random (seeded) from a
    pool small enough for gzip's 32 KiB window, which keeps the compressed file small.
    """
    pool = [ln.encode("ascii") + b"\n" for ln in stdlib_text(28_000).splitlines() if ln.strip()]
    rng = np.random.RandomState(8)
    target = 91_000_000
    parts, size = [], 0
    while size < target:
        start = rng.randint(0, len(pool))
        run = b"".join(pool[start : start + rng.randint(1, 17)])
        parts.append(run)
        size += len(run)
    data = b"".join(parts)[:target]
    path = root / "data" / "enwik8.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) as fh:
        fh.write(data)


# Seven-segment strokes, each two corners of a 1 x 2 box (x right, y down), and the segments
# lit for each digit: a top, b top right, c bottom right, d bottom, e bottom left, f top left,
# g middle.
_SEGMENTS = {
    "a": ((0, 0), (1, 0)),
    "b": ((1, 0), (1, 1)),
    "c": ((1, 1), (1, 2)),
    "d": ((0, 2), (1, 2)),
    "e": ((0, 1), (0, 2)),
    "f": ((0, 0), (0, 1)),
    "g": ((0, 1), (1, 1)),
}
_DIGITS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abcdfg"]


def mnist_images(labels: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """28 x 28 uint8 images of digit-like strokes, one per label.

    Each digit is drawn as its seven-segment strokes, with per-image jitter: size, position,
    slant, stroke width and brightness, and each stroke's ends moved a little, anti-aliased
    over about a pixel; like MNIST, the background is 0 and about a fifth of the pixels are lit.
    """
    n = len(labels)
    seg_names = list(_SEGMENTS)
    ends = np.array([_SEGMENTS[s] for s in seg_names], dtype=np.float32)  # 7 x 2 x 2
    lit = np.array([[s in _DIGITS[d] for s in seg_names] for d in range(10)])  # 10 x 7
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    px = np.stack([xx.ravel(), yy.ravel()], axis=1)  # 784 x 2
    out = np.empty((n, 28, 28), dtype=np.uint8)
    for lo in range(0, n, 500):
        k = min(500, n - lo)
        half_h = rng.uniform(7.5, 9.0, k).astype(np.float32)[:, None, None]  # half the height
        width = rng.uniform(6.5, 10.5, k).astype(np.float32)[:, None, None]
        slant = rng.uniform(-0.25, 0.25, k).astype(np.float32)[:, None, None]
        cx = 14 + rng.uniform(-1.5, 1.5, k).astype(np.float32)[:, None, None]
        cy = 14 + rng.uniform(-1.0, 1.0, k).astype(np.float32)[:, None, None]
        stroke = rng.uniform(0.9, 1.7, k).astype(np.float32)
        bright = rng.uniform(0.8, 1.0, k).astype(np.float32)
        pts = ends[None] + rng.normal(0, 0.07, (k, 7, 2, 2)).astype(np.float32)
        ux, uy = pts[..., 0] - 0.5, pts[..., 1] - 1.0  # box centred on 0: x in +-0.5, y in +-1
        sx = cx + ux * width - uy * half_h * slant
        sy = cy + uy * half_h
        a = np.stack([sx[..., 0], sy[..., 0]], -1)[:, :, None, :]  # k x 7 x 1 x 2
        b = np.stack([sx[..., 1], sy[..., 1]], -1)[:, :, None, :]
        ab = b - a
        t = ((px[None, None] - a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-6)
        near = a + np.clip(t, 0, 1)[..., None] * ab
        dist = np.sqrt(((px[None, None] - near) ** 2).sum(-1))  # k x 7 x 784
        dist = np.where(lit[labels[lo : lo + k]][..., None], dist, np.inf).min(axis=1)
        ink = np.clip(stroke[:, None] + 0.5 - dist, 0, 1) * bright[:, None]
        out[lo : lo + k] = np.round(ink * 255).astype(np.uint8).reshape(k, 28, 28)
    return out


def write_idx(path: Path, array: np.ndarray) -> None:
    """ARRAY (uint8) as an uncompressed IDX file: magic 0x0000 08 NDIM, big-endian int32 sizes."""
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, dtype=">i4").tobytes()
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def data_mnist(root: Path, train: int = 6000, test: int = 1000) -> None:
    """data/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte: synthetic MNIST.

    The hogwild and VAE scripts both read MNIST('../data') from their own folders, so one copy
    serves both.  TRAIN and TEST images (MNIST has 60000 and 10000), labels uniform over 0-9,
    seeded; uncompressed, as torchvision leaves them in raw/ after a download.
    """
    rng = np.random.RandomState(2718)
    folder = root / "data" / "MNIST" / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", test)):
        labels = rng.randint(0, 10, n).astype(np.uint8)
        write_idx(folder / f"{prefix}-images-idx3-ubyte", mnist_images(labels, rng))
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels)


DATA = {
    "karpathy/nanoGPT": [data_nanogpt],
    "pytorch/examples": [data_word_lm, data_sine, data_cora, data_mnist],
    "karpathy/minGPT": [data_chargpt],
    "Lightning-AI/pytorch-lightning": [data_lightning],
    "lucidrains/x-transformers": [data_enwik8],
}


def write_manifest(out: Path, manifest: list[dict]) -> None:
    """OUT/MANIFEST.json: these repositories' entries, replacing theirs, beside the others'."""
    path = out / "MANIFEST.json"
    old = json.loads(path.read_text()) if path.is_file() else []
    done = {m["repo"] for m in manifest}
    merged = [m for m in old if m["repo"] not in done] + manifest
    path.write_text(json.dumps(merged, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=REPO_ROOT / ".corpus" / "scripts")
    ap.add_argument(
        "--mirror",
        type=Path,
        default=None,
        help="folder of bare mirrors named owner+name (e.g. /work/.mirror)",
    )
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="repository owner/name to materialise (repeatable; default: all)",
    )
    ap.add_argument("--no-data", action="store_true", help="fetch the files only")
    args = ap.parse_args(argv)

    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = out / ".git-cache"
    repos = args.only or list(SOURCES)
    manifest = []
    for repo in repos:
        if repo not in SOURCES:
            raise SystemExit(f"unknown repository {repo}; known: {', '.join(SOURCES)}")
        print(f"[corpus] {repo}@{SOURCES[repo]['commit'][:12]}", flush=True)
        manifest.append(materialise_repo(repo, SOURCES[repo], out, args.mirror, cache))
        if not args.no_data:
            for make in DATA.get(repo, []):
                print(f"[corpus]   data: {make.__name__}", flush=True)
                make(out / repo_dirname(repo))
    write_manifest(out, manifest)
    print(f"[corpus] done: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
