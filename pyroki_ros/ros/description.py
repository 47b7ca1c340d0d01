"""Where the node's robot model comes from: ``urdf_file``, or the robot_description topic.

With ``urdf_file`` (a path, or a bundled robot's name) the node reads it once, on its worker,
and with ``publish_robot_description`` latches it on the description topic for others (RViz,
tools) when no robot_state_publisher does. Otherwise it subscribes to the topic (transient
local, as robot_state_publisher publishes) and loads every new description; one that failed
is not tried again, one that is not XML is refused (a topic never names a file to read), and
with ``accept_robot_description_once`` only the first valid one counts. Until a first
description arrives, a watchdog says why and subscribes again when a publisher is there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from pyroki_ros.ros import bounded

# Until a first robot_description arrives, check this often why not (see _check).
DESCRIPTION_WATCHDOG_SECONDS = 5.0
DESCRIPTION_QOS = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


class DescriptionSource:
    """Hands every URDF to ``load(urdf, source) -> bool`` (the node's model swap; False: the
    model in use stays). ``current()`` is the model in use (None before the first)."""

    def __init__(self, node, load: Callable[[str, str], bool], current: Callable[[], object]):
        self._node, self._worker, self._logger = node, node.worker, node.get_logger()
        self._load, self._current = load, current
        self._group = MutuallyExclusiveCallbackGroup()  # one load at a time
        self._last_failed: str | None = None
        self.topic = node.resolve_topic_name(node.get_parameter("robot_description_topic").value)
        self.urdf_file = node.get_parameter("urdf_file").value
        self._once = node.get_parameter("accept_robot_description_once").value
        if self.urdf_file:
            self._publisher = None
            if node.get_parameter("publish_robot_description").value:  # SROS2 must grant it
                self._publisher = node.create_publisher(String, self.topic, DESCRIPTION_QOS)
            self._timer = self._worker.create_timer(
                0.0, self._load_file, callback_group=self._group
            )
            return
        self._seen = False
        # Taken by the topic process (inputs.py); loads run on a thread of their own, the
        # newest description waiting.
        self._index = node.inputs.subscribe(
            String,
            self.topic,
            self._on_description,
            DESCRIPTION_QOS,
            lambda: bounded.urdf_bytes(self._node.settings.limits),
            f"robot_description refused: a {self.topic} message",
            queue=1,
        )
        self._watchdog = self._worker.create_timer(
            DESCRIPTION_WATCHDOG_SECONDS, self._check, callback_group=self._group
        )
        self._logger.info(f"waiting for a URDF on {self.topic}")

    @property
    def source(self) -> str:
        """Where the URDF comes from, for messages."""
        return self.urdf_file or self.topic

    def failed(self, urdf: str) -> None:
        """``urdf`` did not load: the same description is not tried again."""
        self._last_failed = urdf

    def refused(self, urdf: str, why: str) -> bool:
        """Logs why ``urdf`` is not used (it is not tried again); returns False."""
        self.failed(urdf)
        kept = self._current()
        self._logger.error(
            f"{why}; " + (f"still using robot '{kept.name}'" if kept else "no robot model loaded")
        )
        return False

    def _log_exception(self, where: str) -> None:
        import traceback

        self._logger.error(f"{where}: internal error: {traceback.format_exc()}")

    # --- urdf_file ---------------------------------------------------------------------------------

    def _load_file(self) -> None:
        self._timer.cancel()
        try:
            self._load_file_unsafe()
        except Exception:  # noqa: BLE001 -- an exception would stop the executor: log
            self._log_exception("urdf_file")

    def _load_file_unsafe(self) -> None:
        from pyroki_ros.robots import AVAILABLE, urdf_path

        value = self.urdf_file
        # A bundled robot's name works from any directory and install (README's command).
        path = str(urdf_path(value)) if value in AVAILABLE else os.path.expanduser(value)
        try:
            urdf = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            self._logger.error(f"cannot read urdf_file '{path}': {e}; no robot model")
            return
        if self._load(urdf, f"file {path}") and self._publisher is not None:
            self._publisher.publish(String(data=urdf))  # latched for others

    # --- the topic -------------------------------------------------------------------------------

    def _check(self) -> None:
        """Until a first description arrives: say why, and re-subscribe when a publisher is
        there. (Fast DDS can fail to deliver a transient-local sample to a late-joining reader,
        eProsima/Fast-DDS#3822; a new reader gets it again.)"""
        if self._seen:
            self._watchdog.cancel()
            return
        if self._node.count_publishers(self.topic) == 0:
            self._logger.warning(
                f"no robot model yet: nothing publishes {self.topic} (is robot_state_publisher "
                "running?)",
                throttle_duration_sec=30.0,
            )
            return
        self._logger.warning(
            f"{self.topic} has a publisher but no description arrived yet: subscribing again"
        )
        self._node.inputs.resubscribe(self._index)

    def _on_description(self, msg: String) -> None:
        self._seen = True
        try:
            self._on_description_unsafe(msg.data)
        except Exception:  # noqa: BLE001 -- an exception would stop the executor: log
            self._log_exception("robot_description")

    def _on_description_unsafe(self, urdf: str) -> None:
        current = self._current()
        if current is not None and urdf == current.urdf:
            self._logger.debug("robot_description unchanged: model kept")
            return
        if current is not None and self._once:
            self._logger.warning(
                f"robot_description ignored: accept_robot_description_once is set and robot "
                f"'{current.name}' is loaded",
                throttle_duration_sec=10.0,
            )
            return
        if urdf == self._last_failed:
            return
        if not urdf.lstrip().startswith("<"):
            # Never read a file named by a topic: robot_description is the XML itself.
            start = urdf.lstrip()[:40]
            self.refused(
                urdf, f"invalid URDF from robot_description: not XML (starts with {start!r})"
            )
            return
        if self._load(urdf, "robot_description"):
            self._last_failed = None
