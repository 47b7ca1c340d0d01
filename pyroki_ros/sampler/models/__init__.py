"""Trained learned-IK sampler models shipped with pyroki_ros, one per bundled robot:
``<name>.npz`` (weights) + ``<name>.json`` (robot, joints, limits, tip, model settings), as
:meth:`pyroki_ros.sampler.IKSampler.save` writes them. Load with
``IKSampler.pretrained(name)``; how they were trained: docs/benchmarks/sampler.md.
"""
