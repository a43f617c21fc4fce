#!/bin/bash
# corral's Kubernetes manifests (containers/kubernetes/) played by a real
# manifest consumer on cgroup v2 with systemd as PID 1: rootful podman
# (Debian 12: podman 4.3, runc, catatonit for the pause image) with its
# default storage and configuration, `podman kube play`, as
# tests/containers/test_kube.py does on the cgroup-v1 host. Here the probes
# run too: podman turns the livenessProbe into a healthcheck run by a
# systemd timer.
#   kube.sh SHARE
# The host put the manifests and kube_manifest.py (the manifests' values,
# checked, and the copy podman is given) in SHARE/kube/, and the image it
# built in SHARE/engine/corral-image.tar (docker save; engine.sh loads the
# same file into docker). The pods run with --network none: HTTP goes
# through nsenter --net, the control socket through /proc/PID/root.
#
# One result line per check, names listed in `check NAME` lines below (the
# host fails on a missing one):
#   kube-load          podman load of the image, tagged as the manifests
#                      name it;
#   kube-writable      corral-cgroups.yaml: the pod serves, /livez and
#                      /readyz answer, the container's memory.max and each
#                      worker's are the manifest's, the budget fits;
#   kube-writable-leak a worker leaking on one keep-alive connection ends
#                      oom-own-limit (137), the pod and corrald (same pid)
#                      running, the sibling untouched, no OOM kill in the
#                      container's own group, the termination message;
#   kube-stop          podman pod stop -t GRACE: /readyz fails at once, the
#                      workers serve through stop-delay, exit 0 within the
#                      grace period, the termination message says so;
#   kube-unprivileged  corral.yaml: the same as kube-writable and
#                      kube-writable-leak, the leak ending memory-kill;
#   kube-liveness      the manifest's livenessProbe as podman runs it (a
#                      systemd timer): it passes, then corrald is stopped
#                      (SIGSTOP to its host pid), the probe fails
#                      failureThreshold times and podman acts on it: it
#                      stops the container (podman 4.3 does not start it
#                      again, see below);
#   kube-liveness-restart  the same probe through podman run
#                      --health-on-failure=kill in a systemd service with
#                      Restart=always (podman's documented way to restart
#                      on a failed healthcheck): corrald stopped, the probe
#                      kills the container, a new corrald (a new pid)
#                      serves;
#   kube-oom-group-own     podman run --cgroup-conf=memory.oom.group=1 (how
#                      the kubelet sets up a container since 1.28) with
#                      per-worker limits: only the worker dies;
#   kube-oom-group-container  the same without per-worker limits
#                      (--no-cgroups): a worker past the container's limit
#                      takes every process down, corrald included (exit
#                      137), and the termination message (a bind-mounted
#                      file) holds the last summary corrald wrote.
#
# The guest is emulated: podman times a probe's whole exec (runc exec,
# sh, curl), several seconds under TCG, against timeoutSeconds; the copy
# played here gets timeoutSeconds 60 (PROBE_TIMEOUT) so that a healthy
# corrald is not taken for a dead one. A stopped corrald fails the probe
# by curl's exit status (no byte for 3 s: the image's curl config), not
# by that timeout.
#
# podman 4.3's restart action for an unhealthy container stops it and
# never starts it again when the healthcheck runs from its systemd unit
# (podman issue #17777, fixed in 4.5): kube-liveness asserts the probe's
# verdict and podman's stop, kube-liveness-restart the restart through
# systemd.
set -u
# check, fail, wait_until: lib.sh, beside this script on the share.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 1
share=$1
dir=$share/kube
mkdir -p "$dir"
exec 3>>"$share/results.txt"
exec >>"$dir/kube.log" 2>&1

# Files bind-mounted into the containers live on the guest's disk, not on
# the 9p share; they are copied to the share at the end.
work=/var/tmp/corral-kube
rm -rf "$work"
mkdir -p "$work"
KM=(python3 "$dir/kube_manifest.py")
PROBE_TIMEOUT=60

note() {
	echo "# $*" >&3
	echo "# $*"
}

inspect() { podman inspect -f "$2" "$1" 2>/dev/null; }

# ctl PID JSON: one request to corrald's control socket (the emptyDir
# /run/corral of the container whose PID 1 is PID, or a bind mount).
ctl() {
	printf '%s\n' "$2" | timeout 20 socat -t 10 - "UNIX-CONNECT:/proc/$1/root/run/corral/control.sock" |
		head -n 1
}

ready_count() {
	ctl "$1" '{"cmd":"status"}' | jq -e '[.workers[] | select(.state == "ready")] | length' 2> /dev/null
}

has_ready() { [ "$(ready_count "$1")" = "$2" ]; }

# in_pod PID CMD...: CMD in the network namespace of PID (the pod's).
in_pod() {
	local pid=$1
	shift
	nsenter --net="/proc/$pid/ns/net" "$@"
}

# get PID PORT PATH: the status code in $code, the body in $body (its
# trailing newlines dropped).
get() {
	local out
	out=$(in_pod "$1" curl -s -m 10 -w '\n%{http_code}' "http://127.0.0.1:$2$3")
	code=${out##*$'\n'}
	body=$(printf '%s' "${out%$'\n'*}")
}

# cg_of PID: the cgroup directory of the container whose PID 1 is PID:
# PID's group by its host path, less where it sits below its cgroup
# namespace's root (corrald moves itself into a supervisor/ leaf of the
# container's group on v2 when it makes per-worker groups).
cg_of() {
	local host inside
	host=$(sed -n 's/^0:://p' "/proc/$1/cgroup")
	if [ "$(readlink "/proc/$1/ns/cgroup")" != "$(readlink /proc/self/ns/cgroup)" ]; then
		inside=$(nsenter --cgroup="/proc/$1/ns/cgroup" cat "/proc/$1/cgroup" | sed -n 's/^0:://p')
		[ "$inside" = / ] || host=${host%"$inside"}
	fi
	echo "/sys/fs/cgroup$host"
}

events_local_oom_kills() { awk '$1 == "oom_kill" {print $2}' "$1/memory.events.local"; }

# leak PID PORT: one keep-alive connection growing one worker 16 MiB a
# request until it dies; prints the pid of the worker that answered last.
# Python's client, not curl: curl retries a request on a fresh connection
# when the reused one died, and the leak would go on in the next worker.
leak() {
	in_pod "$1" python3 - "$2" << 'EOF'
import http.client
import sys

c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
pid = None
try:
    for _ in range(64):
        c.request("GET", "/buffer?mb=16&retain=1")
        r = c.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"HTTP {r.status}")
        pid = r.getheader("X-Worker-Pid")
except (OSError, http.client.HTTPException):
    print(pid)
    sys.exit(0)
sys.exit(f"worker {pid} still alive after 64 x 16 MiB")
EOF
}

# -- the image -------------------------------------------------------------------

loaded=''
check_load() {
	command -v podman > /dev/null || fail "podman is not installed in the guest image" || return
	[ -x /usr/libexec/podman/catatonit ] || fail "no catatonit for podman's pause image" || return
	[ -s "$share/engine/corral-image.tar" ] ||
		fail "no image on the share: $(cat "$share/engine/why" 2> /dev/null)" || return
	note "podman $(podman version -f '{{.Client.Version}}'): $(podman info -f 'cgroup {{.Host.CgroupsVersion}} {{.Host.CgroupManager}}, runtime {{.Host.OCIRuntime.Name}}')"
	local out image
	out=$(podman load -i "$share/engine/corral-image.tar" 2>&1) ||
		fail "podman load failed: $(echo "$out" | tail -n 2 | tr '\n' ' ')" || return
	echo "$out"
	image=$("${KM[@]}" values "$dir/corral.yaml" | jq -r .image) ||
		fail "kube_manifest.py values corral.yaml failed" || return
	podman tag corral-test "$image" || fail "podman tag corral-test $image failed" || return
	loaded=1
}

# -- a played manifest -------------------------------------------------------------

# play VARIANT FILE: the manifest's values in $vals, the played copy's pod,
# container and corrald's host pid in $pod, $ctr, $pid, the termination
# message file in $tl.
play() {
	local variant=$1 m=$dir/$2 out name
	vals=$("${KM[@]}" values "$m") || fail "kube_manifest.py values $2 failed" || return
	tl=$work/$variant.termination-log
	: > "$tl"
	chmod 666 "$tl"
	name=corral-kube-$$-$variant
	"${KM[@]}" for-podman "$m" "$name" "$tl" "$PROBE_TIMEOUT" > "$work/$variant.yaml" ||
		fail "kube_manifest.py for-podman $2 failed" || return
	cp "$work/$variant.yaml" "$dir/"
	local t0=$SECONDS
	out=$(podman kube play --network none "$work/$variant.yaml" 2>&1)
	local rc=$?
	echo "$out"
	[ $rc -eq 0 ] || fail "podman kube play $2 exit $rc: $(echo "$out" | tail -n 2 | tr '\n' ' ')" ||
		return
	pod=$(echo "$out" | awk '/^Pod:/ {getline; print; exit}')
	ctr=$(echo "$out" | awk '/^Container:/ {getline; print; exit}')
	[ -n "$ctr" ] || fail "no container in podman kube play's output" || return
	pid=$(inspect "$ctr" '{{.State.Pid}}')
	[ "${pid:-0}" -gt 0 ] || fail "the container is not running: $(podman logs "$ctr" 2>&1 | tail -n 3)" ||
		return
	wait_until 180 has_ready "$pid" "$(jq .workers <<< "$vals")" ||
		fail "$(jq .workers <<< "$vals") workers not ready after 180 s: $(podman logs "$ctr" 2>&1 | tail -n 3 | tr '\n' ' ')" ||
		return
	note "$variant: played and ready in $((SECONDS - t0)) s"
}

# serves: HTTP, the probes' endpoints, the container's limit, the budget.
serves() {
	local workers limit cg got log budget
	workers=$(jq .workers <<< "$vals")
	limit=$(jq .limit <<< "$vals")
	get "$pid" "$(jq .http_port <<< "$vals")" /light
	[ "$code" = 200 ] || fail "GET /light: $code" || return
	get "$pid" "$(jq .metrics_port <<< "$vals")" /livez
	[ "$code" = 200 ] && [ "$body" = alive ] || fail "GET /livez: $code $body" || return
	get "$pid" "$(jq .metrics_port <<< "$vals")" /readyz
	[ "$code" = 200 ] && [[ $body == "ready: $workers of $workers worker(s) ready and answering"* ]] ||
		fail "GET /readyz: $code $body" || return
	cg=$(cg_of "$pid")
	got=$(cat "$cg/memory.max")
	[ "$got" = "$limit" ] || fail "$cg/memory.max is $got, the manifest says $limit" || return
	log=$(podman logs "$ctr" 2>&1)
	budget=$(echo "$log" | grep 'memory budget: ')
	[ "$(echo "$budget" | grep -c .)" = 1 ] && [[ $budget == *" info "* ]] ||
		fail "the budget line: $budget" || return
	! echo "$log" | grep -q ' warning ' || fail "a warning: $(echo "$log" | grep ' warning ' | head -n 2)" ||
		return
	grep -q "$workers of $workers worker(s) ready" "$tl" || fail "termination message: $(head -c 300 "$tl")" ||
		return
	note "$(jq -r .container <<< "$vals") in $cg: memory.max $got; $budget"
}

# leaks: one worker leaks until it dies in the variant's category.
leaks() {
	local category before victim sibling_id sibling d st cg kills line
	category=$(jq -r .category <<< "$vals")
	before=$(ctl "$pid" '{"cmd":"status"}' | jq -c '[.workers[] | {id, pid}]')
	local t0=$SECONDS
	victim=$(leak "$pid" "$(jq .http_port <<< "$vals")")
	[ -n "$victim" ] || fail "no answer to the leak" || return
	jq -e --argjson v "$victim" 'any(.[]; .pid == $v)' <<< "$before" > /dev/null ||
		fail "the leak was answered by $victim, not one of $before" || return
	death() { ctl "$pid" '{"cmd":"history"}' | jq -e -c --argjson v "$victim" '.history[] | select(.pid == $v)'; }
	wait_until 60 death > /dev/null || fail "no death of worker $victim in the history" || return
	d=$(death)
	jq -e --arg c "$category" '.category == $c and .shell_status == 137' <<< "$d" > /dev/null ||
		fail "worker $victim died $(jq -c '{category, shell_status, reason}' <<< "$d"), want $category 137" ||
		return
	sibling_id=$(jq --argjson v "$victim" '.[] | select(.pid != $v) | .id' <<< "$before")
	sibling=$(jq --argjson v "$victim" '.[] | select(.pid != $v) | .pid' <<< "$before")
	wait_until 120 has_ready "$pid" "$(jq .workers <<< "$vals")" || fail "no replacement ready" || return
	[ "$(ctl "$pid" '{"cmd":"status"}' | jq --argjson i "$sibling_id" '.workers[] | select(.id == $i) | .pid')" = "$sibling" ] ||
		fail "the sibling worker $sibling_id (pid $sibling) was touched" || return
	[ "$(ctl "$pid" '{"cmd":"history"}' | jq '.history | length')" = 1 ] ||
		fail "more than one death: $(ctl "$pid" '{"cmd":"history"}' | jq -c '[.history[] | {pid, category}]')" ||
		return
	st=$(inspect "$ctr" '{{.State.Running}} {{.State.Pid}} {{.RestartCount}}')
	[ "$st" = "true $pid 0" ] || fail "the container: running, pid, restarts = $st, want true $pid 0" || return
	cg=$(cg_of "$pid")
	kills=$(events_local_oom_kills "$cg")
	[ "$kills" = 0 ] || fail "$cg/memory.events.local: oom_kill $kills" || return
	wait_until 10 grep -q "pid $victim " "$tl" || fail "worker $victim not in the termination message" ||
		return
	line=$(grep "pid $victim " "$tl")
	[[ $line == *" $category (137, signal 9): "* ]] || fail "termination message line: $line" || return
	note "$(jq -r .container <<< "$vals"): worker $victim died in $((SECONDS - t0)) s: $line"
}

down() {
	[ -n "${1:-}" ] && [ -f "$work/$1.yaml" ] && podman kube down "$work/$1.yaml" > /dev/null 2>&1
	return 0
}

# -- the writable variant -------------------------------------------------------------

writable=''
check_writable() {
	[ -n "$loaded" ] || fail "no image" || return
	play writable corral-cgroups.yaml || return
	writable=1
	serves || return
	local w wcg got per
	per=$(jq .per_worker <<< "$vals")
	for w in $(ctl "$pid" '{"cmd":"status"}' | jq -r '.workers[].cgroup'); do
		wcg=$(cg_of "$pid")$w
		got=$(cat "$wcg/memory.max")
		[ "$got" = "$per" ] || fail "$wcg/memory.max is $got, memory-max is $per" || return
	done
}

check_writable_leak() {
	[ -n "$writable" ] || fail "no pod" || return
	leaks
}

check_stop() {
	[ -n "$writable" ] || fail "no pod" || return
	local grace delay mport hport t0 stopper took st first
	grace=$(jq .grace <<< "$vals")
	delay=$(jq .stop_delay <<< "$vals")
	mport=$(jq .metrics_port <<< "$vals")
	hport=$(jq .http_port <<< "$vals")
	t0=$(date +%s%N)
	podman pod stop -t "$grace" "$pod" > "$work/stop.out" 2>&1 &
	stopper=$!
	readyz_fails() { get "$pid" "$mport" /readyz; [ "$code" = 503 ]; }
	wait_until 20 readyz_fails || fail "/readyz still $code after the stop signal" || return
	local flipped=$((($(date +%s%N) - t0) / 1000000))
	get "$pid" "$hport" /light
	[ "$code" = 200 ] || fail "GET /light during stop-delay: $code" || return
	wait "$stopper" || fail "podman pod stop failed: $(cat "$work/stop.out")" || return
	took=$((($(date +%s%N) - t0) / 1000000))
	st=$(inspect "$ctr" '{{.State.Running}} {{.State.ExitCode}}')
	[ "$st" = "false 0" ] || fail "after the stop: running, exit code = $st" || return
	[ "$took" -ge "${delay%.*}000" ] && [ "$took" -lt "${grace}000" ] ||
		fail "stopped after $took ms: want stop-delay ${delay}s <= it < grace ${grace}s" || return
	first=$(head -n 1 "$tl")
	[[ $first == *" exited 0 at "*"stopped (SIGTERM), no worker left" ]] ||
		fail "termination message: $first" || return
	note "stop: /readyz 503 after ${flipped} ms, /light 200 after it, exit 0 after ${took} ms (grace ${grace} s); $first"
}

# -- the unprivileged variant -------------------------------------------------------------

unprivileged=''
check_unprivileged() {
	[ -n "$loaded" ] || fail "no image" || return
	play unprivileged corral.yaml || return
	unprivileged=1
	serves || return
	leaks
}

# -- the liveness probe ----------------------------------------------------------------------

health() { inspect "$1" '{{json .State.Health}}'; }
healthy() { [ "$(health "$1" | jq -r .Status)" = healthy ]; }

# The manifest's probe as podman made it, on the unprivileged pod.
check_liveness() {
	[ -n "$unprivileged" ] || fail "no pod" || return
	local old=$pid hc period retries h fails t0
	read -r period _ retries < <(jq -r '.liveness_timing | @tsv' <<< "$vals")
	hc=$(inspect "$ctr" '{{.Config.Healthcheck.Test}} every {{.Config.Healthcheck.Interval}}, timeout {{.Config.Healthcheck.Timeout}}, {{.Config.Healthcheck.Retries}} retries')
	note "liveness probe as podman runs it: $hc"
	[ "$(inspect "$ctr" '{{.Config.Healthcheck.Interval}} {{.Config.Healthcheck.Retries}}')" = "${period}s $retries" ] ||
		fail "the healthcheck is not the manifest's probe (periodSeconds $period, failureThreshold $retries): $hc" ||
		return
	systemctl is-active -q "$ctr.timer" || fail "no healthcheck timer $ctr.timer" || return
	wait_until 120 healthy "$ctr" || fail "the probe never passed: $(health "$ctr")" || return
	t0=$SECONDS
	kill -STOP "$old" || fail "kill -STOP $old" || return
	# podman's action: the container stopped (podman 4.3: SIGTERM, and
	# SIGKILL at its 10 s stop timeout, corrald being stopped), or, with a
	# podman whose restart works, running again with a new corrald.
	acted() {
		local s
		s=$(inspect "$ctr" '{{.State.Status}} {{.State.Pid}}')
		case $s in
		exited* | stopped*) return 0 ;;
		"running $old") return 1 ;;
		running*) return 0 ;;
		*) return 1 ;;
		esac
	}
	if ! wait_until 300 acted; then
		kill -CONT "$old" 2> /dev/null
		fail "corrald still stopped in a running container 300 s after SIGSTOP: $(health "$ctr")"
		return
	fi
	h=$(health "$ctr")
	echo "$h"
	# The last failureThreshold runs failed by the probe's own exit status.
	fails=$(jq --argjson n "$retries" '[.Log[-$n:][] | select(.ExitCode == 1)] | length' <<< "$h")
	jq -e --argjson n "$retries" '.Status == "unhealthy" and .FailingStreak >= $n' <<< "$h" > /dev/null &&
		[ "$fails" = "$retries" ] || fail "health after the stop: $(jq -c '{Status, FailingStreak, Log: [.Log[] | .ExitCode]}' <<< "$h")" ||
		return
	note "liveness: probe exit codes $(jq -c '[.Log[] | .ExitCode]' <<< "$h"), unhealthy; podman acted $((SECONDS - t0)) s after SIGSTOP: status, exit code, restarts $(inspect "$ctr" '{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}')"
}

# The same probe, and systemd's restart policy: podman's documented way.
check_liveness_restart() {
	[ -n "$loaded" ] || fail "no image" || return
	local unit=corral-live-$$ name=corral-live-$$ path port period retries old new n
	read -r path port < <(jq -r '.liveness | @tsv' <<< "$vals")
	read -r period _ retries < <(jq -r '.liveness_timing | @tsv' <<< "$vals")
	systemd-run --unit "$unit" -p Restart=always -p RestartSec=1 \
		podman run --replace --name "$name" --network none --memory 384m --memory-swap 384m \
		--health-cmd "curl -f http://localhost:$port$path || exit 1" \
		--health-interval "${period}s" --health-retries "$retries" --health-timeout "${PROBE_TIMEOUT}s" \
		--health-on-failure=kill corral:latest --listen 0.0.0.0:8080 \
		--metrics-listen "0.0.0.0:$port" --workers 2 --no-cgroups ||
		fail "systemd-run $unit failed" || return
	running_pid() {
		new=$(inspect "$name" '{{.State.Pid}}')
		[ "${new:-0}" -gt 0 ] && [ "$new" != "${1:-}" ] && has_ready "$new" 2
	}
	wait_until 180 running_pid || fail "$name not ready: $(journalctl -u "$unit" -n 3 --no-pager)" ||
		{ systemctl stop "$unit"; return 1; }
	old=$new
	if ! wait_until 120 healthy "$name"; then
		fail "the probe never passed: $(health "$name")"
		systemctl stop "$unit"
		return 1
	fi
	local t0=$SECONDS
	kill -STOP "$old"
	if ! wait_until 300 running_pid "$old"; then
		kill -CONT "$old" 2> /dev/null
		fail "no new corrald 300 s after SIGSTOP to $old: $(systemctl show -p NRestarts "$unit")"
		systemctl stop "$unit"
		return 1
	fi
	n=$(systemctl show -p NRestarts --value "$unit")
	get "$new" "$port" "$path"
	local ok=''
	[ "$code" = 200 ] && [ "$body" = alive ] && [ "$n" -ge 1 ] && ok=1
	note "liveness restart: corrald $old -> $new $((SECONDS - t0)) s after SIGSTOP; $unit NRestarts $n; $path: $code $body"
	systemctl stop "$unit"
	podman rm -f -t 0 "$name" > /dev/null 2>&1
	[ -n "$ok" ] || fail "after the restart: $path $code $body, NRestarts $n"
}

# -- memory.oom.group=1, as the kubelet sets it ----------------------------------------------

# run_oom NAME ARGS...: podman run, the corral image, a bind-mounted
# termination message; sets $ctr, $pid, $tl.
run_oom() {
	local name=$1
	shift
	tl=$work/$name.termination-log
	: > "$tl"
	chmod 666 "$tl"
	ctr=corral-oomg-$$-$name
	podman run -d --name "$ctr" --network none --no-healthcheck --cgroup-conf=memory.oom.group=1 \
		-v "$tl:/dev/termination-log" "$@" || fail "podman run $ctr failed" || return
	pid=$(inspect "$ctr" '{{.State.Pid}}')
	[ "${pid:-0}" -gt 0 ] || fail "$ctr is not running: $(podman logs "$ctr" 2>&1 | tail -n 3)" || return
	wait_until 180 has_ready "$pid" 2 ||
		fail "2 workers not ready after 180 s: $(podman logs "$ctr" 2>&1 | tail -n 3 | tr '\n' ' ')" || return
	local g
	g=$(cat "$(cg_of "$pid")/memory.oom.group")
	[ "$g" = 1 ] || fail "$(cg_of "$pid")/memory.oom.group is $g" || return
}

check_oom_group_own() {
	[ -n "$loaded" ] || fail "no image" || return
	run_oom own --cgroupns=private --cap-add SYS_ADMIN --memory 256m --memory-swap 256m \
		corral:latest --listen 0.0.0.0:8080 --workers 2 --memory-max 64M || return
	vals='{"workers": 2, "http_port": 8080, "category": "oom-own-limit", "container": "oom.group own"}'
	leaks
	local rc=$?
	podman rm -f -t 0 "$ctr" > /dev/null 2>&1
	return $rc
}

check_oom_group_container() {
	[ -n "$loaded" ] || fail "no image" || return
	run_oom container --memory 128m --memory-swap 128m \
		corral:latest --listen 0.0.0.0:8080 --workers 2 --no-cgroups || return
	local cg procs before victim st p alive='' warn
	cg=$(cg_of "$pid")
	procs=$(cat "$cg/cgroup.procs" | tr '\n' ' ')
	# corrald foresees it: no per-worker limit under memory.oom.group=1.
	warn=$(podman logs "$ctr" 2>&1 | grep ' warning .*memory budget: .*memory.oom.group=1')
	[ -n "$warn" ] || fail "no budget warning naming memory.oom.group=1" || return
	wait_until 10 grep -q "2 of 2 worker(s) ready" "$tl" || fail "termination message: $(head -c 300 "$tl")" ||
		return
	before=$(cat "$tl")
	victim=$(leak "$pid" 8080)
	gone() { [ "$(inspect "$ctr" '{{.State.Running}}')" = false ]; }
	wait_until 60 gone || fail "the container still runs after worker $victim grew past its limit" || return
	st=$(inspect "$ctr" '{{.State.ExitCode}} {{.State.OOMKilled}}')
	[ "${st%% *}" = 137 ] || fail "the container exited ${st%% *}, want 137 (OOMKilled ${st#* })" || return
	for p in $procs; do
		[ -d "/proc/$p" ] && alive="$alive $p"
	done
	[ -z "$alive" ] || fail "processes of the container still alive:$alive" || return
	# The last summary corrald wrote, at start-up: no exit line, no death.
	[ "$(cat "$tl")" = "$before" ] ||
		fail "the termination message changed after the kill: $(head -n 1 "$tl")" || return
	grep -q "it was killed if no exit line replaced this one" "$tl" && grep -q "worker deaths: none" "$tl" &&
		! head -n 1 "$tl" | grep -q " exited " || fail "termination message: $(head -n 2 "$tl")" || return
	note "oom.group: worker $victim grew past 128 MiB: exit $st, processes [$procs] all gone; termination message: $(head -n 1 "$tl")"
	podman rm -f -t 0 "$ctr" > /dev/null 2>&1
}

check kube-load check_load
check kube-writable check_writable
check kube-writable-leak check_writable_leak
check kube-stop check_stop
down writable
check kube-unprivileged check_unprivileged
check kube-liveness check_liveness
down unprivileged
check kube-liveness-restart check_liveness_restart
check kube-oom-group-own check_oom_group_own
check kube-oom-group-container check_oom_group_container

podman ps -a
podman pod rm -a -f > /dev/null 2>&1
podman rm -a -f > /dev/null 2>&1
cp "$work"/*.termination-log "$dir/" 2> /dev/null
rm -rf "$work"
