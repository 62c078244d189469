#!/usr/bin/env bash
# The build's Debian libraries for a GPU machine that reaches no package
# registry (the device tool's, say): `download` fetches the .debs here, into a
# git-ignored folder that travels with the working tree; `unpack` extracts
# them there into a prefix, points their pkg-config files at it, and writes
# env.sh, which sets PATH, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH and
# LD_LIBRARY_PATH for configure, build and run. Nothing is installed under /.
#
#   scripts/gpu-deps.sh download [.gpudeps]               # here (apt-get works)
#   scripts/gpu-deps.sh unpack .gpudeps /tmp/anymoe-deps  # there
#   source /tmp/anymoe-deps/env.sh && scripts/gpu-check.sh
set -euo pipefail

# Headers, pkg-config/CMake files and the shared libraries they need at run
# time (cpp-httplib -> ssl, zlib, brotli);
# pkgconf because CMake's pkg_check_modules needs the program.
PACKAGES=(
  libhwy-dev libhwy1
  libutf8proc-dev libutf8proc2
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 zlib1g-dev zlib1g
  libbrotli-dev libbrotli1
  nlohmann-json3-dev libcli11-dev libgtest-dev
  pkgconf pkgconf-bin libpkgconf3
)

download() {
  local dir=${1:-.gpudeps}
  mkdir -p "$dir"
  (cd "$dir" && apt-get download "${PACKAGES[@]}")
  du -sh "$dir"
}

unpack() {
  local dir=$1 dest=$2
  mkdir -p "$dest"
  dest=$(cd "$dest" && pwd)
  for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$dest" 2>/dev/null || dpkg -x "$deb" "$dest"; done
  local lib=$dest/usr/lib/x86_64-linux-gnu
  # .pc files name /usr; make every absolute /usr value point into the prefix.
  find "$dest" -name '*.pc' -exec sed -i -E "s#^([A-Za-z_]+)=/usr#\1=$dest/usr#" {} +
  cat > "$dest/env.sh" <<EOF
export PATH=$dest/usr/bin:\$PATH
export PKG_CONFIG=$dest/usr/bin/pkgconf
export PKG_CONFIG_PATH=$lib/pkgconfig:$dest/usr/share/pkgconfig
export CMAKE_PREFIX_PATH=$dest/usr
export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
  echo "unpacked $(ls "$dir"/*.deb | wc -l) packages into $dest; source $dest/env.sh"
}

case ${1:-} in
  download) download "${2:-.gpudeps}" ;;
  unpack) unpack "${2:?deb folder}" "${3:?prefix}" ;;
  *) sed -n '2,11p' "$0"; exit 2 ;;
esac
