# Sourced (not run) by the scripts that build pyca on a machine without a package registry (the GPU
# machine: scripts/gpu-check.sh, benchmarks/lab/run_lddmm.sh), from the checkout's root: wheels of
# missing Python packages (swig, nibabel) in .whl/ and Debian packages of missing libraries
# (libfftw3-*, libgtest-dev, pkgconf) in .debs/ are unpacked into /tmp and put on the
# search paths. Returns 2 when the wheels cannot be installed.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 2
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
if ls .debs/*.deb >/dev/null 2>&1; then
  deps=/tmp/pyca-deps
  for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
  arch=$(ls "$deps/usr/lib" | grep -m1 linux-gnu)
  # CMake packages (GTest) from the unpacked folder, after the system's own
  export CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:+$CMAKE_PREFIX_PATH:}$deps/usr
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$deps/usr/lib/$arch
  command -v pkg-config >/dev/null || export PATH=$PATH:$deps/usr/bin
  if ! pkg-config --exists fftw3f 2>/dev/null; then
    export PKG_CONFIG_PATH=$deps/usr/lib/$arch/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
  fi
fi
