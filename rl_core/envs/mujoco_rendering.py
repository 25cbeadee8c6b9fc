"""Offscreen rendering of MuJoCo scenes: fast render settings, cameras, GL contexts.

Every thread that renders gets one GL context (surfaceless with EGL), shared by all its
envs: a GL context per env would cost ~0.3 s and ~80 MB more each with a CPU renderer
(llvmpipe). The contexts are freed at exit, after the envs' render contexts.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: GL context and MuJoCo render contexts (with their scenes) by scene key, of one thread.
_ThreadContexts = tuple[Any, dict[str, tuple[Any, Any]]]

#: The GL context of each thread that renders, shared by its envs.
_GL_CONTEXTS: dict[int, Any] = {}
_GL_LOCK = threading.Lock()
_LIVE_CAMERAS: weakref.WeakSet[OffscreenCameras] = weakref.WeakSet()


def default_to_headless_gl() -> None:
    """Make MuJoCo render with EGL (no window) where there is no display.

    A backend the user chose (``MUJOCO_GL``) is kept. MuJoCo picks its backend when it is
    first imported, and other simulators import it too (ManiSkill3 does, through
    ``pytorch_kinematics``): call this before importing any of them, or a MuJoCo camera
    opened later in the process looks for a window (GLFW) and fails.
    """
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")


def apply_render_settings(model: Any, frame_size: int, fast: bool) -> None:
    """Set a MuJoCo model's offscreen buffer size and, when ``fast``, the cheap settings.

    Args:
        model: The ``MjModel`` to render.
        frame_size: Side of the largest frame to render.
        fast: No shadows, reflections or anti-aliasing.
    """
    vis = model.vis
    if fast:
        model.light_castshadow[:] = 0
        model.mat_reflectance[:] = 0
        vis.quality.offsamples = 0
        vis.quality.shadowsize = 0  # no shadow map: 64 MB less per task
    vis.global_.offwidth = vis.global_.offheight = frame_size


class OffscreenCameras:
    """Offscreen rendering of one env's scenes, in the GL context of the calling thread.

    A MuJoCo render context per scene (its meshes and textures) in the GL context that
    every env of the thread shares. A GL context is current in one thread only, and a
    worker may step its envs in another thread than the one that made them (a Ray actor's
    methods run in its thread pool): each thread gets its own render contexts.
    """

    def __init__(self) -> None:
        #: thread id -> (its GL context, render contexts by scene key)
        self._threads: dict[int, _ThreadContexts] = {}
        self._finalizer = weakref.finalize(self, _free_thread_contexts, self._threads)
        _LIVE_CAMERAS.add(self)

    def render(self, key: str, model: Any, data: Any, camera: str, size: int) -> np.ndarray:
        """Render a fixed camera of a scene as an upright image.

        Args:
            key: Name of the scene (one render context each, made on first use).
            model: The scene's ``MjModel``.
            data: The scene's ``MjData``.
            camera: Name of a fixed camera of the model.
            size: Side of the image.

        Returns:
            ``[size, size, 3]`` uint8 pixels.
        """
        import mujoco

        thread = threading.get_ident()
        if thread not in self._threads:
            self._threads[thread] = (_thread_gl_context(), {})
        gl, contexts = self._threads[thread]
        gl.make_current()
        if key not in contexts:
            context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
            contexts[key] = (context, mujoco.MjvScene(model, maxgeom=10_000))
        context, scene = contexts[key]
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        cam.fixedcamid = model.camera(camera).id
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, context)
        mujoco.mjv_updateScene(
            model, data, mujoco.MjvOption(), None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
        )
        viewport = mujoco.MjrRect(0, 0, size, size)
        mujoco.mjr_render(viewport, scene, context)
        pixels = np.empty((size, size, 3), np.uint8)
        mujoco.mjr_readPixels(pixels, None, viewport, context)
        # OpenGL rows run bottom-up; a camera whose up axis points down (Meta-World's corner
        # cameras) sees the scene upside down: turn its image by 180 degrees (not a mirror)
        cid = cam.fixedcamid
        upside_down = model.cam_bodyid[cid] == 0 and data.cam_xmat[cid][7] < 0
        return np.ascontiguousarray(pixels[:, ::-1] if upside_down else pixels[::-1])

    def close(self) -> None:
        """Free the render contexts (idempotent); the shared GL context stays."""
        self._finalizer()


def _gl_context_class() -> type:
    """MuJoCo's GL context class for offscreen rendering.

    EGL where :func:`default_to_headless_gl` chose it, even when MuJoCo was imported
    earlier in the process (by another simulator) and picked a window backend then.
    """
    default_to_headless_gl()
    if os.environ.get("MUJOCO_GL", "").lower() == "egl":
        from mujoco.egl import GLContext
    else:
        from mujoco.gl_context import GLContext
    return GLContext


def _thread_gl_context() -> Any:
    """The GL context of the calling thread (made on first use)."""
    key = threading.get_ident()
    with _GL_LOCK:
        if key not in _GL_CONTEXTS:
            first = not _GL_CONTEXTS
            # envs render into their own buffers
            _GL_CONTEXTS[key] = _gl_context_class()(64, 64)
            if first:
                # registered after EGL's own exit hook (the first context registers it), so
                # it runs before EGL is shut down
                atexit.register(_free_all)
            logger.debug("GL context for MuJoCo rendering in thread %d", key)
        return _GL_CONTEXTS[key]


def _free_thread_contexts(threads: dict[int, _ThreadContexts]) -> None:
    """Free the render contexts of every thread (those of other threads where possible)."""
    for gl, contexts in threads.values():
        _free_contexts(gl, contexts)
    threads.clear()


def _free_contexts(gl: Any, contexts: dict[str, tuple[Any, Any]]) -> None:
    """Free the render contexts made in the GL context ``gl``."""
    if not contexts:
        return
    try:
        gl.make_current()
        for context, _ in contexts.values():
            context.free()
    except Exception as exc:  # noqa: BLE001 - e.g. the context is current in another thread
        logger.debug("could not free MuJoCo render contexts: %r", exc)
    contexts.clear()


def _free_all() -> None:
    """At exit: free every env's render contexts, then the GL contexts."""
    for cameras in list(_LIVE_CAMERAS):
        cameras.close()
    with _GL_LOCK:
        for gl in _GL_CONTEXTS.values():
            gl.free()
        _GL_CONTEXTS.clear()
