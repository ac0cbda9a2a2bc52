"""LeRobot: the v3.0 dataset export (``export``, with the mapping in ``layout``), LeRobot policies as chunk models
(``policy``: the ``lerobot`` chunk-model source), the vector env behind ``lerobot-eval`` (``env``) and the SO-101
follower's units (``so101``).

LeRobot is imported only when one of these is used, so the rest of the package runs without it.
"""
