"""Running ``pyroki_ros_node`` as a child process in a private DDS domain, and a client session
talking to it: what ``pyroki-ros demo`` needs (the tests build their harness on it,
test/harness.py).

* :func:`reserve_domain_id` -- a ROS_DOMAIN_ID no other process using this helper holds (a
  lock file per id under the temp folder), starting from a pid-derived id.
* :func:`ros_environment` -- environment for this process and its children: that domain,
  loopback-only discovery, logs in a folder of the caller's choice.
* :class:`NodeProcess` -- starts the real entry point (``pyroki_ros_node --ros-args ...``),
  logs to a file, and always stops it (SIGINT, then SIGTERM, then SIGKILL); on Linux the node
  also gets SIGTERM if this process dies first (PYROKI_ROS_EXIT_WITH_PARENT).
* :class:`RosSession` -- an rclpy context, a client node and its executor thread; blocking
  service calls that fail early when the node process has exited.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

# Linux: domain ids 0..101 map to ports below the ephemeral range (and 215..232).
DOMAIN_IDS = range(1, 102)
POLL_CALL_S = 10.0  # s: one call of RosSession.poll


class DomainReservation:
    """Holds the lock of one domain id until :meth:`release` (or process exit)."""

    def __init__(self, domain_id: int, handle):
        self.domain_id = domain_id
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def reserve_domain_id(salt: str = "") -> DomainReservation:
    """First free id from a pid/salt-derived start (free: no other reservation holds it)."""
    folder = Path(tempfile.gettempdir()) / "pyroki_ros_domains"
    folder.mkdir(exist_ok=True)
    ids = list(DOMAIN_IDS)
    start = (os.getpid() * 7 + sum(map(ord, salt)) * 13) % len(ids)
    for k in range(len(ids)):
        domain_id = ids[(start + k) % len(ids)]
        handle = open(folder / f"{domain_id}.lock", "w")  # noqa: SIM115 -- held until release
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return DomainReservation(domain_id, handle)
    raise RuntimeError("no free ROS_DOMAIN_ID in 1..101")


def ros_environment(
    domain_id: int | None,
    log_dir: str | os.PathLike,
    discovery: str = "LOCALHOST",
    base: dict | None = None,
) -> dict[str, str]:
    """A copy of ``base`` (default os.environ) set for an isolated ROS 2 session."""
    env = dict(os.environ if base is None else base)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = discovery
    env.pop("ROS_LOCALHOST_ONLY", None)  # deprecated, conflicts with the discovery range
    if discovery == "LOCALHOST":
        env.pop("ROS_STATIC_PEERS", None)
    env["ROS_LOG_DIR"] = str(log_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def node_command() -> list[str]:
    """The installed ``pyroki_ros_node`` next to this interpreter (else on PATH, else -m)."""
    beside = Path(sys.executable).with_name("pyroki_ros_node")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("pyroki_ros_node")
    if found:
        return [found]
    return [sys.executable, "-m", "pyroki_ros.ros.node"]


def repo_config(robot: str) -> Path | None:
    """config/<robot>.yaml of this source tree, or of the installed share folder."""
    here = Path(__file__).resolve().parents[2] / "config" / f"{robot}.yaml"
    if here.is_file():
        return here
    share = Path(sys.prefix) / "share" / "pyroki_ros" / "config" / f"{robot}.yaml"
    return share if share.is_file() else None


class NodeProcess:
    """``pyroki_ros_node`` as a child process; use as a context manager."""

    def __init__(
        self,
        ros_args: list[str],
        env: dict[str, str],
        log_path: str | os.PathLike,
        cwd: str | os.PathLike | None = None,
    ):
        self.command = [*node_command(), "--ros-args", *ros_args]
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "w")  # noqa: SIM115 -- closed by stop()
        env = dict(env)
        env["PYROKI_ROS_EXIT_WITH_PARENT"] = str(os.getpid())  # see shutdown.exit_with_parent
        self.proc = subprocess.Popen(
            self.command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def rss_kib(self) -> int:
        """Resident set size (VmRSS) of the node process, KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT (a clean rclpy shutdown), then SIGTERM, then SIGKILL."""
        if self.proc.poll() is None:
            for sig, wait in (
                (signal.SIGINT, timeout),
                (signal.SIGTERM, 5.0),
                (signal.SIGKILL, 5.0),
            ):
                try:
                    self.proc.send_signal(sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class RosSession:
    """An rclpy context, one node and a background MultiThreadedExecutor, for client code
    (tests, the demo): publishers, subscriptions and blocking service calls from any thread."""

    def __init__(self, name: str, domain_id: int | None = None, threads: int = 4):
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(
            context=self.context,
            domain_id=domain_id,
            signal_handler_options=SignalHandlerOptions.NO,
        )
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=threads, context=self.context)
        self.executor.add_node(self.node)
        import threading

        self._thread = threading.Thread(target=self._spin, name=f"{name}_spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001, S110 -- the context was shut down while spinning
            pass

    def client(self, srv_type, service: str, wait: float = 60.0, node: NodeProcess | None = None):
        """A service client, after the service is discovered (fails early if ``node`` died)."""
        client = self.node.create_client(srv_type, service)
        deadline = time.monotonic() + wait
        while not client.wait_for_service(timeout_sec=0.2):
            if node is not None and not node.alive():
                raise RuntimeError(f"the node exited ({node.proc.returncode}):\n{node.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"service {service} not available within {wait:.0f} s")
        return client

    def call(self, client, request, timeout: float = 60.0, node: NodeProcess | None = None):
        """Blocking call; TimeoutError if no answer in ``timeout`` s, RuntimeError as soon as
        ``node`` (the server process, if given) has exited."""
        import threading

        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        deadline = time.monotonic() + timeout
        while not done.wait(0.5):
            if node is not None and not node.alive():
                client.remove_pending_request(future)
                raise RuntimeError(f"the node exited ({node.proc.returncode}):\n{node.log()}")
            if time.monotonic() > deadline:
                client.remove_pending_request(future)
                raise TimeoutError(f"no answer from {client.srv_name} within {timeout:.0f} s")
        return future.result()

    def poll(
        self,
        client,
        request,
        ready: Callable,
        timeout: float,
        node: NodeProcess | None = None,
        interval: float = 0.2,
    ):
        """Calls an idempotent service until ``ready(response)``; returns that response, or
        the last one (``ready`` False) after ``timeout`` s. Each call waits at most
        :data:`POLL_CALL_S`: rmw_fastrtps drops an answer to a client whose reader the
        server has not discovered yet ("failed to send response (timeout)" in its log), so
        the first calls after start-up can go unanswered while another is answered."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                response = self.call(client, request, timeout=POLL_CALL_S, node=node)
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise
                continue
            if ready(response) or time.monotonic() > deadline:
                return response
            time.sleep(interval)

    def close(self) -> None:
        try:
            self.executor.shutdown(timeout_sec=5.0)
        finally:
            self.node.destroy_node()
            self._rclpy.try_shutdown(context=self.context)
            self._thread.join(timeout=5.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
