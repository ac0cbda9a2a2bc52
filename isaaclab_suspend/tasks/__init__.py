"""Tasks registered as gym ids ending in ``-Suspendable``: importing this package registers them."""

from . import cartpole, push_cube  # noqa: F401
