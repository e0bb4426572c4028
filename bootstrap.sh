#!/usr/bin/env bash
# Set up a fresh Debian machine, build aql, and run the main job: aql-bench
# on the default (CPU) agent. Arguments go to aql-bench (e.g. --json);
# --build-only stops after the build. --light (first) is for CPU-only use:
# only what the CPU agent's build and tests need, no GPU toolchains (the
# tests that need clang, spin, comgr or ROCr are then not built: meson
# finds none of them), and no benchmark.
set -euo pipefail
cd "$(dirname "$0")"
light=0
if [ "${1:-}" = --light ]; then
	light=1
	shift
fi

# Set-up output goes to stderr so that stdout is aql-bench's alone (--json).
exec 3>&1 1>&2

# libelf reads code objects; clang/lld/llvm 14 and 16 build the test code
# objects (16 for V5) and run llvm-readelf for comparison; clang-19 and
# lld-19 build gfx942 (MI300), which older clangs do not know; clang-tools-14
# has clang-offload-bundler; libclang-rt-14-dev has libFuzzer; comgr is the
# optional peer of aql-bench --load; liburing reads files into buffers;
# libdrm-dev's libdrm_amdgpu tells the AMD agent its marketing name,
# clocks, memory heaps and firmware;
# spin checks the channel protocol's model (tests/model); zlib and zstd
# decompress offload bundles; librocrand1 (and python3-yaml for
# llvm-readelf's notes) is the real HIP library tests/bundles checks;
# rocminfo (built for ROCr) runs on aql's libhsa-runtime64 (tests/hsa);
# python3-matplotlib draws aql-bench --plot's pictures (tools/aql-bench-plot).
packages=(gcc meson ninja-build pkg-config python3 libelf-dev liburing-dev libdrm-dev
	zlib1g-dev libzstd-dev)
[ $light = 1 ] || packages+=(libhsa-runtime-dev spin librocrand1 python3-yaml python3-matplotlib
	clang-14 lld-14 llvm-14 clang-tools-14 libclang-rt-14-dev
	clang-16 lld-16 llvm-16 libamd-comgr-dev rocminfo clang-19 lld-19)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	echo "bootstrap: installing ${missing[*]}"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CI builds treat warnings as errors; local builds only show them.
werror=false
[ "${CI:-}" = true ] && werror=true
light_opt=false
[ $light = 0 ] || light_opt=true
[ -d build ] || meson setup build -Dwerror="$werror" -Dlight=$light_opt
ninja -C build

if [ $light = 1 ] || [ "${1:-}" = --build-only ]; then
	exit 0
fi
exec ./build/tools/aql-bench "$@" 1>&3
