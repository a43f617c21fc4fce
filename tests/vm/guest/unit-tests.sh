#!/bin/bash
# Runs the build's cgroup unit tests (skipped on the cgroup-v1 host) in the
# guest, with the argv and environment meson would use. The host copied the
# executables to SHARE/unit/ and described them in SHARE/unit/manifest.json
# (a JSON array of {name, argv, env, timeout}). One result line per test:
# "ok unit-<name>" or "not ok unit-<name>: why". A skip (77) is reported as
# "ok unit-<name> # SKIP <the test's last line>" so that it stays visible: a
# test may be v1-only by design (its v2 counterpart being these VM checks).
#
#   unit-tests.sh SHARE DIR PREFIX noskip
# runs another manifest the same way, SHARE/DIR/manifest.json, with results
# named PREFIX<name>; with "noskip" a skip is a failure (the classification
# tests exist in the guest to run on v2: skipping there proves nothing).
set -u
share=$1
dir=${2:-unit}
prefix=${3-unit-}
noskip=${4:-}
res=$share/results.txt
manifest=$share/$dir/manifest.json
[ -r "$manifest" ] || exit 0
n=$(jq length "$manifest")
for ((i = 0; i < n; i++)); do
	name=$(jq -r ".[$i].name" "$manifest")
	limit=$(jq -r ".[$i].timeout" "$manifest")
	mapfile -t argv < <(jq -r ".[$i].argv[]" "$manifest")
	mapfile -t envs < <(jq -r ".[$i].env | to_entries[] | \"\(.key)=\(.value)\"" "$manifest")
	log=$share/$dir/$name.log
	t0=$SECONDS
	( cd "$share/$dir" && timeout "$limit" env "${envs[@]}" "${argv[@]}" ) > "$log" 2>&1
	rc=$?
	took="$((SECONDS - t0))s"
	case $rc in
	0) echo "ok $prefix$name # $took" >> "$res" ;;
	77) if [ "$noskip" = noskip ]; then
		echo "not ok $prefix$name: skipped: $(grep -i skip "$log" | tail -n 1)" >> "$res"
	else
		echo "ok $prefix$name # SKIP $(grep -i skip "$log" | tail -n 1)" >> "$res"
	fi ;;
	124) echo "not ok $prefix$name: timed out after ${limit}s" >> "$res" ;;
	*) echo "not ok $prefix$name: exit $rc after $took, see $dir/$name.log: $(tail -n 1 "$log")" >> "$res" ;;
	esac
done
