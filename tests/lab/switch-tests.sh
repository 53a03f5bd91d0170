#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Runs in a lab guest: the switch over verbs between two processes, on one
# VM or across two. iperf3, a 256 MiB hashed transfer each way (sdp-xfer), an
# epoll echo server (sdp-echo), redis-benchmark's 16 connections opened at
# once against redis-server (the step not in the default list), and the
# fallbacks: a plain peer either way
# and a peer whose provider set is disjoint; then both ends unprivileged under
# a 4 MiB locked-memory limit (the verbs staging ring must shrink to fit, not
# vanish). Every step checks the bytes and the path the switch chose (its
# sdp-stat file, or its debug log for iperf3).
#   switch-tests.sh local [PORT]                 both ends here, on $LAB_IP
#   switch-tests.sh server MY_IP PORT SYNC_DIR   one end each; the client
#   switch-tests.sh client SERVER_IP PORT SYNC_DIR  waits for SYNC_DIR/ready.N
# SWT_STEPS="xfer_up echo" runs a subset; SWT_BYTES sets the bulk size.
set -u
mode=${1:-local}
O=build-lab
SW=$PWD/$O/lib/libsdp_switch.so
BYTES=${SWT_BYTES:-268435456}
SMALL=33554432
STEPS=${SWT_STEPS:-"iperf3 xfer_up xfer_down echo plain_client plain_server disjoint memlock"}
case $mode in
local) ip=${LAB_IP:?}; port=${2:-$((20000 + RANDOM % 20000))}; sync="" ;;
server|client) ip=$2; port=$3; sync=$4 ;;
*) echo "usage: switch-tests.sh local|server|client ..." >&2; exit 2 ;;
esac
export SDP_PROVIDER_DIR=$PWD/$O/lib/sdp
# Under TCG a verbs connection takes a large part of the switch's default
# 2 s upgrade budget, and a program that does not call into the switch for
# a pending socket does not move its upgrade on; 10 s keeps the tests about
# the data path (docs/rxe-lab.md).
export SDP_UPGRADE_TIMEOUT_MS=${SDP_UPGRADE_TIMEOUT_MS:-10000}
log=$(mktemp -d)
# iperf3's debug logs are kept in the shared tree for reading after the run
keep=$PWD/$O/logs
trap 'mkdir -p "$keep" && cp "$log"/iperf3-*.log "$keep"/ 2>/dev/null; rm -rf "$log"' EXIT
STEP_TIMEOUT=${SWT_TIMEOUT:-300}

if [ "$mode" != client ]; then
	make -s O=$O $O/lib/libsdp_switch.so $O/lib/sdp/libsdp-verbs.so \
		$O/lib/sdp/libsdp-shm.so $O/bin/sdp-stat \
		$O/tests/sdp-xfer $O/tests/sdp-echo || exit 1
	[ -n "$sync" ] && mkdir -p "$sync" && touch "$sync/built"
else
	for _ in $(seq 900); do [ -f "$sync/built" ] && break; sleep 1; done
fi

# run_with PROVIDERS|plain CMD...: one end, preloaded with the given set.
run_with()
{
	local set=$1
	shift
	if [ "$set" = plain ]; then
		timeout $STEP_TIMEOUT "$@"
	else
		LD_PRELOAD=$SW SDP_PROVIDERS=$set timeout $STEP_TIMEOUT "$@"
	fi
}

# memlocked CMD...: one end on verbs as user nobody, without CAP_IPC_LOCK and
# with a locked-memory limit of 4 MiB (ulimit -l 4096): less than the
# default verbs staging ring, the default for such users is 8 MiB.
memlocked()
{
	# the devices are root's only without udev's rules
	chmod 666 /dev/infiniband/* 2>/dev/null
	# the switch is preloaded after setpriv: a root process of the same
	# pid would leave a stats file the program cannot write
	(ulimit -l 4096 && timeout $STEP_TIMEOUT setpriv --reuid=65534 --regid=65534 \
		--clear-groups --inh-caps=-all env LD_PRELOAD=$SW \
		SDP_PROVIDERS=verbs SDP_LOG=info "$@")
}

# redis_server PORT DONE: redis-server on verbs until the file DONE exists
# (the client's end; at most STEP_TIMEOUT). Its own sdp-stat, read then,
# must show the benchmark's 16 connections carried by verbs (a client's
# statistics go with its process).
redis_server()
{
	local rp c st=$log/stat-redis

	mkdir -p $st
	SDP_STAT_DIR=$st run_with verbs redis-server --port $1 --bind $ip \
		--save '' --appendonly no --protected-mode no \
		--daemonize no --loglevel warning &
	rp=$!
	for _ in $(seq $STEP_TIMEOUT); do [ -f "$2" ] && break; sleep 1; done
	c=$($PWD/$O/bin/sdp-stat -d $st --closed | grep -c ' SAN  *verbs ')
	kill $rp
	wait $rp
	echo "redis-server: $c connection(s) carried by verbs"
	[ "$c" -ge 16 ]
}

# redis_client PORT: redis-benchmark on verbs, 2000 SETs and GETs over 8
# connections each (16 made within a second or two); then five redis-cli
# PINGs, each its own process (their times are printed, not judged).
redis_client()
{
	local c

	run_with verbs redis-benchmark -h $ip -p $1 -t set,get -n 2000 -c 8 \
		--csv > $log/redis.out 2>&1
	c=$?
	cat $log/redis.out
	[ $c = 0 ] || return 1
	[ "$(grep -c '^"\(SET\|GET\)"' $log/redis.out)" = 2 ] || {
		echo "redis: no SET and GET figures"
		return 1
	}
	# short-lived clients, each a new process with nothing remembered of
	# the server: the wall time of each (connect, probe, PING, PONG)
	local i t0 out ms=""
	for i in 1 2 3 4 5; do
		t0=$(date +%s%N)
		out=$(run_with verbs redis-cli -h $ip -p $1 ping)
		[ "$out" = PONG ] || { echo "redis-cli: '$out', not PONG"; return 1; }
		ms="$ms $(( ($(date +%s%N) - t0) / 1000000 ))"
	done
	echo "redis-cli ping, 5 new processes, ms each:$ms"
}

# Server end of step N (runs in the background; result in $log/srv.N).
server_step()
{
	local n=$1 name=$2 p=$((port + $1))
	case $name in
	redis) redis_server $p "${sync:-$log}/done.$n" ;;
	iperf3) SDP_LOG=debug SDP_LOG_FILE=$log/iperf3-s.log \
		run_with verbs iperf3 -s -1 -p $p ;;
	xfer_up) run_with verbs $O/tests/sdp-xfer listen $p recv $BYTES verbs ;;
	xfer_down) run_with verbs $O/tests/sdp-xfer listen $p send $BYTES verbs ;;
	echo) SDP_ECHO_WAIT_MS=${SDP_ECHO_WAIT_MS:-100} \
		run_with verbs $O/tests/sdp-echo server $p 4 verbs ;;
	plain_client) run_with verbs $O/tests/sdp-xfer listen $p recv $SMALL tcp ;;
	plain_server) run_with plain $O/tests/sdp-xfer listen $p send $SMALL tcp ;;
	disjoint) run_with shm $O/tests/sdp-xfer listen $p recv $SMALL tcp ;;
	memlock) memlocked $O/tests/sdp-xfer listen $p recv $SMALL verbs ;;
	esac
}

client_step()
{
	local n=$1 name=$2 p=$((port + $1)) c
	case $name in
	iperf3)
		SDP_LOG=debug SDP_LOG_FILE=$log/iperf3-c.log \
			run_with verbs iperf3 -c $ip -p $p -t 4 -f m || return 1
		c=$(grep -c "carried by verbs" $log/iperf3-c.log)
		echo "iperf3 client: $c connection(s) carried by verbs"
		[ "$c" -ge 2 ] ;;
	xfer_up) run_with verbs $O/tests/sdp-xfer connect $ip $p send $BYTES verbs ;;
	xfer_down) run_with verbs $O/tests/sdp-xfer connect $ip $p recv $BYTES verbs ;;
	redis)
		redis_client $p
		c=$?
		[ -n "$sync" ] || touch "$log/done.$n"
		return $c ;;
	echo) run_with verbs $O/tests/sdp-echo client $ip $p 4 2000000 verbs ;;
	plain_client) run_with plain $O/tests/sdp-xfer connect $ip $p send $SMALL tcp ;;
	plain_server) run_with verbs $O/tests/sdp-xfer connect $ip $p recv $SMALL tcp ;;
	disjoint) run_with verbs $O/tests/sdp-xfer connect $ip $p send $SMALL tcp ;;
	memlock)
		# the bytes must go by RDMA write into the smaller ring
		memlocked $O/tests/sdp-xfer connect $ip $p send $SMALL verbs \
			> $log/memlock.out 2>&1
		c=$?
		cat $log/memlock.out
		[ $c = 0 ] || return 1
		grep -q "^sender: bytes .* write [1-9]" $log/memlock.out || {
			echo "memlock: no bytes by RDMA write (no staging ring?)"
			return 1
		} ;;
	esac
}

fail=0
n=0
for name in $STEPS; do
	n=$((n + 1))
	t0=$(date +%s)
	case $mode in
	local)
		echo "=== $name (one VM, $ip) ==="
		server_step $n $name > $log/srv.out 2>&1 &
		spid=$!
		sleep 2
		client_step $n $name; crc=$?
		wait $spid; src=$?
		sed 's/^/  server| /' $log/srv.out
		[ $name = iperf3 ] && echo "  server| $(grep -c 'carried by verbs' $log/iperf3-s.log) connection(s) carried by verbs"
		;;
	server)
		echo "=== $name (server end, $ip) ==="
		server_step $n $name > $log/srv.out 2>&1 &
		spid=$!
		sleep 2
		touch "$sync/ready.$n"
		wait $spid; src=$?
		cat $log/srv.out
		[ $name = iperf3 ] && echo "$(grep -c 'carried by verbs' $log/iperf3-s.log) connection(s) carried by verbs"
		crc=0
		# wait for the client end before the next listener
		for _ in $(seq 300); do [ -f "$sync/done.$n" ] && break; sleep 1; done
		;;
	client)
		echo "=== $name (client end, to $ip) ==="
		for _ in $(seq 300); do [ -f "$sync/ready.$n" ] && break; sleep 1; done
		client_step $n $name; crc=$?
		touch "$sync/done.$n"
		src=0
		;;
	esac
	t=$(( $(date +%s) - t0 ))
	if [ $crc = 0 ] && [ $src = 0 ]; then
		echo "=== PASS $name ($t s) ==="
	else
		echo "=== FAIL $name (client $crc, server $src; $t s) ==="
		fail=1
	fi
done
exit $fail
