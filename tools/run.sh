#!/usr/bin/env bash
# Runs a command inside the project's venv (creating it first if needed), with the shared Warp kernel cache.
# The command runs in the caller's directory: relative paths in it are the caller's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ISAACLAB_SUSPEND_VENV:-$ROOT/.venv}"
bash "$ROOT/tools/install.sh"
export WARP_CACHE_PATH="${WARP_CACHE_PATH:-$ROOT/.warp_cache}"
export PATH="$VENV/bin:$PATH"
exec "$@"
