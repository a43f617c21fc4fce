# Shell helpers shared by the guest's check scripts (checks.sh, engine.sh,
# kube.sh), sourced from beside them:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 1
# The host copies the whole of guest/ onto the 9p share (run_vm_test.py:
# SHARE/guest/), so this file sits next to each script in the guest as it
# does in the source tree.
#
# The sourcing script opens fd 3 on SHARE/results.txt before its first
# check; its stdout is its own log.

# What the last fail said: the reason on a "not ok" line.
why=''

# check NAME FUNC [ARGS...]: run FUNC ARGS and write one result line to
# fd 3, "ok NAME # <seconds>s" or "not ok NAME: <why>". The host takes the
# names, in order, from the `check NAME` lines of the scripts and fails on
# a missing one. A script that has more to log on a failure (a unit's
# status) defines check_failed, called with NAME after the line.
check() {
	local name=$1
	shift
	why=''
	echo "=== $name ($(cut -d' ' -f1 /proc/uptime)s)"
	local t0=$SECONDS
	if "$@"; then
		echo "ok $name # $((SECONDS - t0))s" >&3
		echo "=== ok $name"
	else
		echo "not ok $name: ${why:-failed}" >&3
		echo "=== not ok $name: ${why:-failed}"
		if declare -F check_failed > /dev/null; then
			check_failed "$name"
		fi
	fi
	return 0
}

# fail WHY...: record why the check fails; returns 1, so that
# `cond || fail "why" || return` ends the check.
fail() {
	why=$*
	return 1
}

# wait_until SECONDS CMD...: poll CMD until it succeeds, for at most SECONDS.
wait_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.5
	done
}
