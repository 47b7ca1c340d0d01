"""pyroki_ros: batched, differentiable robot kinematics and optimization in JAX, with a ROS 2 node.

The core (this package minus :mod:`pyroki_ros.ros`) imports without rclpy.
"""

# rosidl installs the generated interface code (pyroki_ros.msg, pyroki_ros.srv) into the
# environment's site-packages/pyroki_ros; merge that directory into this package so an editable
# source checkout and the compiled interfaces live side by side.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from pyroki_ros.model.kinematics import forward_kinematics, link_jacobian
from pyroki_ros.model.robot import Robot
from pyroki_ros.model.urdf import URDFError

__all__ = ["Robot", "URDFError", "forward_kinematics", "link_jacobian"]
