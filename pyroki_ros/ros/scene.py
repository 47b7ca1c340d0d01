"""The node's planning scene: named collision objects kept between requests.

Objects arrive on ``~/collision_objects`` (pyroki_ros/msg/CollisionObject) or in a
``~/apply_planning_scene`` call; they are stored as given (shape, frame, pose) and placed in the
robot's root frame when a plan uses them, at the plan's start configuration (an object given
in a link's frame moves with that link). Changes apply all or none.
"""

from __future__ import annotations

import threading

import numpy as np
from geometry_msgs.msg import PoseStamped
from shape_msgs.msg import SolidPrimitive

from pyroki_ros.msg import CollisionObject, ErrorCode
from pyroki_ros.ros.conversions import RequestError, pose_to_wxyz_xyz, quoted

# Dimensions each supported primitive needs (SolidPrimitive's own layout).
DIMENSIONS = {SolidPrimitive.SPHERE: 1, SolidPrimitive.BOX: 3, SolidPrimitive.CYLINDER: 2}


def check_primitive(shape: SolidPrimitive, what: str) -> None:
    """INVALID_REQUEST unless ``shape`` is a supported primitive with positive dimensions."""
    if shape.type not in DIMENSIONS:
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"{what}: shape type {shape.type} is not supported (SPHERE, BOX, CYLINDER)",
        )
    dims = np.asarray(shape.dimensions, np.float64)
    if dims.shape != (DIMENSIONS[shape.type],):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"{what}: needs {DIMENSIONS[shape.type]} dimensions, got {len(dims)}",
        )
    if not np.all(np.isfinite(dims)) or np.any(dims <= 0):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"{what}: dimensions must be finite and > 0, got {dims.tolist()}",
        )


class PlanningScene:
    """Named collision objects: id -> (SolidPrimitive, PoseStamped), thread-safe."""

    def __init__(self, max_objects: int):
        self.max_objects = max_objects
        self._objects: dict[str, tuple[SolidPrimitive, PoseStamped]] = {}
        self._lock = threading.Lock()

    def apply(self, changes: list[CollisionObject], check_frame=None) -> list[str]:
        """Applies ``changes`` in order, all or none; returns the ids after them.
        ``check_frame(frame_id, what)``: raises RequestError for a frame poses cannot be in.

        Raises:
            RequestError: an unknown operation, an empty id, MOVE / REMOVE of an id the scene
                does not hold, a bad shape or pose (INVALID_REQUEST), or more than
                ``max_objects`` objects (REQUEST_TOO_LARGE).
        """
        with self._lock:
            objects = dict(self._objects)
            for i, change in enumerate(changes):
                what = f"objects[{i}] ('{change.id}')"
                if change.operation == CollisionObject.REMOVE and not change.id:
                    objects.clear()
                    continue
                if not change.id:
                    raise RequestError(ErrorCode.INVALID_REQUEST, f"objects[{i}]: id is empty")
                if change.operation == CollisionObject.REMOVE:
                    self._require(objects, change.id, what)
                    del objects[change.id]
                    continue
                pose_to_wxyz_xyz(change.pose, f"{what} pose")  # INVALID_POSE if bad
                if check_frame is not None:
                    check_frame(change.header.frame_id, f"{what} pose")
                stamped = PoseStamped(header=change.header, pose=change.pose)
                if change.operation == CollisionObject.MOVE:
                    self._require(objects, change.id, what)
                    objects[change.id] = (objects[change.id][0], stamped)
                elif change.operation == CollisionObject.ADD:
                    check_primitive(change.primitive, what)
                    objects[change.id] = (change.primitive, stamped)
                else:
                    raise RequestError(
                        ErrorCode.INVALID_REQUEST,
                        f"{what}: unknown operation {change.operation} (ADD 0, REMOVE 1, MOVE 2)",
                    )
            if len(objects) > self.max_objects:
                raise RequestError(
                    ErrorCode.REQUEST_TOO_LARGE,
                    f"the scene would hold {len(objects)} objects, over the node's limit "
                    f"max_obstacles = {self.max_objects} (a node parameter)",
                )
            self._objects = objects
            return sorted(objects)

    @staticmethod
    def _require(objects: dict, name: str, what: str) -> None:
        if name not in objects:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"{what}: no such object in the planning scene (it holds "
                f"{quoted(sorted(objects)) or 'none'})",
            )

    def objects(self) -> list[tuple[str, SolidPrimitive, PoseStamped]]:
        """The scene now: (id, shape, stamped pose) sorted by id."""
        with self._lock:
            return [(name, *self._objects[name]) for name in sorted(self._objects)]
