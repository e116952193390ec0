#!/usr/bin/env bash
# Installs the system OpenBLAS (Debian's libopenblas-dev) that the benches'
# `openblas` feature links: `--features openblas --bin gemm`.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
$sudo apt-get update
$sudo apt-get install -y libopenblas-dev
