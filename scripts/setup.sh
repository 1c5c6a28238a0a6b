# Sourced by scripts/run and scripts/test: installs what is missing (Debian 12, as root), and finds
# nvcc. Idempotent: does nothing when every package is present.
set -euo pipefail

roofsim_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
roofsim_packages=(g++ make cmake libeigen3-dev catch2 libcli11-dev nlohmann-json3-dev libbenchmark-dev)
# The exporter's tests (tools/roofsim_export) run on Debian's CPU build of PyTorch; the JSON Schemas
# are checked against the shipped files with python3-jsonschema.
roofsim_test_packages=(python3 python3-torch python3-torchvision python3-jsonschema)

# roofsim_install_packages [extra package...]: the build packages, plus any given.
roofsim_install_packages() {
  local missing=()
  for p in "${roofsim_packages[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "roofsim: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# nvcc on PATH, or in the usual CUDA prefix; without it the CUDA parts are skipped.
roofsim_find_nvcc() {
  if [ -z "${CUDACXX:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then
      export CUDACXX="$(command -v nvcc)"
    elif [ -x /usr/local/cuda/bin/nvcc ]; then
      export CUDACXX=/usr/local/cuda/bin/nvcc
    fi
  fi
  if [ -z "${CUDACXX:-}" ]; then
    echo "roofsim: nvcc not found: roofsim-calibrate (CUDA) is not built"
  fi
}

roofsim_jobs="$(nproc 2>/dev/null || echo 2)"
