#!/usr/bin/python3
"""PyTorch side of bench/train_vs_pytorch.sh: trains the Fashion-MNIST MLP or small CNN the
way examples/fashion_mnist_{mlp,cnn}.ini do in tfserve-train, and prints per-epoch figures.

Same as tfserve-train: the IDX .gz files read here (gzip + numpy), pixels / 255, Glorot uniform
kernels and zero biases (Keras' defaults), batch 64 with the last, smaller batch kept, Adam 1e-3
(betas 0.9/0.999, eps 1e-7 as in Keras), softmax cross-entropy averaged over the batch, a
reshuffle each epoch from a seeded generator. torch.optim.Adam adds eps to the bias-corrected
sqrt(v) while TensorFlow's ApplyAdam adds it before the correction; at eps 1e-7 that is noise.

Timing: `seconds` covers the training steps of an epoch only (batch gathering, forward,
backward, optimizer step), not the evaluation on the test set after it. PyTorch's best
configuration on the 2-core machines (the project's baseline measurements): 2 intra-op threads,
OPENBLAS_NUM_THREADS=1 (set here before torch loads, unless the caller set it).

    /usr/bin/python3 bench/train_pytorch.py --model=mlp --epochs=5 --json=out.json

Needs Debian's python3-torch and python3-numpy (only with /usr/bin/python3). --json writes the
same fields tfserve-train --metrics_json writes.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (.gz or plain) as a numpy array of its dtype and shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        sys.exit(f"{path}: not an IDX file")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in dtypes:
        sys.exit(f"{path}: IDX type 0x{raw[2]:02x} unknown")
    rank = raw[3]
    dims = struct.unpack(f">{rank}I", raw[4:4 + 4 * rank])
    data = np.frombuffer(raw, dtype=dtypes[raw[2]], offset=4 + 4 * rank)
    if data.size != math.prod(dims):
        sys.exit(f"{path}: {data.size} values for dims {dims}")
    return data.reshape(dims)


def load(data_dir, prefix, model):
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float32) / np.float32(255.0))
    x = x.reshape(-1, 784) if model == "mlp" else x.reshape(-1, 1, 28, 28)
    return x.contiguous(), torch.from_numpy(y.astype(np.int64))


def build(model):
    if model == "mlp":
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                            nn.Linear(256, 10))
    else:
        # NCHW here, NHWC in tfserve: the same layers; only dense1's rows come in another order.
        net = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(),
                            nn.Linear(1024, 10))
    for m in net.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            # Keras' fans for a conv kernel are kh*kw*in and kh*kw*out: PyTorch's are the same.
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return net


def evaluate(net, x, y, batch=1000):
    net.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            out = net(x[i:i + batch])
            loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    net.train()
    return loss / x.shape[0], correct / x.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max_steps", type=int, default=0, help="stop after this many steps")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--flush_denormal", action="store_true",
                    help="flush denormals to zero (TensorFlow's default; PyTorch's is off)")
    ap.add_argument("--json", help="write the per-epoch figures there")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    if a.flush_denormal and not torch.set_flush_denormal(True):
        sys.exit("--flush_denormal: not supported on this CPU")
    torch.manual_seed(a.seed)
    x, y = load(a.data, "train", a.model)
    tx, ty = load(a.data, "t10k", a.model)
    net = build(a.model)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    n = x.shape[0]
    print(f"pytorch {torch.__version__}: {a.model}, {n} training examples, batch {a.batch_size},"
          f" {torch.get_num_threads()} threads, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '(libgomp default)')}"
          f"{', denormals flushed' if a.flush_denormal else ''}", flush=True)
    res = {"tool": f"pytorch {torch.__version__}", "epochs": 0, "global_step": 0, "seconds": [],
           "train_loss": [], "train_accuracy": [], "eval_loss": [], "eval_accuracy": []}
    step = 0
    for epoch in range(a.epochs):
        gen = torch.Generator().manual_seed(a.seed + epoch)
        perm = torch.randperm(n, generator=gen)
        loss_sum, correct, seen = 0.0, 0, 0
        start = time.perf_counter()
        for i in range(0, n, a.batch_size):
            if a.max_steps and step >= a.max_steps:
                break
            idx = perm[i:i + a.batch_size]
            xb, yb = x[idx], y[idx]
            out = net(xb)
            loss = F.cross_entropy(out, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            # tfserve-train reports the epoch's running loss and accuracy too: same work here.
            loss_sum += loss.item() * yb.shape[0]
            correct += (out.argmax(1) == yb).sum().item()
            seen += yb.shape[0]
        secs = time.perf_counter() - start
        if seen == 0:
            break
        el, ea = evaluate(net, tx, ty)
        for k, v in (("seconds", secs), ("train_loss", loss_sum / seen),
                     ("train_accuracy", correct / seen), ("eval_loss", el), ("eval_accuracy", ea)):
            res[k].append(v)
        res["epochs"], res["global_step"] = epoch + 1, step
        print(f"epoch {epoch + 1}/{a.epochs}: {seen} examples in {secs:.2f} s ({seen / secs:.0f}"
              f" ex/s) - loss {loss_sum / seen:.4f} - accuracy {correct / seen:.4f}"
              f"  eval: loss {el:.4f} - accuracy {ea:.4f}", flush=True)
        if a.max_steps and step >= a.max_steps:
            break
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
