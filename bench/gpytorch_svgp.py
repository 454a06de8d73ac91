#!/usr/bin/env python3
"""Centralized GPyTorch SVGP peer on the exact split that `coolgp simulate` streams.

    cargo run --release -- export --dataset airline --out /tmp/airline-split
    /opt/coolgp-bench/bin/python bench/gpytorch_svgp.py /tmp/airline-split --inducing 100

One sparse variational GP (Hensman et al. 2013: ScaleKernel(RBF with ARD), Gaussian
likelihood, m inducing inputs learned, Cholesky q(u), whitened strategy) trained with Adam on
minibatches of the whole training set, epoch after epoch: a server with every row, which is
the reference point COOL-GP's decentralized fleet gives up. Prints one JSON line per epoch
with the test RMSE (original units, via split.json's y_scale), the NLPD and the wall time.
Not part of CI (see bench/setup.sh for the install).
"""
import argparse
import json
import math
import time

import numpy as np
import torch
import gpytorch


def load(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    return data


class SVGP(gpytorch.models.ApproximateGP):
    def __init__(self, z):
        q_u = gpytorch.variational.CholeskyVariationalDistribution(z.shape[0])
        strategy = gpytorch.variational.VariationalStrategy(
            self, z, q_u, learn_inducing_locations=True
        )
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=z.shape[1])
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(
            self.mean_module(x), self.covar_module(x)
        )


def evaluate(model, lik, x, y, y_scale):
    model.eval()
    lik.eval()
    means, variances = [], []
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        for s in range(0, x.shape[0], 4096):
            p = lik(model(x[s : s + 4096]))
            means.append(p.mean)
            variances.append(p.variance)
    mean = torch.cat(means)
    var = torch.cat(variances)
    rmse = torch.sqrt(torch.mean((mean - y) ** 2)).item() * y_scale
    nlpd = (
        0.5 * torch.mean(torch.log(2 * math.pi * var) + (y - mean) ** 2 / var).item()
        + math.log(y_scale)
    )
    model.train()
    lik.train()
    return rmse, nlpd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("split", help="folder written by `coolgp export`")
    ap.add_argument("--inducing", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    torch.set_default_dtype(torch.float64)
    meta = json.load(open(f"{a.split}/split.json"))
    t0 = time.perf_counter()
    train = load(f"{a.split}/train.csv")
    test = load(f"{a.split}/test.csv")
    d = meta["d"]
    x, y = torch.from_numpy(train[:, :d]), torch.from_numpy(train[:, d])
    xt, yt = torch.from_numpy(test[:, :d]), torch.from_numpy(test[:, d])
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(a.seed)
    z = x[torch.from_numpy(rng.choice(x.shape[0], a.inducing, replace=False))].clone()
    model = SVGP(z)
    lik = gpytorch.likelihoods.GaussianLikelihood()
    model.train()
    lik.train()
    opt = torch.optim.Adam(
        [{"params": model.parameters()}, {"params": lik.parameters()}], lr=a.lr
    )
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=x.shape[0])
    gen = torch.Generator().manual_seed(a.seed)
    train_s = 0.0
    for epoch in range(1, a.epochs + 1):
        t = time.perf_counter()
        perm = torch.randperm(x.shape[0], generator=gen)
        for s in range(0, x.shape[0], a.batch):
            idx = perm[s : s + a.batch]
            opt.zero_grad()
            loss = -mll(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
        train_s += time.perf_counter() - t
        rmse, nlpd = evaluate(model, lik, xt, yt, meta["y_scale"])
        print(
            json.dumps(
                {
                    "peer": "gpytorch-svgp",
                    "torch": torch.__version__,
                    "gpytorch": gpytorch.__version__,
                    "threads": a.threads,
                    "inducing": a.inducing,
                    "batch": a.batch,
                    "epoch": epoch,
                    "train_s": round(train_s, 2),
                    "load_s": round(load_s, 2),
                    "rmse": round(rmse, 4),
                    "nlpd": round(nlpd, 4),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
