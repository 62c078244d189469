#!/usr/bin/env bash
# Installs what the aarch64 cross build needs (scripts/test-arm64.sh): the
# cross compiler, qemu-user to run the test binaries, and the arm64 builds of
# the kernels' libraries (Debian multiarch). Skips dpkg/apt when everything is
# already there, so repeated `make test-arm64` calls stay fast.
set -euo pipefail

packages=(
  cmake ninja-build pkg-config
  g++-aarch64-linux-gnu qemu-user
  libhwy-dev:arm64 libgtest-dev:arm64
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-arm64-deps: all packages present"
  exit 0
fi
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-arm64-deps: adding the arm64 architecture"
  $sudo dpkg --add-architecture arm64
fi
echo "install-arm64-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
