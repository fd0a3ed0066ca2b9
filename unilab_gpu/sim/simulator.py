"""A batch of MJWarp worlds with zero-copy torch views of their state."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from unilab_gpu.sim import kernels
from unilab_gpu.sim.device import (
    apply_warp_cuda_output,
    resolve_device,
    set_warp_verbose,
    torch_stream_scope,
    warp_device,
)
from unilab_gpu.sim.model_files import load_mj_model
from unilab_gpu.sim.names import resolve_names
from unilab_gpu.sim.overflow import SOLVER_LIMITS, check_capacity
from unilab_gpu.sim.scratch_batch import ScratchBatch, kinematics
from unilab_gpu.sim.state import SimState
from unilab_gpu.sim.world_memory import check_worlds_fit

DEFAULT_NJMAX = 300
"""Constraint rows per world. A G1 standing on 8 foot points with a few active joint limits uses
~40; a fallen one with arms and torso on the floor stays well below 300 (MJWarp's default of 64
overflows on the first step)."""

DEFAULT_NCONMAX = 48
"""Contacts per world. The G1 has no self-collision, so contacts are robot geoms against the
floor only: at most ~2 per capsule."""


class Simulator:
    """``num_envs`` copies of one MuJoCo model stepped by MJWarp on one device.

    State lives in MJWarp's device arrays; ``self.state`` holds torch views of them, so managers
    read and write physics state without copies. Every Warp launch goes to torch's current
    stream, which makes the simulator capturable inside a ``torch.cuda.graph`` together with torch
    code (see ``unilab_gpu.sim.capture``).

    On CPU, ``step``, ``refresh`` and ``write_rows`` replay Warp CPU graphs of their kernel
    launches (recorded on first use, bit-identical to eager launches and several times faster
    because they skip Python dispatch per kernel).
    """

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        num_envs: int,
        device: str | torch.device = "cpu",
        *,
        njmax: int = DEFAULT_NJMAX,
        nconmax: int = DEFAULT_NCONMAX,
        keyframe: str | None = None,
        cpu_graph: bool = True,
        refresh_capacity: int = 0,
        batched_model_fields: Sequence[str] = (),
        deterministic: bool = False,
        verbose: bool | None = None,
    ) -> None:
        """Put ``mj_model`` on ``device`` for ``num_envs`` worlds.

        Args:
          num_envs: number of worlds, >= 1.
          device: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (normalized to an indexed
            device, ``torch_device``).
          njmax: constraint rows per world.
          nconmax: contacts per world.
          keyframe: name of the keyframe every world starts from (default: the model's qpos0).
          cpu_graph: on CPU, replay substeps from a Warp CPU graph instead of launching eagerly.
          refresh_capacity: number of rows ``refresh(env_ids)`` handles at once (0: only
            full-width refreshes); a scratch batch of this many worlds is allocated now, with its
            own rows of the per-world model fields (gathered from the listed worlds' rows).
          batched_model_fields: MJWarp model fields to give one copy per world (e.g.
            ``geom_friction`` for domain randomization), exposed in ``model_fields``.
          deterministic: MJWarp's deterministic mode (``opt.deterministic = ALL``: sorted contacts
            and constraint rows, order-invariant atomics), so two runs from one state agree bit for
            bit; slower, for tests and self-checks.
          verbose: show Warp's own log lines (module loads); ``None`` reads ``UNILAB_VERBOSE``.
        """
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if njmax < 1 or nconmax < 1:
            raise ValueError(f"njmax and nconmax must be >= 1, got njmax={njmax}, nconmax={nconmax}")
        self.mj_model = mj_model
        self.num_envs = num_envs
        set_warp_verbose(verbose)
        apply_warp_cuda_output()
        self.torch_device = resolve_device(device)
        self.wp_device = warp_device(self.torch_device)
        self.cpu_graph = cpu_graph and self.wp_device.is_cpu
        self._graphs: dict[tuple, wp.Graph] = {}

        self.body_names = _names(mj_model, mujoco.mjtObj.mjOBJ_BODY, mj_model.nbody)
        self.joint_names = _names(mj_model, mujoco.mjtObj.mjOBJ_JOINT, mj_model.njnt)
        self.actuator_names = _names(mj_model, mujoco.mjtObj.mjOBJ_ACTUATOR, mj_model.nu)
        self.sensor_names = _names(mj_model, mujoco.mjtObj.mjOBJ_SENSOR, mj_model.nsensor)
        self.site_names = _names(mj_model, mujoco.mjtObj.mjOBJ_SITE, mj_model.nsite)
        self.geom_names = _names(mj_model, mujoco.mjtObj.mjOBJ_GEOM, mj_model.ngeom)

        initial = mujoco.MjData(mj_model)
        if keyframe is not None:
            key_names = _names(mj_model, mujoco.mjtObj.mjOBJ_KEY, mj_model.nkey)
            mujoco.mj_resetDataKeyframe(mj_model, initial, resolve_names("keyframe", keyframe, key_names)[0])

        check_worlds_fit(mj_model, num_envs, self.torch_device, njmax, nconmax)  # one line, not an allocation failure
        with wp.ScopedDevice(self.wp_device):
            self.model = mjw.put_model(mj_model, batch_sizes={f: num_envs for f in batched_model_fields})
            if deterministic:
                self.model.opt.deterministic = mjw.DeterminismType.ALL
            self.model.opt.warn_overflow = int(mjw.OverflowType.ALL) & ~SOLVER_LIMITS  # counted, not printed
            if self.wp_device.is_cuda:
                # A fixed number of solver iterations instead of MJWarp's early-exit loop: its
                # wp.capture_while ends and resumes the stream capture (a new CUDA capture id, which
                # torch's graph pool and RNG state cannot follow: sim/capture.py), and without a
                # capture it synchronizes the host at every iteration. Converged worlds skip the rest.
                self.model.opt.graph_conditional = False
            self.data = mjw.make_data(mj_model, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            self._body_lin_vel = wp.zeros((num_envs, mj_model.nbody), dtype=wp.vec3)
            self._body_ang_vel = wp.zeros((num_envs, mj_model.nbody), dtype=wp.vec3)
            self._body_contact = wp.zeros((num_envs, mj_model.nbody), dtype=float)
            self._scratch = (
                ScratchBatch(mj_model, self.model, refresh_capacity, batched_model_fields) if refresh_capacity else None
            )

        self.state = SimState(
            qpos=wp.to_torch(self.data.qpos),
            qvel=wp.to_torch(self.data.qvel),
            ctrl=wp.to_torch(self.data.ctrl),
            body_pos_w=wp.to_torch(self.data.xpos),
            body_quat_w=wp.to_torch(self.data.xquat),
            body_rotmat_w=wp.to_torch(self.data.xmat),
            body_lin_vel_w=wp.to_torch(self._body_lin_vel),
            body_ang_vel_w=wp.to_torch(self._body_ang_vel),
            site_pos_w=wp.to_torch(self.data.site_xpos),
            site_rotmat_w=wp.to_torch(self.data.site_xmat),
            sensordata=wp.to_torch(self.data.sensordata),
            body_contact=wp.to_torch(self._body_contact),
        )
        self.overflow = wp.to_torch(self.data.overflow)
        """MJWarp's per-world overflow bitmask (``mujoco_warp.OverflowType``), ``(num_envs,)`` int32
        view: capacity bits stay set (:meth:`check`), the :data:`SOLVER_LIMITS` bits are the env's to
        count and clear."""
        self.model_fields = {name: wp.to_torch(getattr(self.model, name)) for name in batched_model_fields}
        """Per-world model fields, name -> ``(num_envs, ...)`` torch view (write to randomize)."""
        for name in ("qpos", "qvel", "ctrl"):
            getattr(self.state, name).copy_(torch.from_numpy(getattr(initial, name)))
        self.refresh()

    @classmethod
    def from_file(
        cls,
        source: str | Path | mujoco.MjSpec,
        num_envs: int,
        device: str | torch.device = "cpu",
        *,
        edit: Callable[[mujoco.MjSpec], None] | None = None,
        **kwargs,
    ) -> Simulator:
        """Compile ``source`` (a path or a robot name such as ``"g1"``) and build a simulator."""
        return cls(load_mj_model(source, edit), num_envs, device, **kwargs)

    # ----------------------------------------------------------------------------------------
    # Names (cold path).

    def body_ids(self, names: str | Sequence[str]) -> list[int]:
        """MuJoCo body ids for names or full-match regular expressions."""
        return resolve_names("body", names, self.body_names)

    def joint_ids(self, names: str | Sequence[str]) -> list[int]:
        """MuJoCo joint ids (indices of ``mj_model.jnt_*``; not columns of ``Robot.joint_pos``,
        see ``Robot.joint_columns``) for names or full-match regular expressions."""
        return resolve_names("joint", names, self.joint_names)

    def actuator_ids(self, names: str | Sequence[str]) -> list[int]:
        """Actuator ids (= columns of ``ctrl``) for names or regular expressions."""
        return resolve_names("actuator", names, self.actuator_names)

    def sensor_ids(self, names: str | Sequence[str]) -> list[int]:
        """MuJoCo sensor ids for names or regular expressions."""
        return resolve_names("sensor", names, self.sensor_names)

    def site_ids(self, names: str | Sequence[str]) -> list[int]:
        """MuJoCo site ids for names or regular expressions."""
        return resolve_names("site", names, self.site_names)

    def geom_ids(self, names: str | Sequence[str]) -> list[int]:
        """MuJoCo geom ids for names or regular expressions."""
        return resolve_names("geom", names, self.geom_names)

    def sensor_slice(self, name: str) -> slice:
        """Columns of ``state.sensordata`` that hold sensor ``name``."""
        (sensor_id,) = resolve_names("sensor", [name], self.sensor_names)
        start = int(self.mj_model.sensor_adr[sensor_id])
        return slice(start, start + int(self.mj_model.sensor_dim[sensor_id]))

    # ----------------------------------------------------------------------------------------
    # Hot path: no host synchronization, no allocation that outlives the call.

    def step(self, substeps: int = 1) -> None:
        """Advance every world by ``substeps`` physics steps (``ctrl`` held constant).

        ``state.body_contact`` then holds the contacts of the last substep.
        """

        def launches() -> None:
            for _ in range(substeps):
                mjw.step(self.model, self.data)
            self._body_contact.zero_()
            d = self.data
            wp.launch(
                kernels.body_contact_flags,
                dim=d.naconmax,
                inputs=[d.nacon, d.contact.worldid, d.contact.geom, d.contact.dist, self.model.geom_bodyid],
                outputs=[self._body_contact],
            )

        self._run(("step", substeps), launches)

    def refresh(self, env_ids: torch.Tensor | None = None) -> None:
        """Make body/site poses, body velocities and sensors valid for the current qpos/qvel.

        MJWarp computes kinematics at the start of a step, so after ``step`` (or a state write)
        they describe the previous state; this recomputes them without collision or dynamics.

        Args:
          env_ids: ``None`` for every world, or a ``(refresh_capacity,)`` int64 tensor of world
            ids; ids outside ``[0, num_envs)`` are padding and skipped. The cost then follows
            ``refresh_capacity``, not ``num_envs`` (a scratch batch is refreshed and scattered
            back). Only the fields in ``state`` are refreshed for those rows; the rest of MJWarp's
            data is recomputed by the next physics step anyway.
        """
        if env_ids is None:
            self._run(("refresh",), lambda: kinematics(self.model, self.data, self._body_lin_vel, self._body_ang_vel))
            return
        scratch = self._scratch
        if scratch is None:
            raise RuntimeError("refresh(env_ids) needs refresh_capacity > 0 at construction")
        ids = self._check_ids(env_ids, scratch.capacity)
        scratch.gather_model_rows(ids, self.model_fields)  # torch ops: outside the recorded Warp CPU graph
        self._run(
            ("refresh_rows", ids.data_ptr()),
            lambda: scratch.refresh_into(self.data, ids, self.num_envs, self._body_lin_vel, self._body_ang_vel),
        )

    def write_rows(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Start new episodes in the listed worlds: set qpos/qvel, clear carried-over state.

        Warm start, applied forces, activations and time of those worlds are cleared; other worlds
        are untouched bit for bit. Contacts are recomputed by the next step. Call ``refresh`` after
        this to make kinematics valid for the new state.

        Args:
          env_ids: ``(K,)`` int64 world ids; ids outside ``[0, num_envs)`` are padding, skipped.
          qpos: ``(K, nq)`` float32 new positions (row i goes to world ``env_ids[i]``).
          qvel: ``(K, nv)`` float32 new velocities.
        """
        ids = self._check_ids(env_ids)
        count = ids.shape[0]
        _check_tensor("qpos", qpos, (count, self.mj_model.nq), self.torch_device)
        _check_tensor("qvel", qvel, (count, self.mj_model.nv), self.torch_device)
        qpos, qvel, d = qpos.contiguous(), qvel.contiguous(), self.data
        self._run(
            ("write_rows", count, ids.data_ptr(), qpos.data_ptr(), qvel.data_ptr()),
            lambda: wp.launch(
                kernels.write_rows,
                dim=count,
                inputs=[wp.from_torch(ids), wp.from_torch(qpos), wp.from_torch(qvel), self.num_envs],
                outputs=[d.qpos, d.qvel, d.qacc_warmstart, d.qfrc_applied, d.xfrc_applied, d.act, d.time],
            ),
        )

    def data_tensors(self) -> dict[str, torch.Tensor]:
        """Zero-copy torch views of every array of the worlds' state, by name.

        That is every MJWarp ``Data`` array (nested ones as ``contact.dist``), the body velocity
        and contact buffers and the per-world model fields: everything a step may change. For
        snapshots (the env's capture warm-up) and address checks; cold path.
        """
        tensors = {name: wp.to_torch(array) for name, array in _warp_arrays(self.data)}
        tensors["body_lin_vel_w"] = self.state.body_lin_vel_w
        tensors["body_ang_vel_w"] = self.state.body_ang_vel_w
        tensors["body_contact"] = self.state.body_contact
        tensors.update({f"model.{name}": value for name, value in self.model_fields.items()})
        return tensors

    # ----------------------------------------------------------------------------------------
    # Diagnostics (each call synchronizes once; never call per step).

    def overflow_flags(self) -> np.ndarray:
        """Per-world MJWarp overflow bitmask (``mujoco_warp.OverflowType``), ``(num_envs,)``.

        Read on torch's current stream, the one the steps ran on: Warp's ``array.numpy()`` copies
        on the device's legacy default stream, which torch's non-blocking streams do not wait for,
        so it could read the flags before the last step wrote them.
        """
        return wp.to_torch(self.data.overflow).cpu().numpy().copy()

    def check(self) -> None:
        """Raise ``SimulationOverflowError`` if any world ran out of contact/constraint capacity
        (:func:`~unilab_gpu.sim.overflow.check_capacity`: solver iteration caps are not capacity)."""
        check_capacity(self.overflow_flags(), self.data.njmax, self.data.naconmax // self.num_envs)

    # ----------------------------------------------------------------------------------------

    def _run(self, key: tuple, launches: Callable[[], None]) -> None:
        """Run a sequence of Warp launches on torch's stream.

        On CPU the sequence is recorded once into a Warp CPU graph (recording runs nothing) and
        replayed: that skips Python dispatch per kernel, which dominates small CPU batches. ``key``
        names the sequence and the addresses of the tensors it was recorded with.
        """
        with torch_stream_scope(self.wp_device):
            if not self.cpu_graph:
                launches()
                return
            graph = self._graphs.get(key)
            if graph is None:
                wp.capture_begin(device=self.wp_device)
                try:
                    launches()
                finally:
                    graph = wp.capture_end(device=self.wp_device)
                self._graphs[key] = graph
            wp.capture_launch(graph)

    def _check_ids(self, env_ids: torch.Tensor, expected_len: int | None = None) -> torch.Tensor:
        if not isinstance(env_ids, torch.Tensor) or env_ids.ndim != 1:
            raise ValueError(f"env_ids must be a 1-D int64 tensor, got {_describe(env_ids)}")
        length = env_ids.shape[0] if expected_len is None else expected_len
        _check_tensor("env_ids", env_ids, (length,), self.torch_device, dtype=torch.int64)
        return env_ids.contiguous()


def _warp_arrays(obj: object, prefix: str = "") -> Iterator[tuple[str, wp.array]]:
    """``(name, array)`` for every non-empty Warp array field of a dataclass, nested ones too."""
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        if isinstance(value, wp.array) and value.size > 0:
            yield prefix + field.name, value
        elif dataclasses.is_dataclass(value):
            yield from _warp_arrays(value, f"{prefix}{field.name}.")


def _names(mj_model: mujoco.MjModel, obj: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(mj_model, obj, i) or "" for i in range(count)]


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return type(value).__name__


def _check_tensor(
    field: str,
    value: torch.Tensor,
    shape: tuple[int, ...],
    device: torch.device,
    dtype: torch.dtype = torch.float32,
) -> None:
    """Raise a ValueError that names ``field`` and what was expected (static checks only)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{field} must be a torch.Tensor of shape {shape}, got {type(value).__name__}")
    if value.dtype != dtype:
        raise ValueError(f"{field} must have dtype {dtype}, got {value.dtype}")
    if value.device.type != device.type or (device.index is not None and value.device.index != device.index):
        raise ValueError(f"{field} must be on device {device}, got {value.device}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{field} must have shape {tuple(shape)}, got {tuple(value.shape)}")
