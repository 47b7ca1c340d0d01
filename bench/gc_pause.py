#!/usr/bin/env python3
"""Why the node calls ``gc.freeze()`` after loading a model (pyroki_ros/ros/node.py).

Loads the bundled Panda as the node does (``LoadedModel``: robot, IK programs, warm-up) and
times a full garbage collection, ``gc.collect()``, which Python runs on its own when a request
allocates many objects (a big message): once with every object the load left alive in the
collector's sight, once after ``gc.freeze()`` moved them out. The GIL is held throughout a
collection, so every other request waits that long.

Usage (repository root)::

    .venv/bin/python bench/gc_pause.py
"""

from __future__ import annotations

import gc
import statistics
import time

from common import git_rev, host


def full_collection_ms(repeats: int = 5) -> float:
    """Median wall time of ``gc.collect()`` (all generations), ms."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        gc.collect()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def main() -> None:
    import pyroki_ros.ros.node  # noqa: F401 -- everything the node imports (rclpy, messages)
    from pyroki_ros.robots import urdf_path
    from pyroki_ros.ros.model import LoadedModel

    model = LoadedModel(urdf_path("panda").read_text())
    model.warm_up()
    tracked = len(gc.get_objects())
    before = full_collection_ms()
    gc.freeze()
    after = full_collection_ms()
    print(f"machine: {host()}; git {git_rev()}; model {model.name}")
    print(f"objects tracked after the model load: {tracked:,}")
    print(f"full gc.collect(): {before:.1f} ms before gc.freeze(), {after:.2f} ms after")


if __name__ == "__main__":
    main()
