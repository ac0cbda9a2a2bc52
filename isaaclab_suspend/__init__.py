"""isaaclab_suspend: per-env suspension, action chunking, recording and replay for Isaac Lab."""

__version__ = '0.1.0'


def _init_warp_without_a_driver() -> None:
    """Initialise Warp with stderr closed on a machine without NVIDIA's driver: Warp's C code would print "Warp CUDA
    warning: Could not find or load the NVIDIA CUDA driver" in every process, though the project runs on the CPU
    there. With a driver, Warp's warnings about it still show."""
    import ctypes
    import os

    try:
        ctypes.CDLL("libcuda.so.1")
        return
    except OSError:
        pass
    import warp

    warp.config.quiet = True  # as Isaac Lab sets it (isaaclab.utils.warp): no banner
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        warp.init()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


_init_warp_without_a_driver()
