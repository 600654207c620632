#!/usr/bin/env bash
# The main job on localhost (`make demo`). Interim: a real multi-process rendezvous through a
# TCPStore (examples/store_demo.cc) until the launcher and the training example land.
set -euo pipefail
build=${1:-build}
exec "$build/bin/store-demo" --workers 4
