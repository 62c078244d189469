#!/usr/bin/env bash
# Packages `make fuzz` needs on top of scripts/install-deps.sh: clang and its
# compiler-rt (libFuzzer, ASan and UBSan runtimes). Debian 12 ships clang 14.
set -euo pipefail

packages=(clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-fuzz-deps: all packages present"
  exit 0
fi
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "install-fuzz-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
