"""Offscreen rendering of one world of an env, and videos of rollouts.

Map:
    offscreen   OffscreenRenderer: GL context (EGL / OSMesa / GLFW), scene, optional ghost pose
    video       VideoRecorder: frames of one world per env step -> MP4 (imageio + ffmpeg)
"""
