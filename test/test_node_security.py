"""SROS2 (DDS security) for pyroki_ros_node: docs/security.md, docs/sros2_policy.xml.

* The policy's /pyroki_ros enclave grants exactly what the running node creates (its graph:
  topics, subscriptions, services of the node, its worker node and its inputs node), no more,
  no less.
* The node under ROS_SECURITY_STRATEGY=Enforce with a keystore made by hand (openssl, SROS2
  layout, permissions generated from the policy file) serves a client holding the
  /pyroki_ros_client enclave, and is invisible to a client without one. Skipped when the
  installed Fast DDS has no security support: the PyPI wheels (ros-fastdds 3.2.3) are built
  without it ("This Fast DDS version doesn't have the security libraries"), so this test has
  not run here; it starts running as soon as the middleware supports security.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

from harness import IsolatedNode
from node_helpers import CONFIG, start_node
from pyroki_ros.srv import ComputeFK
from rclpy._rclpy_pybind11 import NodeNameNonExistentError
from sensor_msgs.msg import JointState

from pyroki_ros.robots import urdf_path

POLICY = pathlib.Path(__file__).resolve().parents[1] / "docs" / "sros2_policy.xml"
NODE_ENCLAVE = "/pyroki_ros"
CLIENT_ENCLAVE = "/pyroki_ros_client"
NODE = "pyroki_ros_node"
WORKER = "pyroki_ros_node_worker"
INPUTS = "pyroki_ros_node_inputs"  # the node's topics, on a participant of their own
# Hidden graph topic every rmw_fastrtps participant uses (sros2 adds it to every grant).
DISCOVERY_TOPIC = "ros_discovery_info"

# Every domain id: the harness picks one per test run.
DOMAINS = "<domains><id_range><min>0</min><max>232</max></id_range></domains>"
GOVERNANCE = """<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
    xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_governance.xsd">
  <domain_access_rules>
    <domain_rule>
      <domains><id_range><min>0</min><max>232</max></id_range></domains>
      <allow_unauthenticated_participants>false</allow_unauthenticated_participants>
      <enable_join_access_control>true</enable_join_access_control>
      <discovery_protection_kind>ENCRYPT</discovery_protection_kind>
      <liveliness_protection_kind>ENCRYPT</liveliness_protection_kind>
      <rtps_protection_kind>SIGN</rtps_protection_kind>
      <topic_access_rules>
        <topic_rule>
          <topic_expression>*</topic_expression>
          <enable_discovery_protection>true</enable_discovery_protection>
          <enable_liveliness_protection>true</enable_liveliness_protection>
          <enable_read_access_control>true</enable_read_access_control>
          <enable_write_access_control>true</enable_write_access_control>
          <metadata_protection_kind>ENCRYPT</metadata_protection_kind>
          <data_protection_kind>ENCRYPT</data_protection_kind>
        </topic_rule>
      </topic_access_rules>
    </domain_rule>
  </domain_access_rules>
</dds>
"""


# --- the policy, as sros2 reads it -------------------------------------------------------------


def _expand(name: str, ns: str, node: str) -> str:
    """A policy name as a fully qualified ROS name (sros2's permissions.xsl rules)."""
    ns = ns if ns.endswith("/") else ns + "/"
    if name.startswith("/"):
        return name
    if name.startswith("~"):
        return ns + node + name[1:]
    return ns + name


def policy_grants(enclave: str) -> dict[str, dict[str, set[str]]]:
    """{node: {"publish"|"subscribe"|"reply"|"request": fully qualified names}} of one
    enclave of docs/sros2_policy.xml."""
    root = ET.parse(POLICY).getroot()
    found = [e for e in root.iter("enclave") if e.get("path") == enclave]
    assert len(found) == 1, f"enclave {enclave} not (or twice) in {POLICY}"
    grants: dict[str, dict[str, set[str]]] = {}
    for profile in found[0].iter("profile"):
        ns, node = profile.get("ns"), profile.get("node")
        rules = grants.setdefault(node, {})
        for group in profile:
            kind = {"topics": "topic", "services": "service"}[group.tag]
            for access, value in group.attrib.items():
                assert value == "ALLOW", f"{enclave}/{node}: only ALLOW rules expected"
                names = {_expand(e.text.strip(), ns, node) for e in group.iter(kind)}
                rules.setdefault(access, set()).update(names)
    return grants


def dds_topics(enclave: str) -> tuple[set[str], set[str]]:
    """(publish, subscribe) DDS topic names the enclave's grant allows: ROS topic /x is rt/x,
    a service /s is rq/sRequest + rr/sReply (the client publishes the request)."""
    publish, subscribe = {DISCOVERY_TOPIC}, {DISCOVERY_TOPIC}
    for rules in policy_grants(enclave).values():
        publish |= {"rt" + n for n in rules.get("publish", ())}
        subscribe |= {"rt" + n for n in rules.get("subscribe", ())}
        for n in rules.get("request", ()):
            publish.add(f"rq{n}Request")
            subscribe.add(f"rr{n}Reply")
        for n in rules.get("reply", ()):
            subscribe.add(f"rq{n}Request")
            publish.add(f"rr{n}Reply")
    return publish, subscribe


def permissions_xml(enclave: str) -> str:
    """The DDS permissions document of one enclave (what `ros2 security create_permission`
    writes for this policy)."""
    publish, subscribe = dds_topics(enclave)
    now = datetime.datetime.now(datetime.UTC)

    def stamp(t: datetime.datetime) -> str:
        return t.strftime("%Y-%m-%dT%H:%M:%S")

    def topics(names: set[str]) -> str:
        return "".join(f"<topic>{n}</topic>" for n in sorted(names))

    return (
        '<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/'
        'omg_shared_ca_permissions.xsd"><permissions>'
        f'<grant name="{enclave}"><subject_name>CN={enclave}</subject_name>'
        f"<validity><not_before>{stamp(now - datetime.timedelta(days=1))}</not_before>"
        f"<not_after>{stamp(now + datetime.timedelta(days=30))}</not_after></validity>"
        f"<allow_rule>{DOMAINS}"
        f"<publish><topics>{topics(publish)}</topics></publish>"
        f"<subscribe><topics>{topics(subscribe)}</topics></subscribe>"
        "</allow_rule><default>DENY</default></grant></permissions></dds>\n"
    )


# --- a keystore by hand: the SROS2 layout, with openssl ------------------------------------------


def _openssl(*args: str, cwd: pathlib.Path) -> None:
    result = subprocess.run(
        ["openssl", *args], check=False, cwd=cwd, capture_output=True, text=True
    )
    assert result.returncode == 0, f"openssl {' '.join(args)}:\n{result.stderr}"


def _sign(keystore: pathlib.Path, document: pathlib.Path) -> None:
    """document.xml -> document.p7s, S/MIME signed by the permissions CA (as sros2 does)."""
    _openssl(
        "smime", "-sign", "-text", "-md", "sha256",
        "-in", str(document), "-out", str(document.with_suffix(".p7s")),
        "-signer", "public/permissions_ca.cert.pem", "-inkey", "private/permissions_ca.key.pem",
        cwd=keystore,
    )  # fmt: skip


def make_keystore(keystore: pathlib.Path, enclaves: list[str]) -> None:
    """keystore/{public,private}/ (one CA as identity and permissions CA), enclaves/
    governance.p7s, and per enclave: cert.pem, key.pem (ECDSA P-256, CN = enclave), the CA
    certificates, governance.p7s and permissions.p7s generated from docs/sros2_policy.xml."""
    for folder in ("public", "private", "enclaves"):
        (keystore / folder).mkdir(parents=True, exist_ok=True)
    ec = ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    _openssl("genpkey", *ec, "-out", "private/ca.key.pem", cwd=keystore)
    _openssl(
        "req", "-new", "-x509", "-sha256", "-days", "30", "-key", "private/ca.key.pem",
        "-subj", "/CN=sros2CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-out", "public/ca.cert.pem",
        cwd=keystore,
    )  # fmt: skip
    for role in ("identity_ca", "permissions_ca"):
        shutil.copy(keystore / "public/ca.cert.pem", keystore / f"public/{role}.cert.pem")
        shutil.copy(keystore / "private/ca.key.pem", keystore / f"private/{role}.key.pem")
    governance = keystore / "enclaves/governance.xml"
    governance.write_text(GOVERNANCE)
    _sign(keystore, governance)
    for enclave in enclaves:
        folder = keystore / "enclaves" / enclave.strip("/")
        folder.mkdir(parents=True)
        _openssl("genpkey", *ec, "-out", str(folder / "key.pem"), cwd=keystore)
        csr = folder / "request.csr"
        subject = "/CN=" + enclave.replace("/", "\\/")
        _openssl(
            "req", "-new", "-key", str(folder / "key.pem"), "-subj", subject, "-out", str(csr),
            cwd=keystore,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-sha256", "-days", "30", "-in", str(csr),
            "-CA", "public/identity_ca.cert.pem", "-CAkey", "private/identity_ca.key.pem",
            "-CAcreateserial", "-out", str(folder / "cert.pem"),
            cwd=keystore,
        )  # fmt: skip
        csr.unlink()
        for name in ("identity_ca.cert.pem", "permissions_ca.cert.pem"):
            shutil.copy(keystore / "public" / name, folder / name)
        shutil.copy(keystore / "enclaves/governance.p7s", folder / "governance.p7s")
        permissions = folder / "permissions.xml"
        permissions.write_text(permissions_xml(enclave))
        _sign(keystore, permissions)


def security_env(keystore: pathlib.Path, enclave: str) -> dict[str, str]:
    return {
        "ROS_SECURITY_KEYSTORE": str(keystore),
        "ROS_SECURITY_ENABLE": "true",
        "ROS_SECURITY_STRATEGY": "Enforce",
        "ROS_SECURITY_ENCLAVE_OVERRIDE": enclave,
    }


PROBE = """
import rclpy
from rclpy.signals import SignalHandlerOptions
rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
rclpy.create_node("pyroki_ros_client").destroy_node()
rclpy.shutdown()
"""


def security_unavailable(keystore: pathlib.Path, log_dir: pathlib.Path) -> str | None:
    """Why a node cannot be created with the keystore's client enclave enforced (None: it
    can): the rmw's own error, e.g. Fast DDS built without -DSECURITY=ON."""
    env = dict(os.environ, ROS_LOG_DIR=str(log_dir), **security_env(keystore, CLIENT_ENCLAVE))
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode == 0:
        return None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "doesn't" in line]
    return " / ".join(errors[-2:] or lines[-2:])


# --- tests -------------------------------------------------------------------------------------


def test_policy_grants_exactly_the_running_nodes_interfaces(tmp_path_factory):
    # No urdf_file: the node also subscribes robot_description.
    env = start_node(tmp_path_factory, "test_node_security_graph")
    try:
        session = env.session.node
        grants = policy_grants(NODE_ENCLAVE)
        assert set(grants) == {NODE, WORKER, INPUTS}
        env.client(ComputeFK, "compute_fk")  # the node is up
        deadline = time.monotonic() + 15.0
        for node in (NODE, WORKER, INPUTS):
            while True:  # until discovery shows all of it
                try:
                    actual = {
                        "publish": session.get_publisher_names_and_types_by_node(node, "/"),
                        "subscribe": session.get_subscriber_names_and_types_by_node(node, "/"),
                        "reply": session.get_service_names_and_types_by_node(node, "/"),
                        "request": session.get_client_names_and_types_by_node(node, "/"),
                    }
                except NodeNameNonExistentError:  # not discovered yet
                    actual = {}
                actual = {k: {name for name, _ in v} for k, v in actual.items()}
                actual = {k: v for k, v in actual.items() if v}
                if actual == grants[node] or time.monotonic() > deadline:
                    break
                assert env.node.alive(), env.node.log()[-3000:]
                time.sleep(0.2)
            assert actual == grants[node], f"{node}: graph {actual}\npolicy {grants[node]}"
    finally:
        env.close()


def test_the_client_enclave_may_call_but_not_reconfigure():
    client = policy_grants(CLIENT_ENCLAVE)["pyroki_ros_client"]
    ours = {
        "solve_ik",
        "compute_fk",
        "solve_ik_batch",
        "plan_trajectory",
        "retarget_motion",
        "apply_planning_scene",
    }
    assert client["request"] == {f"/{NODE}/{name}" for name in ours}
    assert client["publish"] >= {f"/{NODE}/goal_pose", f"/{NODE}/goal"}
    assert not client.get("subscribe")  # e.g. no robot_description


@pytest.mark.slow
def test_enforced_security_serves_only_an_enclave_holder(tmp_path_factory, monkeypatch):
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed: cannot create the SROS2 keystore")
    keystore = tmp_path_factory.mktemp("keystore")
    make_keystore(keystore, [NODE_ENCLAVE, CLIENT_ENCLAVE])
    reason = security_unavailable(keystore, tmp_path_factory.mktemp("probe_log"))
    if reason is not None:
        pytest.skip(f"DDS security unavailable in this ROS 2 install: {reason}")

    # The client session of this process: the client enclave (read when its context starts).
    for key, value in security_env(keystore, CLIENT_ENCLAVE).items():
        monkeypatch.setenv(key, value)
    env = IsolatedNode(
        "pyroki_ros",  # the client session's node: pyroki_ros_client, as in the policy
        tmp_path_factory.mktemp("secure_node"),
        [
            "--params-file",
            str(CONFIG),
            "-p",
            f"urdf_file:={urdf_path('panda')}",
            "-p",
            "warmup_plan:=false",
        ],
        extra_env=security_env(keystore, NODE_ENCLAVE),
    )
    try:
        env.wait_ready("panda_hand", joint="panda_joint1")
        response = env.call(
            ComputeFK,
            "compute_fk",
            ComputeFK.Request(
                link_names=["panda_hand"],
                robot_state=JointState(name=["panda_joint1"], position=[0.0]),
            ),
        )
        assert response.success, response.message
        # Without an enclave: the node is not even discovered.
        outsider = subprocess.run(
            [sys.executable, "-c", _OUTSIDER],
            check=False,
            env={
                k: v
                for k, v in dict(os.environ, **env.env).items()
                if not k.startswith("ROS_SECURITY")
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert outsider.stdout.strip() == "not found", outsider.stdout + outsider.stderr
    finally:
        env.close()


_OUTSIDER = """
import rclpy
from rclpy.signals import SignalHandlerOptions
from pyroki_ros.srv import ComputeFK
from rclpy._rclpy_pybind11 import NodeNameNonExistentError
rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
node = rclpy.create_node("outsider")
found = node.create_client(ComputeFK, "/pyroki_ros_node/compute_fk").wait_for_service(3.0)
print("found" if found else "not found")
"""
