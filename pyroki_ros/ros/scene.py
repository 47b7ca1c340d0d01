"""The node's planning scene: named collision objects kept between requests.

Objects arrive on ``~/collision_objects`` (pyroki_ros/msg/CollisionObject) or in a
``~/apply_planning_scene`` call; they are stored as given (shape, frame, pose) and placed in the
robot's root frame when a plan uses them, at the plan's start configuration (an object given
in a link's frame moves with that link). Changes apply all or none; what a change may be is
checked by requests.scene_changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from geometry_msgs.msg import PoseStamped
from shape_msgs.msg import SolidPrimitive

Objects = dict[str, tuple[SolidPrimitive, PoseStamped]]


class PlanningScene:
    """Named collision objects: id -> (SolidPrimitive, PoseStamped), thread-safe."""

    def __init__(self) -> None:
        self._objects: Objects = {}
        self._lock = threading.Lock()

    def edit(self, change: Callable[[Objects], Objects]) -> list[str]:
        """Replaces the objects by ``change(objects)`` (which may raise: nothing changes);
        returns the ids after it, sorted."""
        with self._lock:
            self._objects = change(self._objects)
            return sorted(self._objects)

    def objects(self) -> list[tuple[str, SolidPrimitive, PoseStamped]]:
        """The scene now: (id, shape, stamped pose) sorted by id."""
        with self._lock:
            return [(name, *self._objects[name]) for name in sorted(self._objects)]
