#!/usr/bin/env python3
"""Choosing a sampler model's sampling settings: ``temperature`` (component widths) x
``mixture_temperature`` (the mixture logits divided), on tuning targets of their own.

Targets: the tip positions of ``--targets`` uniform random chain configurations (numpy seed
``--seed``, 5 by default: neither test/test_pretrained_sampler.py's 20 nor
bench/sampler_benchmark.py's 2024), the other joints at the middle of their limits; K = 16
samples per target (sampler seed 1); errors by the independent float64 reference FK
(test/batched_reference.py). Per cell: mean position error, share within 10 cm, distinct
solutions per target (bench/sampler_benchmark.py's clusters among the accurate samples),
spread. The rule: the highest share within 10 cm whose distinct solutions stay within
``--keep`` (0.5) of the trained mixture's (both temperatures 1). The chosen pair goes into
the model's .json (``temperature``, ``mixture_temperature``) by hand.

Usage (repository root; ~1 min per robot here)::

    .venv/bin/python bench/sampler_settings.py --robots panda,ur5
"""

from __future__ import annotations

import argparse
import itertools

from common import machine_line, utc_now

import numpy as np
from batched_reference import Chain
from sampler_benchmark import clusters

from pyroki_ros.robots import urdf_path
from pyroki_ros.sampler import IKSampler

TEMPERATURES = (1.0, 0.85, 0.7, 0.5)
MIXTURE_TEMPERATURES = (1.0, 0.5, 0.25)


def grid(name: str, n_targets: int, seed: int, k: int = 16) -> dict[tuple[float, float], dict]:
    """{(mixture temperature, temperature): figures} of the shipped model ``name``."""
    sampler = IKSampler.pretrained(name)
    reference = Chain(urdf_path(name))
    tip, chain = sampler.spec.tip, list(sampler.spec.chain)
    rng = np.random.default_rng(seed)
    q = np.tile((reference.lower + reference.upper) / 2, (n_targets, 1))
    q[:, chain] = rng.uniform(
        reference.lower[chain], reference.upper[chain], (n_targets, len(chain))
    )
    targets = reference.poses(q, [tip])[tip][:, :3, 3]
    out = {}
    for mix, temp in itertools.product(MIXTURE_TEMPERATURES, TEMPERATURES):
        samples = sampler.sample(targets, k, seed=1, temperature=temp, mixture_temperature=mix)
        flat = samples.reshape(n_targets * k, -1)
        reached = reference.poses(flat, [tip])[tip][:, :3, 3].reshape(n_targets, k, 3)
        error = np.linalg.norm(reached - targets[:, None], axis=-1)
        accurate = error < 0.1
        out[mix, temp] = {
            "mean_cm": 100 * float(error.mean()),
            "within_10cm": 100 * float(accurate.mean()),
            "clusters": float(
                np.mean([clusters(samples[i][accurate[i]][:, chain]) for i in range(n_targets)])
            ),
            "spread_rad": float(samples[..., chain].std(axis=1).mean()),
        }
    return out


def choose(cells: dict, keep: float) -> tuple[float, float]:
    """The rule of the module docstring."""
    floor = cells[1.0, 1.0]["clusters"] - keep
    allowed = [key for key, c in cells.items() if c["clusters"] >= floor]
    return max(allowed, key=lambda key: cells[key]["within_10cm"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robots", default="panda,ur5")
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--keep", type=float, default=0.5)
    args = parser.parse_args()
    print(f"{utc_now()}; {machine_line()}")
    for name in args.robots.split(","):
        cells = grid(name, args.targets, args.seed)
        best = choose(cells, args.keep)
        print(f"\n| {name}: mixture T \\ T | " + " | ".join(f"{t}" for t in TEMPERATURES) + " |")
        print("|---" * (len(TEMPERATURES) + 1) + "|")
        for mix in MIXTURE_TEMPERATURES:
            row = []
            for temp in TEMPERATURES:
                c = cells[mix, temp]
                text = f"{c['mean_cm']:.2f} cm, {c['within_10cm']:.2f} %, {c['clusters']:.2f}"
                row.append(f"**{text}**" if (mix, temp) == best else text)
            print(f"| {mix} | " + " | ".join(row) + " |")
        print(f"{name}: chosen temperature {best[1]}, mixture_temperature {best[0]}")


if __name__ == "__main__":
    main()
