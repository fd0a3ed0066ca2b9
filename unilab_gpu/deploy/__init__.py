"""Robot-side runtime: run an exported policy from its ONNX file alone, on a MuJoCo model.

This folder is written to be copied to a robot computer by itself: it imports only numpy,
mujoco and onnxruntime (and the standard library), never torch, warp, hydra or another
``unilab_gpu`` module, and its modules import each other relatively, so the copy works under any
package name (``tests/test_deploy_runtime.py`` enforces both). Everything it needs comes from the
file's metadata (``unilab-export``, docs/export.md): the observation terms with their functions
and parameters, the action map, the PD gains and the rates.

Map:
    policy_file   PolicyFile: the ONNX session and its metadata, checked (``METADATA_VERSION``, check_metadata)
    terms         numpy versions of the observation terms the policies read, by the env term's path
    ground        Ground: the ground height under a point, from the model's floor heightfield (z = 0 without one)
    reference     ReferenceMotion: a canonical motion clip at the control rate, played by time
    physics       the physics options a policy trained with (metadata ``physics``): read, written, compared
    model_check   check_model: the MJCF against the metadata (joints, actuators, gains, limits, physics options)
    faults        Faults, FaultInjector: latency, encoder bias and observation noise injected where a robot has them
    controller    Controller: MjData -> observation -> action -> PD targets, stepped at the metadata's rates
    terminations  numpy twins of the failure terminations (falls), by the env term's path
    registry      the user's twins: modules listed in UNILAB_DEPLOY_MODULES
    foreign       policies of other frameworks, described by data (formats/*.json): open_policy, ForeignPolicy

``unilab-sim2sim`` (``unilab_gpu/export/sim2sim/``) runs a policy with it in MuJoCo C (docs/deploy.md).
"""

from .controller import Controller
from .faults import Faults
from .policy_file import METADATA_VERSION, DeploymentError, PolicyFile
from .reference import ReferenceMotion

__all__ = ["METADATA_VERSION", "Controller", "DeploymentError", "Faults", "PolicyFile", "ReferenceMotion"]
