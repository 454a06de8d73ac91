#!/usr/bin/env bash
# Generates grid_map_msgs for rclpy (no wheel exists) with the rosidl generators of the ros-*
# wheels installed in VENV, and installs it into PREFIX: PREFIX/lib (the typesupport libraries,
# for LD_LIBRARY_PATH) and PREFIX/lib/python3.X/site-packages (the Python package, for
# PYTHONPATH). Needs cmake (the `cmake` wheel) and a C/C++ compiler. Skips the build when PREFIX
# already holds one of these same sources.
#
#   build.sh VENV PREFIX
set -euo pipefail
VENV=$(cd "$1" && pwd)
PREFIX=$2
HERE=$(cd "$(dirname "$0")" && pwd)
stamp=$(cat "$HERE"/CMakeLists.txt "$HERE"/package.xml "$HERE"/msg/*.msg | sha256sum | cut -c1-16)
if [ -f "$PREFIX/.built-$stamp" ]; then
  exit 0
fi
rm -rf "$PREFIX" "$PREFIX.build"
mkdir -p "$PREFIX.build"
export AMENT_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
(
  cd "$PREFIX.build"
  cmake "$HERE" -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DPython3_EXECUTABLE="$VENV/bin/python" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF
  make -j"$(nproc)" install
) > "$PREFIX.log" 2>&1 || { tail -40 "$PREFIX.log" >&2; echo "grid_map_msgs: build failed (log: $PREFIX.log)" >&2; exit 1; }
rm -rf "$PREFIX.build"
touch "$PREFIX/.built-$stamp"
