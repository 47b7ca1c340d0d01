"""The ROS 2 layer of pyroki_ros: a thin rclpy node around the JAX core.

One request's path: its handler in :mod:`~pyroki_ros.ros.node` -> :mod:`~pyroki_ros.ros.requests`
(every check, the core problem) -> the core (:mod:`~pyroki_ros.ros.model`,
:mod:`~pyroki_ros.ros.planning`) -> :mod:`~pyroki_ros.ros.responses` (the answer, its outcome code).

* :mod:`pyroki_ros.ros.node` -- the ``pyroki_ros_node`` executable: parameters, topics,
  services, executors, the model swap (wiring only).
* :mod:`pyroki_ros.ros.params` -- the parameter table; the settings read from it.
* :mod:`pyroki_ros.ros.requests` -- requests -> core problems; every request check (refusal
  codes). :mod:`pyroki_ros.ros.responses` -- results -> answers (outcome codes).
* :mod:`pyroki_ros.ros.model` -- a loaded robot model: robot, IK solver, FK, warm-up, compiled
  programs, the learned sampler. :mod:`pyroki_ros.ros.description` -- where its URDF comes from.
* :mod:`pyroki_ros.ros.inputs` -- the topic process: every topic the node reads, weighed by
  :mod:`pyroki_ros.ros.bounded`'s byte budgets before it reaches the node.
* :mod:`pyroki_ros.ros.planning` -- the model's trajectory optimiser; plans and retargeting.
* :mod:`pyroki_ros.ros.teleop` -- the teleop state machine (goals, rate timer, step limits).
* :mod:`pyroki_ros.ros.scene` -- the planning scene's objects.
* :mod:`pyroki_ros.ros.conversions` -- messages <-> arrays, quaternion order (ROS xyzw <-> core
  wxyz); :mod:`pyroki_ros.ros.frames` -- float64 host rigid transforms.
* :mod:`pyroki_ros.ros.deferred` -- answers from a compile thread; :mod:`pyroki_ros.ros.shutdown`
  -- SIGINT / SIGTERM.
* :mod:`pyroki_ros.ros.markers` -- the node's RViz markers (``~/markers``).
* :mod:`pyroki_ros.ros.process` -- the node as a child process in a private DDS domain, and a
  client session (``pyroki-ros demo``; the tests' harness, test/harness.py, builds on it).
* :mod:`pyroki_ros.ros.demo` -- ``pyroki-ros demo``; :mod:`pyroki_ros.ros.view` --
  ``pyroki-ros view`` (a running node in the web viewer) and the demo's ``--view``.

Importing this package needs rclpy and the generated interfaces (``./setup.sh``); the core
(``pyroki_ros`` minus this subpackage) does not.
"""
