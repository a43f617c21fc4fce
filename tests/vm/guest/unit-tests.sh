#!/bin/bash
# Runs the build's cgroup unit tests (skipped on the cgroup-v1 host) in the
# guest, with the argv and environment meson would use. The host copied the
# executables to SHARE/unit/ and described them in SHARE/unit/manifest.json
# (a JSON array of {name, argv, env, timeout}). One result line per test:
# "ok unit-<name>" or "not ok unit-<name>: why". A skip (77) is reported as
# "ok unit-<name> # SKIP <the test's last line>" so that it stays visible: a
# test may be v1-only by design (its v2 counterpart being these VM checks).
set -u
share=$1
res=$share/results.txt
manifest=$share/unit/manifest.json
[ -r "$manifest" ] || exit 0
n=$(jq length "$manifest")
for ((i = 0; i < n; i++)); do
	name=$(jq -r ".[$i].name" "$manifest")
	limit=$(jq -r ".[$i].timeout" "$manifest")
	mapfile -t argv < <(jq -r ".[$i].argv[]" "$manifest")
	mapfile -t envs < <(jq -r ".[$i].env | to_entries[] | \"\(.key)=\(.value)\"" "$manifest")
	log=$share/unit/$name.log
	( cd "$share/unit" && timeout "$limit" env "${envs[@]}" "${argv[@]}" ) > "$log" 2>&1
	rc=$?
	case $rc in
	0) echo "ok unit-$name" >> "$res" ;;
	77) echo "ok unit-$name # SKIP $(grep -i skip "$log" | tail -n 1)" >> "$res" ;;
	124) echo "not ok unit-$name: timed out after ${limit}s" >> "$res" ;;
	*) echo "not ok unit-$name: exit $rc, see unit/$name.log" >> "$res" ;;
	esac
done
