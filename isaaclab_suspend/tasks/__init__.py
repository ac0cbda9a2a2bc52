"""Tasks registered as gym ids ending in ``-Suspendable``: importing this package imports every task sub-package
(Isaac Lab's ``import_packages``), whose ``__init__`` registers its gym ids, so a new task is a new sub-package."""

from isaaclab_tasks.utils import import_packages

import_packages(__name__)
