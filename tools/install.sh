#!/usr/bin/env bash
# Creates (or checks) the project's virtual environment: Python 3.11, Isaac Lab 3.0.0 kitless with the
# Newton physics backend on the CPU, rsl_rl and skrl, and this package installed editable.
# Idempotent: on a ready venv it only verifies the stamp and returns in about a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ISAACLAB_SUSPEND_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3.11}"
STAMP="$VENV/.isaaclab_suspend_stamp"
# Bump when the pins below change so that an existing venv is brought up to date.
STAMP_VERSION="5"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_VERSION" ]; then
  exit 0
fi

echo "[install] creating venv at $VENV (Python $($PY --version 2>&1))"
"$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
CONSTRAINTS="$ROOT/tools/constraints.txt"

# torch: CPU build (a local wheel where the machine has one, else the CPU index of PyPI's mirror).
$PIP install -q -c "$CONSTRAINTS" torch==2.13.0

# Isaac Lab 3.0.0 declares Python >=3.12; its code runs on 3.11 kitless. Install the wheel alone,
# then only the run-time dependencies the kitless Newton path imports.
WHEELS="$VENV/.wheels"
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/isaaclab-3.0.0-*.whl >/dev/null 2>&1; then
  $PIP download -q --no-deps --python-version 3.12 --only-binary=:all: isaaclab==3.0.0 -d "$WHEELS"
fi
$PIP install -q --no-deps --ignore-requires-python "$WHEELS"/isaaclab-3.0.0-*.whl
$PIP install -q -c "$CONSTRAINTS" -r "$ROOT/tools/requirements.txt"
$PIP install -q --no-deps -e "$ROOT"
# Tests only: openpi's own client, to check the openpi server against it. It pins numpy<2 (this venv runs
# numpy 2) but runs on it; its imports are msgpack and websockets from requirements.txt, and typing_extensions.
$PIP install -q --no-deps openpi-client==0.1.2

echo "$STAMP_VERSION" > "$STAMP"
echo "[install] ready: $VENV"
