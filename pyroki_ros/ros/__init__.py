"""The ROS 2 layer of pyroki_ros: a thin rclpy node around the JAX core.

* :mod:`pyroki_ros.ros.node` -- the ``pyroki_ros_node`` executable (services, teleop, model
  loading).
* :mod:`pyroki_ros.ros.model` -- a loaded robot model with its solver, warm-up and the
  translation of request messages into core objectives (no rclpy node, testable alone).
* :mod:`pyroki_ros.ros.conversions` -- message <-> numpy conversions, quaternion order (ROS
  xyzw <-> core wxyz) and small float64 rigid-transform helpers.
* :mod:`pyroki_ros.ros.harness` -- starting the node as a subprocess in its own DDS domain
  (used by ``pyroki-ros demo`` and the end-to-end tests).
* :mod:`pyroki_ros.ros.demo` -- ``pyroki-ros demo``.
* :mod:`pyroki_ros.ros.markers` -- the node's RViz markers (``~/markers``).
* :mod:`pyroki_ros.ros.view` -- ``pyroki-ros view``: a running node in the web viewer.

Importing this package needs rclpy and the generated interfaces (``./setup.sh``); the core
(``pyroki_ros`` minus this subpackage) does not.
"""
