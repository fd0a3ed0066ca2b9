"""A URDF of a floating-base MuJoCo model, for runtimes that compute kinematics from one.

holosoma-inference's tracking policy class reads the robot's URDF from the ONNX metadata
(``robot_urdf``) and runs pinocchio forward kinematics on it to find its reference body's
orientation; our export writes the URDF of the model the policy was trained on.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from unilab_gpu.sim.joints import has_free_root


def _rpy(quat: np.ndarray) -> tuple[float, float, float]:
    """URDF roll, pitch, yaw (``R = Rz(yaw) Ry(pitch) Rx(roll)``) of a wxyz quaternion."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(quat, dtype=np.float64))
    r = rot.reshape(3, 3)
    return (math.atan2(r[2, 1], r[2, 2]), math.asin(max(-1.0, min(1.0, -r[2, 0]))), math.atan2(r[1, 0], r[0, 0]))


def _origin(pos: np.ndarray, quat: np.ndarray) -> str:
    xyz = " ".join(f"{v:.9g}" for v in pos)
    rpy = " ".join(f"{v:.9g}" for v in _rpy(quat))
    return f'<origin xyz="{xyz}" rpy="{rpy}"/>'


def urdf_of(model: mujoco.MjModel, name: str = "robot") -> str:
    """The kinematic tree of ``model`` as URDF text: one link per body (mass and inertia included),
    the free root joint left out (the runtime adds its own floating base), every hinge a
    ``revolute`` joint (``continuous`` when unlimited) at its child body's frame, a body without
    joints attached by a ``fixed`` one.

    Raises:
        ValueError: no free root joint, a joint not at its body's origin, or a body with more
            than one joint or a slide/ball joint (URDF links have at most one 1-dof joint).
    """
    if not has_free_root(model):
        raise ValueError("urdf_of needs a model whose first joint is a free joint")
    lines = [f"<robot name={quoteattr(name)}>"]
    for b in range(1, model.nbody):
        body = model.body(b)
        inertia = " ".join(f'{k}="{v:.9g}"' for k, v in zip(("ixx", "iyy", "izz"), model.body_inertia[b], strict=True))
        mass = f'<mass value="{model.body_mass[b]:.9g}"/>'
        lines += [
            f"  <link name={quoteattr(body.name)}>",
            f"    <inertial>{_origin(model.body_ipos[b], model.body_iquat[b])}{mass}"
            f'<inertia {inertia} ixy="0" ixz="0" iyz="0"/></inertial>',
            "  </link>",
        ]
    for b in range(2, model.nbody):  # body 1 is the root
        joints = range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b])
        if len(joints) > 1 or any(int(model.jnt_type[j]) != int(mujoco.mjtJoint.mjJNT_HINGE) for j in joints):
            raise ValueError(f"body '{model.body(b).name}': URDF links take at most one hinge joint")
        parent, child = model.body(int(model.body_parentid[b])).name, model.body(b).name
        origin = _origin(model.body_pos[b], model.body_quat[b])
        if not joints:
            lines.append(f'  <joint name={quoteattr(child + "_fixed")} type="fixed">{origin}'
                         f"<parent link={quoteattr(parent)}/><child link={quoteattr(child)}/></joint>")  # fmt: skip
            continue
        j = joints[0]
        if np.any(model.jnt_pos[j] != 0):
            raise ValueError(f"joint '{model.joint(j).name}' is not at its body's origin")
        axis = " ".join(f"{v:.9g}" for v in model.jnt_axis[j])
        limited = bool(model.jnt_limited[j])
        kind = "revolute" if limited else "continuous"
        low, high = model.jnt_range[j]
        limit = f'<limit lower="{low:.9g}" upper="{high:.9g}" effort="0" velocity="0"/>' if limited else ""
        lines.append(
            f'  <joint name={quoteattr(model.joint(j).name)} type="{kind}">{origin}<parent link={quoteattr(parent)}/>'
            f'<child link={quoteattr(child)}/><axis xyz="{axis}"/>{limit}</joint>'
        )
    lines.append("</robot>")
    return "\n".join(lines) + "\n"
