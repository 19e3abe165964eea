#!/usr/bin/python3
"""Independent float64 reference of hpcml-train's math, for trainer_test.

Reads a JSON case (initial parameters, batches, hyper-parameters) written by
the C++ test and prints the JSON list of losses, one per step, computed with
numpy: MLP forward/backward, softmax cross-entropy or MSE, global-norm
clipping, AdamW (decoupled weight decay on weights only), linear warm-up then
cosine learning rate. Run with /usr/bin/python3: the python3 first on PATH on
these machines does not see Debian's python3-numpy.
"""
import json
import math
import sys

import numpy as np

GELU_C = math.sqrt(2.0 / math.pi)


def act(name, z):
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "tanh":
        return np.tanh(z)
    return 0.5 * z * (1.0 + np.tanh(GELU_C * (z + 0.044715 * z**3)))


def act_grad(name, z):
    if name == "relu":
        return (z > 0).astype(np.float64)
    if name == "tanh":
        return 1.0 - np.tanh(z) ** 2
    t = np.tanh(GELU_C * (z + 0.044715 * z**3))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * z * z)


def lr_at(c, step):
    if c["warmup"] > 0 and step <= c["warmup"]:
        return c["lr"] * step / c["warmup"]
    if step >= c["total"]:
        return c["min_lr"]
    p = (step - c["warmup"]) / (c["total"] - c["warmup"])
    return c["min_lr"] + 0.5 * (c["lr"] - c["min_lr"]) * (1 + math.cos(math.pi * p))


def main():
    c = json.load(open(sys.argv[1]))
    W = [np.array(w, dtype=np.float64) for w in c["weights"]]
    b = [np.array(x, dtype=np.float64) for x in c["biases"]]
    m = [np.zeros_like(p) for p in W + b]
    v = [np.zeros_like(p) for p in W + b]
    n = len(W)
    losses = []
    for step, batch in enumerate(c["batches"], start=1):
        x = np.array(batch["x"], dtype=np.float64)
        t = np.array(batch["t"], dtype=np.float64)
        zs, hs = [], [x]
        h = x
        for i in range(n):
            z = h @ W[i].T + b[i]
            zs.append(z)
            h = act(c["activation"], z) if i < n - 1 else z
            hs.append(h)
        B = x.shape[0]
        if c["loss"] == "ce":
            zmax = h.max(axis=1, keepdims=True)
            lse = zmax[:, 0] + np.log(np.exp(h - zmax).sum(axis=1))
            lab = t.astype(int)
            loss = np.mean(lse - h[np.arange(B), lab])
            g = np.exp(h - lse[:, None])
            g[np.arange(B), lab] -= 1.0
            g /= B
        else:
            t = t.reshape(h.shape)
            loss = np.mean((h - t) ** 2)
            g = 2.0 * (h - t) / (B * h.shape[1])
        losses.append(float(loss))
        gW, gb = [None] * n, [None] * n
        for i in reversed(range(n)):
            if i < n - 1:
                g = g * act_grad(c["activation"], zs[i])
            gW[i] = g.T @ hs[i]
            gb[i] = g.sum(axis=0)
            g = g @ W[i]
        grads = gW + gb
        norm = math.sqrt(sum(float((q**2).sum()) for q in grads))
        scale = c["clip"] / (norm + 1e-6) if c["clip"] > 0 and norm > c["clip"] else 1.0
        lr = lr_at(c, step)
        params = W + b
        for k, (p, q) in enumerate(zip(params, grads)):
            q = q * scale
            m[k] = c["beta1"] * m[k] + (1 - c["beta1"]) * q
            v[k] = c["beta2"] * v[k] + (1 - c["beta2"]) * q * q
            mh = m[k] / (1 - c["beta1"] ** step)
            vh = v[k] / (1 - c["beta2"] ** step)
            wd = c["weight_decay"] if k < n else 0.0
            p *= 1 - lr * wd
            p -= lr * mh / (np.sqrt(vh) + c["eps"])
    print(json.dumps(losses))


if __name__ == "__main__":
    main()
