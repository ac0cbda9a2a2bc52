#!/usr/bin/env bash
# Runs a command inside the project's venv (creating it first if needed), with the shared Warp kernel cache.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/tools/install.sh"
export WARP_CACHE_PATH="${WARP_CACHE_PATH:-$ROOT/.warp_cache}"
export PATH="$ROOT/.venv/bin:$PATH"
cd "$ROOT"
exec "$@"
