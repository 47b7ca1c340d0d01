"""Reading a URDF into a validated, kinematics-only description.

Parsing is done by yourdfpy; before handing the document to it we check everything that
would otherwise surface as an obscure ``KeyError`` or, worse, as a silently wrong model
(yourdfpy's XML reader recovers from broken documents). Meshes are never loaded: kinematics
does not need them, and a ``robot_description`` usually names ``package://`` meshes that are
not on this machine.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Collection
from pathlib import Path

import numpy as np
import yourdfpy
from lxml import etree

SUPPORTED_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


class URDFError(ValueError):
    """The URDF cannot be turned into a robot model; the message names the problem."""


@dataclasses.dataclass(frozen=True)
class JointDescription:
    """One URDF joint, kinematics only. Angles in rad, lengths in m."""

    name: str
    type: str  # one of SUPPORTED_JOINT_TYPES
    parent: str
    child: str
    origin: np.ndarray  # (4, 4) parent-link frame -> joint (= child-link) frame
    axis: np.ndarray  # (3,) unit vector in the joint frame
    lower: float  # position limits; -inf/inf where the URDF sets none
    upper: float
    velocity: float  # |qdot| limit, inf where none
    effort: float  # inf where none
    mimic_joint: str | None  # value = multiplier * mimic_joint + offset
    multiplier: float
    offset: float


@dataclasses.dataclass(frozen=True)
class URDFDescription:
    """The kinematic tree of a URDF, validated."""

    name: str
    link_names: tuple[str, ...]  # breadth-first from the root
    joints: tuple[JointDescription, ...]  # in document order


def read_urdf(source: str | os.PathLike) -> tuple[URDFDescription, yourdfpy.URDF]:
    """Parses and validates a URDF given as a file path or as XML text.

    Raises:
        URDFError: with a message naming the problem.
    """
    xml_root = _parse_xml(source)
    order = _check_structure(xml_root)
    try:
        robot = yourdfpy.URDF._parse_robot(xml_element=xml_root)
        urdf = yourdfpy.URDF(
            robot=robot, build_scene_graph=False, load_meshes=False, load_collision_meshes=False
        )
    except Exception as e:  # yourdfpy's own errors carry no context; add ours
        raise URDFError(f"yourdfpy could not read the URDF: {type(e).__name__}: {e}") from e
    return _describe(urdf, order), urdf


def _parse_xml(source: str | os.PathLike) -> etree._Element:
    if isinstance(source, Path) or not str(source).lstrip().startswith("<"):
        path = Path(source)
        if not path.is_file():
            raise URDFError(f"URDF file not found: '{path}' (pass a file path or the XML text)")
        data = path.read_bytes()
    else:
        data = str(source).encode()
    try:
        return etree.fromstring(data, etree.XMLParser(remove_blank_text=True, remove_comments=True))
    except etree.XMLSyntaxError as e:
        raise URDFError(f"URDF is not well-formed XML: {e}") from e


def _floats(element: etree._Element | None, attribute: str, count: int, default: str, what: str):
    text = default if element is None else element.get(attribute, default)
    try:
        values = [float(p) for p in text.split()]
    except ValueError:
        raise URDFError(f"{what}: {attribute}='{text}' is not numeric") from None
    if len(values) != count:
        raise URDFError(f"{what}: {attribute}='{text}' must have {count} numbers")
    if not all(math.isfinite(v) for v in values):
        raise URDFError(f"{what}: {attribute}='{text}' is not finite")
    return values


def _optional_float(element: etree._Element | None, attribute: str, what: str) -> float | None:
    if element is None or element.get(attribute) is None:
        return None
    return _floats(element, attribute, 1, "", what)[0]


def _new_name(element: etree._Element, seen: Collection[str]) -> str:
    """The name of a <link> or <joint>: URDFError if it has none or one in ``seen``."""
    name = element.get("name")
    if not name:
        raise URDFError(f"a <{element.tag}> has no name attribute")
    if name in seen:
        raise URDFError(f"duplicate {element.tag} name '{name}'")
    return name


def _check_structure(root: etree._Element) -> tuple[str, ...]:
    """Checks what yourdfpy would not: names, references, numbers and the tree shape.
    Returns the link names breadth-first from the root, children in document order."""
    if not isinstance(root.tag, str) or etree.QName(root).localname != "robot":
        raise URDFError(f"URDF root element must be <robot>, got <{root.tag}>")
    links = root.findall("link")
    if not links:
        raise URDFError("URDF has no <link> elements")

    link_names: list[str] = []
    for link in links:
        link_names.append(_new_name(link, link_names))
    known_links = set(link_names)

    joint_type: dict[str, str] = {}
    parent_of: dict[str, str] = {}  # child link -> parent link
    mimic_of: dict[str, str] = {}
    for joint in root.findall("joint"):
        name = _new_name(joint, joint_type)
        what = f"joint '{name}'"
        jtype = joint.get("type")
        if jtype not in SUPPORTED_JOINT_TYPES:
            raise URDFError(
                f"{what} has type '{jtype}'; supported types: {', '.join(SUPPORTED_JOINT_TYPES)}"
            )
        joint_type[name] = jtype
        ends = {}
        for end in ("parent", "child"):
            element = joint.find(end)
            link = None if element is None else element.get("link")
            if not link:
                raise URDFError(f"{what} has no <{end} link='...'/>")
            if link not in known_links:
                raise URDFError(f"{what}: {end} link '{link}' does not exist")
            ends[end] = link
        if ends["parent"] == ends["child"]:
            raise URDFError(f"{what} connects link '{ends['child']}' to itself (a loop)")
        if ends["child"] in parent_of:
            raise URDFError(
                f"link '{ends['child']}' is the child of two joints (a loop): a URDF must be a tree"
            )
        parent_of[ends["child"]] = ends["parent"]

        origin = joint.find("origin")
        _floats(origin, "xyz", 3, "0 0 0", f"{what} <origin>")
        _floats(origin, "rpy", 3, "0 0 0", f"{what} <origin>")
        axis = _floats(joint.find("axis"), "xyz", 3, "1 0 0", f"{what} <axis>")
        if jtype != "fixed" and np.linalg.norm(axis) < 1e-12:
            raise URDFError(f"{what} has a zero <axis>")
        limit = joint.find("limit")
        lower, upper, _, _ = (  # a bound not given reads 0
            _optional_float(limit, attribute, f"{what} <limit>") or 0.0
            for attribute in ("lower", "upper", "velocity", "effort")
        )
        if jtype in ("revolute", "prismatic") and lower > upper:
            raise URDFError(f"{what}: lower limit {lower} is above upper limit {upper}")
        mimic = joint.find("mimic")
        if mimic is not None:
            target = mimic.get("joint")
            if not target:
                raise URDFError(f"{what} has a <mimic> without a joint attribute")
            _optional_float(mimic, "multiplier", f"{what} <mimic>")
            _optional_float(mimic, "offset", f"{what} <mimic>")
            mimic_of[name] = target

    for name, target in mimic_of.items():
        if target not in joint_type:
            raise URDFError(f"joint '{name}' mimics unknown joint '{target}'")
        if joint_type[target] == "fixed":
            raise URDFError(f"joint '{name}' mimics fixed joint '{target}'")
        seen = {name}
        while target in mimic_of:  # a mimic of a mimic is fine; a cycle is not
            if target in seen:
                raise URDFError(f"mimic joints form a cycle through '{target}'")
            seen.add(target)
            target = mimic_of[target]

    roots = [link for link in link_names if link not in parent_of]
    if not roots:
        raise URDFError("URDF has no root link: the joints form a loop")
    if len(roots) > 1:
        raise URDFError(
            f"URDF has {len(roots)} root links ({', '.join(roots[:5])}): "
            "every link except one must be the child of a joint"
        )
    # With one parent per link and a single root, anything not reachable from it is on a cycle.
    children: dict[str, list[str]] = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    order, frontier = [roots[0]], [roots[0]]
    while frontier:  # breadth-first, children in document order
        frontier = [c for link in frontier for c in children.get(link, [])]
        order.extend(frontier)
    if len(order) != len(link_names):
        loop = sorted(known_links - set(order))
        raise URDFError(f"links {', '.join(loop[:5])} form a loop not connected to the root")
    return tuple(order)


def _describe(urdf: yourdfpy.URDF, order: tuple[str, ...]) -> URDFDescription:
    joints = []
    for j in urdf.robot.joints:
        limit = j.limit or yourdfpy.Limit()  # every field None: no limit given
        lower, upper = -math.inf, math.inf
        if j.type in ("revolute", "prismatic"):  # a bound not given reads 0
            lower = 0.0 if limit.lower is None else limit.lower
            upper = 0.0 if limit.upper is None else limit.upper
        axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), dtype=np.float64)
        mimic = j.mimic  # yourdfpy sets a missing multiplier / offset to 1 / 0
        joints.append(
            JointDescription(
                name=j.name,
                type=j.type,
                parent=j.parent,
                child=j.child,
                origin=np.asarray(j.origin if j.origin is not None else np.eye(4), np.float64),
                axis=axis / np.linalg.norm(axis) if j.type != "fixed" else axis,
                lower=float(lower),
                upper=float(upper),
                velocity=float(limit.velocity or math.inf),
                effort=float(limit.effort or math.inf),
                mimic_joint=mimic.joint if mimic else None,
                multiplier=float(mimic.multiplier) if mimic else 1.0,
                offset=float(mimic.offset) if mimic else 0.0,
            )
        )
    return URDFDescription(name=urdf.robot.name or "", link_names=order, joints=tuple(joints))
