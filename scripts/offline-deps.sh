# Sourced by scripts/gpu-check.sh and scripts/multi-gpu-atlas.sh (from the checkout's root): on offline
# machines, installs the wheels in .whl/ (and $PYCA_WHEELS) into /tmp/site and unpacks the Debian packages
# in .debs/ (FFTW, dlpack, gtest, pkgconf) into /tmp/pyca-deps, exporting the paths the build needs.
for d in .whl ${PYCA_WHEELS:-}; do
  if ls "$d"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$d"/*.whl || exit 2
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
  fi
done
if ls .debs/*.deb >/dev/null 2>&1; then
  deps=/tmp/pyca-deps
  for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
  arch=$(ls "$deps/usr/lib" | grep -m1 linux-gnu)
  # CMake packages (dlpack, GTest) from the unpacked folder, after the system's own
  export CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:+$CMAKE_PREFIX_PATH:}$deps/usr
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$deps/usr/lib/$arch
  command -v pkg-config >/dev/null || export PATH=$PATH:$deps/usr/bin
  if ! pkg-config --exists fftw3f 2>/dev/null; then
    export PKG_CONFIG_PATH=$deps/usr/lib/$arch/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
  fi
fi
