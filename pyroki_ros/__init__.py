"""pyroki_ros: batched, differentiable robot kinematics and optimization in JAX, with a ROS 2 node.

The core (this package minus :mod:`pyroki_ros.ros`) imports without rclpy.
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

__all__ = ["Robot", "URDFError", "forward_kinematics", "link_jacobian"]

# Loaded on first use, so that the ROS interfaces (``pyroki_ros.msg``, ``pyroki_ros.srv``)
# import without JAX: the node's topic process (ros/inputs.py) needs only them.
_EXPORTS = {
    "Robot": "pyroki_ros.model.robot",
    "URDFError": "pyroki_ros.model.urdf",
    "forward_kinematics": "pyroki_ros.model.kinematics",
    "link_jacobian": "pyroki_ros.model.kinematics",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pyroki_ros' has no attribute {name!r}")
