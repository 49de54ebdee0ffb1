#!/usr/bin/env bash
# The GPU check (issue: full-size encoding): run on a machine with a CUDA device, from the project root, after
# `make setup`. Prints the encoders' GPU vs CPU throughput, peak GPU memory and GPU/CPU agreement.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
.venv/bin/python bench/gpu_check.py "$@"
