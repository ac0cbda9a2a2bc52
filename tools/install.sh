#!/usr/bin/env bash
# Creates (or checks) the project's virtual environment on Isaac Lab 3.0's declared stack: Python 3.12,
# torch 2.11.0, Isaac Lab 3.0.0 kitless with the Newton physics backend on the CPU, rsl_rl and skrl,
# LeRobot 0.6.1 (dataset and training extras) beside it with this package's env plugin, and this package installed
# editable; then the robot assets: a second venv ($VENV/converters) with NVIDIA's USD converters and the robot
# description packages (tools/converters.txt), and the converted robots (python -m isaaclab_suspend.assets.robots).
# Idempotent: on a ready venv it only verifies the stamps and returns in about a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ISAACLAB_SUSPEND_VENV:-$ROOT/.venv}"
STAMP="$VENV/.isaaclab_suspend_stamp"
# Bump when the pins below change so that an existing venv is rebuilt.
STAMP_VERSION="10"

# Bump when tools/converters.txt or the robots' layout (isaaclab_suspend/assets/robots.py) change.
ROBOTS_STAMP="$VENV/.isaaclab_suspend_robots_stamp"
ROBOTS_STAMP_VERSION="2"

install_robots() {
  # The converters pin MuJoCo 3.16 and bundle their own OpenUSD: they get a venv of their own.
  local conv="$VENV/converters"
  rm -rf "$conv"
  "$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)')" -m venv "$conv"
  PIP_CONSTRAINT= "$conv/bin/python" -m pip install -q --disable-pip-version-check -r "$ROOT/tools/converters.txt"
  # Newton's convex hulls (scipy) and Isaac Lab's mesh spawners (trimesh), in the project's venv.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c "$ROOT/tools/constraints.txt" \
    -r "$ROOT/tools/requirements.txt"
  PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -m isaaclab_suspend.assets.robots
  echo "$ROBOTS_STAMP_VERSION" > "$ROBOTS_STAMP"
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_VERSION" ]; then
  if [ ! -f "$ROBOTS_STAMP" ] || [ "$(cat "$ROBOTS_STAMP")" != "$ROBOTS_STAMP_VERSION" ]; then
    echo "[install] robot assets: converter venv and converted robots" >&2
    install_robots >&2
  fi
  exit 0
fi

# Isaac Lab 3.0.0 declares Requires-Python >=3.12,<3.13: find a 3.12 (PATH, then pyenv's versions).
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      PY="$cand"; break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "[install] error: Isaac Lab 3.0 needs Python 3.12; none found. Install one (e.g. 'pyenv install 3.12') or set PYTHON=/path/to/python3.12." >&2
  exit 2
fi

echo "[install] creating venv at $VENV (Python $($PY --version 2>&1)); the first time takes a few minutes"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# This machine's pip may carry a global constraints file capping torch for another Python: ours replaces it.
export PIP_CONSTRAINT="$ROOT/tools/constraints.txt"

# Isaac Lab 3.0.0 is one wheel; of its ~60 declared dependencies the kitless Newton path imports only the
# ones in requirements.txt (Kit, Isaac Sim, open3d, ... are never imported), so the wheel goes in alone, after
# them: pip checks the declared dependencies of what is installed whenever it installs with dependencies, and
# would call the skipped ones an error. (Every install after this one is --no-deps or has nothing left to install.)
$PIP install -q -r "$ROOT/tools/requirements.txt"
echo "[install] Isaac Lab 3.0.0 goes in without its Kit-only dependencies (Isaac Sim, Kit, open3d, ...), on purpose: the kitless Newton path never imports them"
$PIP install -q --no-deps isaaclab==3.0.0
$PIP install -q --no-deps -e "$ROOT"
# LeRobot's env plugin (lerobot-eval --env.type=isaaclab_suspend): LeRobot imports installed distributions named
# lerobot_env_*; the package only registers the env type, the code is isaaclab_suspend.lerobot.env.
$PIP install -q --no-deps "$ROOT/plugins/lerobot_env_isaaclab_suspend"
# Tests only: openpi's own client, to check the openpi server against it. It pins numpy<2 (this venv runs
# numpy 2) but runs on it; its imports are msgpack and websockets from requirements.txt, and typing_extensions.
$PIP install -q --no-deps openpi-client==0.1.2
"$VENV/bin/python" -c "import isaaclab, lerobot, torch; assert torch.__version__.startswith('2.11.0'), torch.__version__"

echo "$STAMP_VERSION" > "$STAMP"
install_robots
echo "[install] ready: $VENV"
