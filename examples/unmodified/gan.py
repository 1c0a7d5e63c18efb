"""A plain GAN-style loop with two models and two optimizers, no TraceML
in it (zero-edit tracing, docs/zero-edit.md): each iteration steps the
discriminator, then the generator. TraceML should find one training step
per iteration (the generator's optimizer closes it) and time both models'
forward passes.
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=120)
    a = p.parse_args()
    torch.manual_seed(0)
    real = torch.randn(a.steps * 64, 32)
    loader = DataLoader(TensorDataset(real), batch_size=64)
    net_g = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 32))
    net_d = nn.Sequential(nn.Linear(32, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4)
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
    for i, (batch,) in enumerate(loader):
        fake = net_g(torch.randn(64, 16))
        loss_d = bce(net_d(batch), ones) + bce(net_d(fake.detach()), zeros)
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = bce(net_d(fake), ones)
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        if (i + 1) % 40 == 0:
            print("iteration %d  D %.3f  G %.3f" % (i + 1, loss_d.item(), loss_g.item()), flush=True)


if __name__ == "__main__":
    main()
