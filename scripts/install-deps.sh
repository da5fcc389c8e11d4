#!/usr/bin/env bash
# Installs the system packages that building and testing pyca need: a C++17 compiler with OpenMP,
# pkg-config, FFTW (single precision, threads), GoogleTest, CMake (ctest) and the Python headers.
# Everything else comes from PyPI through pip (scikit-build-core, SWIG, Cython, NumPy, ...).
#
#   bash scripts/install-deps.sh          # check; install what is missing with apt-get (as root or
#                                         # with sudo), else print the commands for apt, dnf, brew
#                                         # and conda and exit 1
#   bash scripts/install-deps.sh --check  # check only: exit 1 and name what is missing
#   bash scripts/install-deps.sh --build  # only what building needs (not GoogleTest, CMake's ctest)
#
# Called by the README's install command, by scripts/test.sh and by .ci/run. It checks what the
# build finds (the compiler, pkg-config's fftw3f, ...), not package names, so it is quick and
# installs nothing when all is there, whichever package manager provided it.
set -euo pipefail
py=${PYTHON:-python3}
check_only=0
tests=1
for a in "$@"; do
  case $a in
    --check) check_only=1 ;;
    --build) tests=0 ;;
    *) echo "usage: scripts/install-deps.sh [--check] [--build]" >&2; exit 2 ;;
  esac
done

# Each missing item appends its Debian/Ubuntu package name.
missing() {
  local apt=()
  command -v "${CXX:-c++}" >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || apt+=(g++)
  [ $tests = 0 ] || command -v ctest >/dev/null 2>&1 || apt+=(cmake)
  if ! command -v pkg-config >/dev/null 2>&1; then
    apt+=(pkg-config libfftw3-dev)
    [ $tests = 0 ] || apt+=(libgtest-dev)
  else
    local libdir
    libdir=$(pkg-config --variable=libdir fftw3f 2>/dev/null || true)
    if [ -z "$libdir" ] || ! ls "$libdir"/libfftw3f_threads.* >/dev/null 2>&1; then apt+=(libfftw3-dev); fi
    [ $tests = 0 ] || pkg-config --exists gtest 2>/dev/null || apt+=(libgtest-dev)
  fi
  if ! "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
    apt+=(python3-dev)
  fi
  echo "${apt[@]}"
}

explain() {
  cat >&2 <<EOF
pyca: missing system packages: $1
Install them with one of (then run the command again):
  Debian/Ubuntu: sudo apt-get install -y g++ cmake pkg-config libfftw3-dev libgtest-dev python3-dev
  Fedora/RHEL:   sudo dnf install -y gcc-c++ cmake pkgconf-pkg-config fftw-devel gtest-devel python3-devel
  Homebrew:      brew install gcc cmake pkg-config fftw googletest
  conda:         conda install -c conda-forge cxx-compiler cmake pkg-config fftw gtest
                 (then: export PKG_CONFIG_PATH=\$CONDA_PREFIX/lib/pkgconfig CMAKE_PREFIX_PATH=\$CONDA_PREFIX)
EOF
}

need=$(missing)
if [ -z "$need" ]; then
  echo "pyca: system dependencies present (C++ compiler, pkg-config, FFTW, GoogleTest, CMake, Python headers)"
  exit 0
fi
if [ $check_only = 1 ]; then
  explain "$need"
  exit 1
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo); else sudo=(none); fi
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "${sudo[*]}" = none ]; then
  explain "$need"
  exit 1
fi

echo "pyca: installing with apt-get: $need"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086  # $need is a list of package names
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends $need >/dev/null
need=$(missing)
if [ -n "$need" ]; then
  echo "pyca: still missing after apt-get: $need" >&2
  explain "$need"
  exit 1
fi
echo "pyca: system dependencies installed"
