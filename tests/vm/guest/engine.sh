#!/bin/bash
# corral's container OOM scenarios in a real engine on cgroup v2: docker.io
# (Debian 12: docker 20.10, containerd, runc) in the guest, driven by the
# installed corral-lab --container docker, as tests/containers/test_engine.py
# does on the cgroup-v1 host.
#   engine.sh SHARE
# The host built the image from containers/Containerfile (a private dockerd,
# BINARIES=prebuilt on the containers/mkbase closure base) and saved it to
# SHARE/engine/corral-image.tar (or wrote why not to SHARE/engine/why): no
# registry is reachable, the guest `docker load`s it. dockerd is started by
# hand as on the host: its own data and exec roots, no bridge, no iptables;
# the containers run with --network none. The image's docker.service is
# disabled (containerd.service is started here), and the guest boots with
# apparmor=0 (no apparmor package).
#
# One result line per check, names listed in `check NAME` lines below (the
# host fails on a missing one). Each scenario asserts corral's category and
# the engine's verdict:
#   container-oom            oom-ancestor-limit (the container's memory.max at
#                            the root of its cgroup namespace), 137, the
#                            container keeps running and exits 0 on stop;
#   container-oom-contained  oom-own-limit, 137, the sibling stays ready, the
#                            container is not OOM-killed, exits 0 on stop;
#   heap-limit               134 (SIGABRT), the heap limit derived from the
#                            container's limit shared by the workers.
set -u
# check, fail, wait_until: lib.sh, beside this script on the share.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 1
share=$1
dir=$share/engine
mkdir -p "$dir"
exec 3>>"$share/results.txt"
exec >>"$dir/engine.log" 2>&1

SOCK=/run/corral-docker/docker.sock
DOCKER=(docker -H "unix://$SOCK")
# TCG on a shared host: the lab's waits (worker start, death) get longer.
export CORRAL_LAB_WAIT_SCALE=${CORRAL_LAB_WAIT_SCALE:-4}
export CORRAL_LAB_ENGINE="docker -H unix://$SOCK"
export CORRAL_LAB_IMAGE=corral-test

engine_up=''

check_engine_start() {
	[ -s "$dir/corral-image.tar" ] ||
		fail "no image on the share: $(cat "$dir/why" 2>/dev/null)" || return
	mkdir -p /run/corral-docker
	# dockerd's own containerd gets a fixed few seconds to start, too few
	# under TCG ("failed to start containerd: timeout waiting for containerd
	# to start"): the packaged unit (Type=notify) is started and waited for.
	systemctl start containerd.service ||
		fail "containerd.service did not start: $(systemctl status containerd --no-pager | tail -n 2)" ||
		return
	dockerd --containerd /run/containerd/containerd.sock --data-root /var/lib/corral-docker --exec-root /run/corral-docker/exec \
		-H "unix://$SOCK" --pidfile /run/corral-docker/docker.pid \
		--bridge=none --iptables=false --ip-forward=false --ip-masq=false \
		> "$dir/dockerd.log" 2>&1 &
	wait_until 180 "${DOCKER[@]}" info > /dev/null 2>&1 ||
		fail "dockerd not up after 180s: $(tail -n 3 "$dir/dockerd.log" | tr '\n' ' ')" || return
	local v
	v=$("${DOCKER[@]}" info -f '{{.ServerVersion}} cgroup v{{.CgroupVersion}} {{.CgroupDriver}}')
	echo "# engine docker $v" >&3
	case $v in
	*"cgroup v2 "*) engine_up=1 ;;
	*) fail "dockerd does not see cgroup v2: $v" ;;
	esac
}

check_engine_load() {
	[ -n "$engine_up" ] || fail "no engine" || return
	"${DOCKER[@]}" load -i "$dir/corral-image.tar" ||
		fail "docker load failed: see engine/engine.log" || return
	"${DOCKER[@]}" image inspect "$CORRAL_LAB_IMAGE" > /dev/null ||
		fail "no $CORRAL_LAB_IMAGE image after docker load"
}

# lab SCENARIO: one corral-lab run; its JSON report in engine/SCENARIO.json.
lab() {
	[ -n "$engine_up" ] || fail "no engine" || return
	local out=$dir/$1.json
	timeout 400 corral-lab --json --container docker "$1" > "$out" 2> "$dir/$1.err"
	local rc=$?
	cat "$out" "$dir/$1.err"
	[ -s "$out" ] || fail "corral-lab $1 exit $rc, no report: $(tail -n 2 "$dir/$1.err" | tr '\n' ' ')" ||
		return
	if ! jq -e '.ok == true' "$out" > /dev/null; then
		fail "corral-lab $1 exit $rc: $(jq -c '.mismatch // .error // .skipped' "$out")"
		return
	fi
	echo "# $1: $(jq -c '{category: .happened.death.category,
		shell_status: .happened.death.shell_status, verdict: .happened.engine_verdict_after_stop}' "$out")" >&3
}

# want SCENARIO JQ-EXPR: an assertion on the report, beyond the lab's own.
want() {
	jq -e "$2" "$dir/$1.json" > /dev/null ||
		fail "$1: want $2, report: $(jq -c '.happened' "$dir/$1.json")"
}

check_container_oom() {
	lab container-oom &&
		want container-oom '.happened.death.category == "oom-ancestor-limit"' &&
		want container-oom '.happened.death.shell_status == 137' &&
		want container-oom '.happened.container_running_after_oom == true' &&
		want container-oom '.happened.engine_verdict_after_stop.exit_code == 0'
}

check_container_oom_contained() {
	lab container-oom-contained &&
		want container-oom-contained '.happened.death.category == "oom-own-limit"' &&
		want container-oom-contained '.happened.death.shell_status == 137' &&
		want container-oom-contained '.happened.engine_verdict_after_stop.exit_code == 0'
}

check_heap_limit() {
	lab heap-limit &&
		want heap-limit '.happened.death.category == "heap-limit"' &&
		want heap-limit '.happened.death.shell_status == 134' &&
		want heap-limit '.happened.engine_verdict_after_stop.exit_code == 0'
}

check engine-start check_engine_start
check engine-load check_engine_load
check engine-container-oom check_container_oom
check engine-container-oom-contained check_container_oom_contained
check engine-heap-limit check_heap_limit

if [ -n "$engine_up" ]; then
	"${DOCKER[@]}" ps -a
	pid=$(cat /run/corral-docker/docker.pid)
	kill "$pid" 2> /dev/null
	timeout 60 tail --pid="$pid" -f /dev/null
fi
# The systemd checks that follow see no engine left.
systemctl stop containerd.service
