"""Interoperation with other robot-learning stacks: LeRobot datasets (export) and LeRobot policies (chunk models).

LeRobot is imported only when one of these is used, so the rest of the package runs without it.
"""
