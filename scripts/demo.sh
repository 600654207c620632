#!/usr/bin/env bash
# The main job on localhost. Replaced step by step as the launcher and the training example land.
set -euo pipefail
build=${1:-build}
exec "$build/bin/ddp-demo"
