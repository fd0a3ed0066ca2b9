"""Reference motions: file formats, the canonical clip, the device motion library and start samplers.

See ``docs/motion.md``. The names below are the public API.
"""

from unilab_gpu.motion.assemble import CONTROL_FPS, ORDERS, build_clip, resample_clip
from unilab_gpu.motion.canonical import save_motion
from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.library import MotionFrame, MotionLibrary
from unilab_gpu.motion.loader import FORMATS, load_motion
from unilab_gpu.motion.mirror import RobotMirror
from unilab_gpu.motion.sampler import AdaptiveStartSampler, ClipStartSampler, StartSampler, UniformStartSampler
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.motion.validation import MotionFormatError

__all__ = [
    "CONTROL_FPS",
    "FORMATS",
    "ORDERS",
    "AdaptiveStartSampler",
    "ClipStartSampler",
    "MotionClip",
    "MotionFormatError",
    "MotionFrame",
    "MotionLibrary",
    "RobotKinematics",
    "RobotMirror",
    "StartSampler",
    "UniformStartSampler",
    "build_clip",
    "load_motion",
    "resample_clip",
    "save_motion",
    "synthesize_clip",
]
