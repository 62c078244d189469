#!/usr/bin/env bash
# Installs the Debian packages anymoe needs to build and test. Skips apt when
# everything is already installed, so repeated `make` calls stay fast.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libhwy-dev libutf8proc-dev
  libpcre2-dev        # tokenizer Split regexes (issue 47; tools/regex_engine_compare.cc chose it)
  nlohmann-json3-dev libcli11-dev
  libboost-dev        # Boost.Beast + Boost.Asio (header-only): the HTTP server
  libjs-marked node-dompurify  # the chat page renders Markdown (marked) made safe (DOMPurify)
  libcpp-httplib-dev  # the HTTP client of bench-serve and the tests
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 unzip
  openmpi-bin libopenmpi-dev  # expert parallelism across processes (mpirun, MPI_Alltoallv)
  chromium  # headless, for the chat page's end-to-end test (tests/server)
  # OpenCL backend: headers, ICD loader, and PoCL (a CPU OpenCL device for the tests)
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd clinfo
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! python3 -m pip --version >/dev/null 2>&1; then missing+=(python3-pip); fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present"
  exit 0
fi
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
