#!/usr/bin/env bash
# Thin wrapper over `assay halt arm` (seed 002's tools/halt-arm.sh); all flags pass through.
# Uses $ASSAY, else `assay` on PATH, else the repository's own .venv.
set -euo pipefail
cmd="${ASSAY:-}"
if [ -z "$cmd" ]; then
  if command -v assay >/dev/null 2>&1; then cmd=assay
  else cmd="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/assay"; fi
fi
exec "$cmd" halt arm "$@"
