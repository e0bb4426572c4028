#!/usr/bin/env bash
# Open the code objects of real HIP libraries with aql and with comgr, side
# by side (docs/benchmarks.md). For each library, aql-objdump --extract
# writes every entry of its .hip_fatbin; for each target the largest code
# object is timed by one aql-bench --load run, which times comgr in the
# same process.
#
#   tools/bench/real_libraries.sh BUILD_DIR LIBRARY...
#   e.g. tools/bench/real_libraries.sh build /usr/lib/x86_64-linux-gnu/librocrand.so.1
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR LIBRARY...}
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%-22s %-28s %8s %8s %10s %10s %7s\n' library target kernels bytes \
	'aql us/k' 'comgr us/k' ratio
for lib in "$@"; do
	mkdir "$tmp/x"
	"$build/tools/aql-objdump" --extract "$tmp/x" "$lib" >/dev/null
	# Entries are named INDEX-ID; ID ends in the target (host entries have none).
	for target in $(ls "$tmp/x" | sed -n 's/.*amdhsa--//p' | sort -u); do
		file=$(ls -S "$tmp"/x/*"amdhsa--$target" | head -n 1)
		"$build/tools/aql-bench" --json --load "$file" >"$tmp/out"
		value() { sed -n "s/.*\"metric\":\"$1\".*\"p50\":\([0-9.]*\).*/\1/p" "$tmp/out"; }
		kernels=$(sed -n 's/.*"metric":"metadata_us_per_kernel".*"kernels":\([0-9]*\).*/\1/p' "$tmp/out")
		aql=$(value metadata_us_per_kernel)
		comgr=$(value comgr_metadata_us_per_kernel)
		ratio=$(sed -n 's/.*"metric":"ratio_comgr_over_aql","value":\([0-9.]*\).*/\1/p' "$tmp/out")
		printf '%-22s %-28s %8s %8s %10s %10s %7s\n' "$(basename "$lib")" "$target" \
			"${kernels:--}" "$(stat -c %s "$file")" "${aql:-refused}" "${comgr:--}" \
			"${ratio:--}"
	done
	rm -rf "$tmp/x"
done
