"""A robot model for the node: built from a URDF and warmed up, then its slower programs
compiled in the background.

:func:`new_model` is what a new ``robot_description`` (or ``urdf_file``) goes through on the
worker thread: the size checks of requests.py, :class:`LoadedModel` (IK and FK compiled for
the single-target request path), the learned sampler when configured. A refused or broken
description is reported to the description source and the model in use stays.
:func:`warm_up` runs after the swap, on a background thread: the SolveIKBatch buckets
(``warmup_batch_sizes``) and, with ``warmup_plan``, the planner (:func:`planning.warm_up`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from pyroki_ros.ros import planning, requests
from pyroki_ros.ros.description import DescriptionSource
from pyroki_ros.ros.model import LoadedModel, release_freed_memory
from pyroki_ros.ros.params import PlanSettings, RequestLimits
from pyroki_ros.ros.requests import RequestError


def new_model(
    urdf: str,
    source: str,
    *,
    limits: RequestLimits,
    base_frame: str,
    tip_link: str,
    device,
    max_programs: int,
    fixed_frames,
    sampler_checkpoint: str,
    description: DescriptionSource,
    log,
) -> LoadedModel | None:
    """A warmed-up model of ``urdf`` (from ``source``, for messages), or None when the URDF
    is refused or the warm-up fails (``description`` is told; the model in use stays)."""
    try:
        requests.urdf(limits, urdf)
        model = LoadedModel(
            urdf,
            base_frame=base_frame,
            tip_link=tip_link,
            device=device,
            source=source,
            max_programs=max_programs,
            fixed_frames=fixed_frames,
        )
    except RequestError as e:
        description.refused(urdf, f"URDF from {source} refused: {e.message}")
        return None
    except Exception as e:  # noqa: BLE001 -- URDFError (ValueError) or anything as bad
        description.refused(urdf, f"invalid URDF from {source}: {e}")
        return None
    for note in model.notes:
        log.warning(note)
    log.info(f"compiling for {model.describe()} ...")
    try:
        model.warm_up()
    except Exception as e:  # noqa: BLE001
        description.failed(urdf)
        log.error(f"warm-up of robot '{model.name}' failed: {e!r}; model not used")
        return None
    if sampler_checkpoint:
        path = os.path.expanduser(sampler_checkpoint)
        try:
            model.load_sampler(path)
            spec = model.sampler.spec
            log.info(
                f"learned IK sampler from '{sampler_checkpoint}' seeds ~/solve_ik for "
                f"'{spec.tip}' ({spec.mode} targets)"
            )
        except (ValueError, OSError, KeyError) as e:
            log.error(f"sampler_checkpoint '{sampler_checkpoint}' not used: {e}")
    return model


def warm_up(
    model: LoadedModel,
    sizes: list[int],
    planner: Callable[[], planning.Planner] | None,
    plan: PlanSettings,
    stop: threading.Event,
    log,
) -> None:
    """Compiles ``model``'s batch programs for ``sizes`` and, given ``planner`` (its getter),
    the planner's first programs (``plan``: knots and margin of a default request); stops
    between steps once ``stop`` is set (a newer model). Never raises: a failure is logged."""
    try:
        if sizes:
            seconds = model.warm_up_batches(sizes, stop=stop)
            if not stop.is_set():
                log.info(f"batch programs for {sizes} compiled in the background ({seconds:.2f} s)")
        if planner is not None and not stop.is_set():
            seconds = planning.warm_up(planner(), plan.num_steps, plan.safety_margin)
            log.info(f"planning programs compiled in the background ({seconds:.2f} s)")
    except Exception as e:  # noqa: BLE001 -- never kill the node for a warm-up
        log.error(f"background warm-up failed: {e!r}")
    finally:
        release_freed_memory()  # the warm-up's compiles
