"""The test harness: the real node as a subprocess in its own DDS domain, with a client.

:class:`IsolatedNode` is what an end-to-end test needs (a reserved domain, this process's ROS
environment pointed at it, the node process and a client session, all cleaned up by
:meth:`IsolatedNode.close`); it builds on pyroki_ros.ros.process, which ``pyroki-ros demo``
uses too. Importable from the tests (pytest puts test/ on sys.path) and from bench/ scripts
that add test/ to it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pyroki_ros.ros.process import (  # noqa: F401 -- re-exported for the tests
    NodeProcess,
    RosSession,
    repo_config,
    reserve_domain_id,
    ros_environment,
)


def wait_until(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Polls ``predicate`` until it returns a truthy value; TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout:.0f} s")
        time.sleep(interval)


NODE = "/pyroki_ros_node"
_ENV_KEYS = (
    "ROS_DOMAIN_ID",
    "ROS_AUTOMATIC_DISCOVERY_RANGE",
    "ROS_LOG_DIR",
    "ROS_LOCALHOST_ONLY",
    "ROS_STATIC_PEERS",
)


class IsolatedNode:
    """Everything an end-to-end check needs, cleaned up by :meth:`close`: a reserved domain,
    this process's ROS environment pointed at it, the node subprocess and a client session."""

    def __init__(
        self,
        name: str,
        work_dir: str | os.PathLike,
        ros_args: list[str],
        extra_env: dict[str, str] | None = None,
    ):
        work_dir = Path(work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        self.reservation = reserve_domain_id(name)
        self.domain_id = self.reservation.domain_id
        self.env = ros_environment(self.domain_id, work_dir / "ros_log")
        self.env.update(extra_env or {})
        self._saved = {k: os.environ.get(k) for k in _ENV_KEYS}
        for key in _ENV_KEYS:
            if key in self.env:
                os.environ[key] = self.env[key]
            else:
                os.environ.pop(key, None)
        self.node: NodeProcess | None = None
        self.session: RosSession | None = None
        try:
            self.node = NodeProcess(ros_args, self.env, work_dir / "node.log", cwd=work_dir)
            self.session = RosSession(f"{name}_client", self.domain_id)
        except BaseException:
            self.close()
            raise
        self._clients: dict[str, object] = {}

    def client(self, srv_type, service: str, wait: float = 120.0):
        """Client of ``/pyroki_ros_node/<service>``, created once and waited for."""
        if service not in self._clients:
            self._clients[service] = self.session.client(
                srv_type, f"{NODE}/{service}", wait=wait, node=self.node
            )
        return self._clients[service]

    def call(self, srv_type, service: str, request, timeout: float = 120.0):
        return self.session.call(
            self.client(srv_type, service), request, timeout=timeout, node=self.node
        )

    def wait_ready(self, link: str, timeout: float = 240.0, joint: str | None = None):
        """Polls ~/compute_fk for ``link`` until it succeeds (model loaded and warmed up)."""
        from pyroki_ros.msg import ErrorCode
        from pyroki_ros.srv import ComputeFK
        from sensor_msgs.msg import JointState

        request = ComputeFK.Request(link_names=[link])
        if joint:  # something explicit, so that no /joint_states is needed
            request.robot_state = JointState(name=[joint], position=[0.0])
        response = self.session.poll(
            self.client(ComputeFK, "compute_fk"),
            request,
            lambda r: r.error_code.val == ErrorCode.SUCCESS,
            timeout,
            node=self.node,
        )
        if response.error_code.val != ErrorCode.SUCCESS:
            raise TimeoutError(
                f"link '{link}' not served after {timeout:.0f} s: "
                f"{response.message}\n{self.node.log()[-3000:]}"
            )
        return response

    def close(self) -> None:
        try:
            if self.session is not None:
                self.session.close()
        finally:
            if self.node is not None:
                self.node.stop()
            for key, value in self._saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self.reservation.release()
