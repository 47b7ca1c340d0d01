"""The node's topics, taken by a process of its own: what anyone on the DDS domain can publish
never reaches the node's process unless it fits the node's limits.

A child process (``python -m pyroki_ros.ros.inputs``: rclpy and the message types, no JAX)
subscribes to every topic the node reads (/joint_states, teleop goals, collision objects,
robot_description) with the serialised bytes (``raw=True``), drops a message over its topic's
byte budget with a warning naming the limit (bounded.py), and hands the others to the node
over a pipe; the node deserialises them and calls its callbacks.

Why a process. Measured (bench/hostile_input.py, its raw cases 6c-6f, the compute_fk calls
that overlap each case; 2026-11-28, this 2-core VM), for a 96 MB raw message:

* topics on the services' DDS participant (the node of 399e788): compute_fk held 2.3-2.8 s
  in 4 of 6 tries (below node code: the requests reached the node late);
* topics on a participant of their own in the node's process (a second rclpy context,
  docs/benchmarks/hostile_input.md as committed in d8b4b98): 94-112 ms, rclpy's copy of the
  bytes holding the GIL (~1 ms per MB), and the node's peak memory 1,741 -> 2,224 MiB over
  the four messages (native memory kept by the subscription's reader, no Python object);
* in this process (the report as committed now): compute_fk within 15 ms, the node's memory
  unchanged; this process's memory is limited (COPIES, MEMORY_SLACK), so a 96 MB message is
  not even taken here.

The child is started with the node's ROS arguments (domain, enclave) as a node
``<name>_inputs``; it ends when the node closes its stdin (the node exits, however) and
ignores SIGINT (a terminal's Ctrl-C reaches the whole process group; the node stops it). If
it dies, the node starts another within :data:`RESTART_S`.

Protocol. Node -> child, stdin: one JSON line with the set-up (topics, QoS, budgets), then
JSON lines ``{"budgets": [[bytes, reason], ...]}`` (the node's limits changed) or
``{"resubscribe": i}``. Child -> node, a pipe: frames of a little-endian header (topic
index u32, size u64) and the serialised message.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rclpy.serialization import deserialize_message

from pyroki_ros.ros.bounded import Warnings, too_large

FRAME = struct.Struct("<IQ")  # topic index, size in bytes
RESTART_S = 1.0  # a child that ended is replaced after this long

# The child's memory (RLIMIT_DATA): what it has after start-up, plus room for COPIES copies of
# the largest message its budgets allow (Fast DDS's reassembled sample, rmw's buffer, Python's
# bytes) and MEMORY_SLACK for itself. Fast DDS drops a message it cannot find memory for,
# unread and without a word (measured: the child lives on and takes the next messages). Memory
# kept past MEMORY_SLACK would leave too little room for a message within the budgets: a
# subscription's reader keeps a buffer of a large sample it took or tried to (measured: it is
# released when the subscription is destroyed). Checked every MEMORY_CHECK_S; then every topic
# is subscribed anew, at most once per RESUBSCRIBE_S, doubled (up to RESUBSCRIBE_MAX_S) while it
# keeps happening (a huge latched sample comes again to each new reader).
COPIES = 3
MEMORY_SLACK = 64 * 2**20
MEMORY_CHECK_S = 1.0
RESUBSCRIBE_S = 1.0
RESUBSCRIBE_MAX_S = 60.0


@dataclass
class _Topic:
    msg_type: type
    topic: str
    qos: dict
    budget: Callable[[], tuple[int, str]]
    what: str
    callback: Callable
    queue: int | None  # None: called on the reader thread; else its own thread, newest kept
    pending: deque = field(init=False)  # the newest ``queue`` messages (older ones drop out)
    ready: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.pending = deque(maxlen=self.queue)


def _qos_dict(qos) -> dict:
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

    return {
        "depth": int(qos.depth),
        "reliable": qos.reliability == ReliabilityPolicy.RELIABLE,
        "transient_local": qos.durability == DurabilityPolicy.TRANSIENT_LOCAL,
    }


class Inputs:
    """The node's side: register topics with :meth:`subscribe`, then :meth:`start`.

    Args:
        name: the child's node name; namespace: its namespace (topics are given resolved).
        ros_args: the process's ROS arguments (None: sys.argv), for the child's rclpy.init.
        domain_id: the node's DDS domain.
        logger: the node's logger (the child logs under its name too).
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        ros_args: Sequence[str] | None,
        domain_id: int,
        logger,
    ):
        self.name, self.namespace = name, namespace
        self._args = list(sys.argv if ros_args is None else ros_args)
        self._domain_id, self._logger = domain_id, logger
        self._closing = threading.Event()  # set by close(): a child that ends is not replaced
        self._topics: list[_Topic] = []
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()  # the child's stdin
        self._warn = Warnings(logger)

    def subscribe(
        self,
        msg_type: type,
        topic: str,
        callback: Callable,
        qos,
        budget: Callable[[], tuple[int, str]],
        what: str,
        queue: int | None = None,
    ) -> int:
        """Registers ``topic`` (a resolved name) before :meth:`start`: ``callback(msg)`` gets
        every message within ``budget() -> (bytes, reason)`` (read now and whenever
        :meth:`budgets_changed` is called, checked again here). ``queue``: the callback runs
        on a thread of its own, the newest ``queue`` messages waiting (a model load from
        robot_description takes seconds); None: on the reader thread (a quick callback).
        Returns the topic's index (for :meth:`resubscribe`)."""
        self._topics.append(_Topic(msg_type, topic, _qos_dict(qos), budget, what, callback, queue))
        return len(self._topics) - 1

    def start(self) -> None:
        for i, t in enumerate(self._topics):
            if t.queue is not None:
                threading.Thread(
                    target=self._drain, args=(t,), name=f"pyroki_ros_input_{i}", daemon=True
                ).start()
        self._spawn()
        threading.Thread(target=self._supervise, name="pyroki_ros_inputs", daemon=True).start()

    def budgets_changed(self) -> None:
        """The node's limits changed: the child drops by the new budgets."""
        self._send({"budgets": [list(t.budget()) for t in self._topics]})

    def resubscribe(self, index: int) -> None:
        """A new subscription for topic ``index`` (its transient-local sample again)."""
        self._send({"resubscribe": index})

    def close(self) -> None:
        """Stops the child (it leaves the domain); no new one is started."""
        self._closing.set()
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    # --- the node's side ------------------------------------------------------------------

    def _spawn(self) -> None:
        read, write = os.pipe()
        setup = {
            "name": self.name,
            "namespace": self.namespace,
            "logger": self._logger.name,
            "ros_args": self._args,
            "domain_id": self._domain_id,
            "topics": [
                {
                    "type": f"{t.msg_type.__module__}.{t.msg_type.__name__}",
                    "topic": t.topic,
                    "qos": t.qos,
                    "budget": list(t.budget()),
                    "what": t.what,
                }
                for t in self._topics
            ],
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "pyroki_ros.ros.inputs", str(write)],
            stdin=subprocess.PIPE,
            pass_fds=(write,),
        )
        os.close(write)
        process.stdin.write((json.dumps(setup) + "\n").encode())
        process.stdin.flush()
        self._process, self._pipe = process, read

    def _send(self, command: dict) -> None:
        with self._lock:
            process = self._process
            try:
                process.stdin.write((json.dumps(command) + "\n").encode())
                process.stdin.flush()
            except (OSError, AttributeError, ValueError):  # gone: its successor reads budgets
                pass

    def _supervise(self) -> None:
        while True:
            self._read(self._pipe)
            os.close(self._pipe)
            self._process.wait()
            if self._closing.is_set():
                return
            self._logger.error(
                f"the topic process ended (exit status {self._process.returncode}); starting "
                f"another in {RESTART_S:g} s"
            )
            time.sleep(RESTART_S)
            if self._closing.is_set():
                return
            self._spawn()

    def _read(self, pipe: int) -> None:
        """Frames until the child closes the pipe."""
        with os.fdopen(pipe, "rb", buffering=0, closefd=False) as stream:
            while True:
                header = _read_exactly(stream, FRAME.size)
                if header is None:
                    return
                index, size = FRAME.unpack(header)
                data = _read_exactly(stream, size)
                if data is None or index >= len(self._topics):
                    return
                topic = self._topics[index]
                if topic.queue is None:
                    self._deliver(index, data)
                    continue
                with topic.ready:
                    topic.pending.append(data)
                    topic.ready.notify()

    def _drain(self, topic: _Topic) -> None:
        index = self._topics.index(topic)
        while True:
            with topic.ready:
                while not topic.pending:
                    topic.ready.wait()
                data = topic.pending.popleft()
            self._deliver(index, data)

    def _deliver(self, index: int, data: bytes) -> None:
        topic = self._topics[index]
        limit, reason = topic.budget()  # the limits may have changed since the child weighed it
        if len(data) > limit:
            self._warn(index, too_large(topic.what, len(data), limit, reason))
            return
        try:
            msg = deserialize_message(data, topic.msg_type)
        except Exception as e:  # noqa: BLE001 -- malformed CDR: the node serves on
            self._warn(index, f"{topic.what}: {len(data):,} bytes that do not deserialise ({e})")
            return
        try:
            topic.callback(msg)
        except Exception:  # noqa: BLE001 -- a bug: logged, the topic keeps working
            import traceback

            self._logger.error(f"{topic.what}: internal error: {traceback.format_exc()}")


def _read_exactly(stream, size: int) -> bytes | None:
    """``size`` bytes, or None at the end of the stream."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = stream.readinto(view[got:])
        if not n:
            return None
        got += n
    return bytes(buffer)


# --- the child ------------------------------------------------------------------------------


def _data_bytes() -> int:
    """This process's VmData (what RLIMIT_DATA limits), bytes."""
    for line in open("/proc/self/status"):  # noqa: SIM115 -- a procfs read
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    return 0


def largest_message(budget: int) -> int:
    """Bytes of the largest message the topic process can hold when ``budget`` is its
    largest topic budget (about: COPIES copies of it and MEMORY_SLACK fit)."""
    return budget + MEMORY_SLACK // COPIES


class _Memory:
    """The child's memory limit and its check (see COPIES, MEMORY_SLACK)."""

    def __init__(self):
        self.base = _data_bytes()

    def limit(self, topics: list[dict]) -> int:
        """Sets the limit; returns the largest message that fits (bytes, about)."""
        import resource

        largest = largest_message(max(t["budget"][0] for t in topics))
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        soft = self.base + COPIES * largest
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        return (soft - self.base) // COPIES

    def kept(self) -> int:
        """Bytes past the start-up's and MEMORY_SLACK (0: fine)."""
        return max(0, _data_bytes() - self.base - MEMORY_SLACK)


def child(pipe: int) -> None:
    """``python -m pyroki_ros.ros.inputs PIPE``: the set-up on stdin, frames to PIPE."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the node decides when this process ends
    setup = json.loads(sys.stdin.readline())
    rclpy.init(
        args=setup["ros_args"],
        domain_id=setup["domain_id"],
        signal_handler_options=SignalHandlerOptions.NO,
    )
    node = rclpy.create_node(
        setup["name"],
        namespace=setup["namespace"],
        use_global_arguments=False,
        start_parameter_services=False,
        enable_rosout=False,
    )
    logger = rclpy.logging.get_logger(setup["logger"])
    out = os.fdopen(pipe, "wb", buffering=0)
    topics = setup["topics"]
    warn = Warnings(logger)
    subscriptions: dict[int, object] = {}

    def subscribe(i: int):
        spec = topics[i]
        module, _, name = spec["type"].rpartition(".")
        msg_type = getattr(importlib.import_module(module), name)
        q = spec["qos"]
        qos = QoSProfile(
            depth=q["depth"],
            reliability=ReliabilityPolicy.RELIABLE
            if q["reliable"]
            else ReliabilityPolicy.BEST_EFFORT,
            durability=(
                DurabilityPolicy.TRANSIENT_LOCAL
                if q["transient_local"]
                else DurabilityPolicy.VOLATILE
            ),
        )

        def on_raw(raw: bytes) -> None:
            limit, reason = topics[i]["budget"]
            if len(raw) > limit:
                warn(i, too_large(spec["what"], len(raw), limit, reason))
                return
            try:
                out.write(FRAME.pack(i, len(raw)))
                out.write(raw)
            except OSError:  # the node is gone
                os._exit(0)

        return node.create_subscription(msg_type, spec["topic"], on_raw, qos, raw=True)

    for i in range(len(topics)):
        subscriptions[i] = subscribe(i)
    requests: deque[int] = deque()

    def on_request() -> None:  # on the executor's thread: entities change there only
        while requests:
            i = requests.popleft()
            node.destroy_subscription(subscriptions[i])
            subscriptions[i] = subscribe(i)

    wake = node.create_guard_condition(on_request)
    memory = _Memory()
    largest = memory.limit(topics)
    logger.info(
        f"topic process: a message over ~{largest / 2**20:.0f} MiB cannot be held here (memory "
        "limit): Fast DDS drops it unread"
    )

    backoff = {"wait": RESUBSCRIBE_S, "next": 0.0}

    def check_memory() -> None:
        kept, now = memory.kept(), time.monotonic()
        if not kept:
            backoff["wait"] = RESUBSCRIBE_S
            return
        if now < backoff["next"]:
            return
        logger.warning(
            f"the topic process keeps {kept / 2**20:.0f} MiB after a large message (in its "
            "readers); subscribing to its topics anew to release that"
        )
        requests.extend(range(len(topics)))
        on_request()
        backoff["next"] = now + backoff["wait"]
        backoff["wait"] = min(2 * backoff["wait"], RESUBSCRIBE_MAX_S)

    node.create_timer(MEMORY_CHECK_S, check_memory)

    def control() -> None:
        for line in sys.stdin:
            command = json.loads(line)
            for i, budget in enumerate(command.get("budgets", ())):
                topics[i]["budget"] = budget
            if "budgets" in command:
                memory.limit(topics)
            if "resubscribe" in command:
                requests.append(int(command["resubscribe"]))
                wake.trigger()
        os._exit(0)  # stdin closed: the node has ended

    threading.Thread(target=control, daemon=True).start()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    executor.spin()


if __name__ == "__main__":
    child(int(sys.argv[1]))
