#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-statfile.sh - the statistics file against other local users, as
# unprivileged users made here (alice runs the switch, mallory attacks):
# only its owner and root can read it; a directory, symbolic link or file
# planted where it goes is never used, followed, adopted or truncated; a
# full /dev/shm (a private tmpfs in a private mount namespace) means no
# statistics or fewer slots, with the reason logged, never a fault. In
# every case the program's connection is still carried and its bytes
# arrive intact. Needs root (useradd, unshare -m, mount).
#   check-statfile.sh SDP-STAT LIBSDP_SWITCH.so PROVIDER_DIR
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib/lib.sh"
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }
if [ "$(id -u)" != 0 ]; then
	echo "SKIP the statistics file against other users: needs root to make the test users with useradd (CI runs as root)"
	exit 0
fi
for tool in useradd userdel runuser unshare; do
	if ! command -v $tool >/dev/null; then
		echo "SKIP the statistics file against other users: $tool is missing (package passwd or util-linux)"
		exit 0
	fi
done
sdp_workdir sdp-check-statfile
chmod 755 "$work"
# the binaries where the test users can read them
mkdir -p "$work/bin/sdp"
cp "$1" "$work/bin/sdp-stat"
cp "$2" "$work/bin/libsdp_switch.so"
cp "$3"/libsdp-shm.so "$work/bin/sdp/"
chmod -R a+rX "$work/bin"
stat_bin=$work/bin/sdp-stat
sdp_preload "$work/bin/libsdp_switch.so"
if [ "${SANITIZE:-0}" = 1 ]; then
	chmod a+r "${preload%% *}" 2>/dev/null
fi
alice=sdpa$$
mallory=sdpm$$
users_made=()
cleanup_users() {
	local u uid
	for u in "${users_made[@]}"; do
		uid=$(id -u "$u" 2>/dev/null) &&
			rm -rf "/dev/shm/sdp-stat-$uid"
		userdel "$u" 2>/dev/null
	done
}
trap 'cleanup_users; keep_work=${KEEP:-0}; sdp_cleanup' EXIT
for u in $alice $mallory; do
	if ! useradd -M -N -r -s /usr/sbin/nologin "$u"; then
		failed "useradd $u"
		exit 1
	fi
	users_made+=("$u")
done
auid=$(id -u $alice)
muid=$(id -u $mallory)
adir=/dev/shm/sdp-stat-$auid
rm -rf "$adir" "/dev/shm/sdp-stat-$muid"

# as USER CMD...: runs CMD as USER with the switch's environment
as() {
	local u=$1
	shift
	runuser -u "$u" -- env SDP_PROVIDERS=shm \
		SDP_PROVIDER_DIR="$work/bin/sdp" ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} "$@"
}

# transfer TAG USER [VAR=VALUE...]: 4 MiB from a preloaded socat client to a
# preloaded socat server, both USER's; the client holds the connection 2 s
# after sending, while $on_live runs (if set). Sets $srv, $cli (pids). The
# bytes must arrive intact and no process may die of a signal.
transfer() {
	local tag=$1 u=$2 port rc
	shift 2
	head -c $((4 << 20)) /dev/urandom >"$work/$tag.in"
	chmod 644 "$work/$tag.in"
	rm -f "$work/$tag.out"
	install -m 666 /dev/null "$work/$tag.out"
	port=$(sdp_free_port)
	as "$u" "$@" LD_PRELOAD="$preload" socat -u \
		TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr \
		OPEN:"$work/$tag.out",trunc 2>"$work/$tag.srv.log" &
	srv=$!
	pids+=("$srv")
	sdp_wait_listen $port
	{ cat "$work/$tag.in"; sleep 2; } |
		as "$u" "$@" LD_PRELOAD="$preload" socat -u - \
		TCP:127.0.0.1:$port 2>"$work/$tag.cli.log" &
	cli=$!
	pids+=("$cli")
	# the pids of socat themselves (runuser forks)
	for _ in $(seq 50); do
		ssrv=$(pgrep -u "$u" -f "TCP-LISTEN:$port" | head -1)
		scli=$(pgrep -u "$u" -f "TCP:127.0.0.1:$port" | head -1)
		[ -n "$ssrv" ] && [ -n "$scli" ] && break
		sleep 0.1
	done
	sleep 0.5
	[ -n "${on_live:-}" ] && $on_live
	wait "$cli"
	rc=$?
	wait "$srv"
	rc=$((rc | $?))
	if [ $rc -lt 128 ] && cmp -s "$work/$tag.in" "$work/$tag.out"; then
		pass "$tag: the program works, its 4 MiB arrived intact"
	else
		failed "$tag: exit $rc, bytes $(stat -c %s "$work/$tag.out") of $((4 << 20))"
		cat "$work/$tag.srv.log" "$work/$tag.cli.log"
	fi
}

# carried TAG: the live server ($ssrv) is carried by shm, per root's sdp-stat
carried_check() {
	"$stat_bin" -p "$ssrv" --json >"$work/$1.json" 2>&1 &&
		python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
c = [c for c in p["connections"] if c["role"] == "server"]
assert c and c[0]["state"] == "SAN" and c[0]["provider"] == "shm", p' \
			"$work/$1.json"
}

# 1. A directory mallory made in alice's place (mode 0777, with a file in
#    it): alice's processes refuse it, run without statistics, say why.
mkdir -m 0777 "$adir"
chown $mallory "$adir"
echo planted >"$adir/note"
chown $mallory "$adir/note"
on_live=
transfer squat-dir $alice
if grep -q "statistics: $adir belongs to uid $muid with mode 0777; it must be ours (uid $auid) with mode 0700: remove it" \
	"$work/squat-dir.srv.log" &&
   [ "$(ls "$adir")" = note ] && [ "$(cat "$adir/note")" = planted ]; then
	pass "a directory planted by another user is refused, with the reason"
else
	failed "planted directory: $(ls -la "$adir"; cat "$work/squat-dir.srv.log")"
fi
rm -rf "$adir"

# 2. A symbolic link in alice's place to a directory mallory owns.
mkdir -m 0777 "$work/mallorys"
chown $mallory "$work/mallorys"
ln -s "$work/mallorys" "$adir"
transfer squat-link $alice
if grep -q "statistics: cannot open $adir: .*symbolic link" "$work/squat-link.srv.log" &&
   [ -z "$(ls "$work/mallorys")" ]; then
	pass "a symbolic link planted in the directory's place is not followed"
else
	failed "planted link: $(ls -la "$work/mallorys"; cat "$work/squat-link.srv.log")"
fi
rm -f "$adir"

# 3. Alice's own directory: 0700, files 0600. While her connection is live,
#    mallory can neither list nor read them, and her sdp-stat shows none
#    of alice's; alice sees hers, root sees everyone's.
live_checks() {
	local f
	carried_check own || failed "alice's server is not carried by shm: $(cat "$work/own.json")"
	f=$adir/sdp-stat.$ssrv
	if [ "$(stat -c '%U %a' "$adir")" = "$alice 700" ] &&
	   [ "$(stat -c '%U %a' "$f")" = "$alice 600" ]; then
		pass "alice's statistics: directory $alice 0700, file $alice 0600"
	else
		failed "modes: $(ls -ld "$adir" "$f")"
	fi
	if ! runuser -u $mallory -- cat "$f" >/dev/null 2>&1 &&
	   ! runuser -u $mallory -- ls "$adir" >/dev/null 2>&1; then
		pass "mallory can neither read nor list alice's statistics"
	else
		failed "mallory read alice's statistics"
	fi
	runuser -u $mallory -- "$stat_bin" --json >"$work/m.json" 2>&1
	runuser -u $mallory -- "$stat_bin" -p "$ssrv" >"$work/m2.txt" 2>&1
	m2=$?
	runuser -u $alice -- "$stat_bin" --json >"$work/a.json" 2>&1
	"$stat_bin" --json >"$work/r.json" 2>&1
	if python3 - "$work/m.json" "$work/a.json" "$work/r.json" "$ssrv" "$scli" <<'PY' && [ $m2 = 1 ]
import json, sys
m, a, r = (json.load(open(f))["processes"] for f in sys.argv[1:4])
srv, cli = int(sys.argv[4]), int(sys.argv[5])
assert m == [], ("mallory sees", m)
assert {p["pid"] for p in a} == {srv, cli}, ("alice sees", a)
assert {srv, cli} <= {p["pid"] for p in r}, ("root sees", r)
PY
	then
		pass "sdp-stat: mallory sees nothing of alice's, alice sees her two processes, root sees them"
	else
		failed "sdp-stat views: $(cat "$work/m.json" "$work/m2.txt" "$work/a.json")"
	fi
}
on_live=live_checks
transfer own $alice
on_live=

# 4. A shared sticky directory (SDP_STAT_DIR, mode 1777) where mallory plants
#    a symbolic link named for the next process, to a file of root's: the
#    file is left alone and the program works without statistics.
shared=$work/shared
mkdir -m 1777 "$shared"
ctl=$work/ctl
mkdir -m 0777 "$ctl"
echo precious >"$work/victim"
chmod 600 "$work/victim"
# start_planted USER TAG: starts a preloaded socat server as USER whose pid
# is known before it runs (the shell's, kept by exec); mallory plants what
# $plant does; then the server starts. Sets $ssrv, $port.
start_planted() {
	local u=$1 tag=$2
	port=$(sdp_free_port)
	rm -f "$ctl/go" "$ctl/pid"
	install -m 666 /dev/null "$work/$tag.out"
	as "$u" SDP_STAT_DIR="$shared" sh -c 'echo $$ >"$5/pid"
		while [ ! -e "$5/go" ]; do sleep 0.05; done
		exec env LD_PRELOAD="$2" socat -u TCP-LISTEN:$3,bind=127.0.0.1,reuseaddr OPEN:"$1/$4.out",trunc' \
		sh "$work" "$preload" "$port" "$tag" "$ctl" 2>"$work/$tag.srv.log" &
	srv=$!
	pids+=("$srv")
	for _ in $(seq 50); do
		[ -s "$ctl/pid" ] && break
		sleep 0.1
	done
	ssrv=$(cat "$ctl/pid")
	$plant "$ssrv"
	touch "$ctl/go"
	sdp_wait_listen $port
}
# send_planted USER TAG: the client side of start_planted's server
send_planted() {
	local rc
	head -c $((1 << 20)) /dev/urandom >"$work/$2.in"
	chmod 644 "$work/$2.in"
	as "$1" SDP_STAT_DIR="$shared" LD_PRELOAD="$preload" socat -u \
		OPEN:"$work/$2.in" TCP:127.0.0.1:$port 2>"$work/$2.cli.log"
	wait "$srv"
	rc=$?
	if [ $rc -lt 128 ] && cmp -s "$work/$2.in" "$work/$2.out"; then
		pass "$2: the program works, its bytes arrived intact"
	else
		failed "$2: exit $rc; $(cat "$work/$2.srv.log" "$work/$2.cli.log")"
	fi
}
plant_link() {
	runuser -u $mallory -- ln -s "$work/victim" "$shared/sdp-stat.$1"
}
plant=plant_link
start_planted root link
send_planted root link
if [ "$(cat "$work/victim")" = precious ] &&
   [ "$(stat -c %s "$work/victim")" = 9 ] &&
   grep -q "statistics: cannot create $shared/sdp-stat.$ssrv: File exists (something of another user's is in the way)" \
	"$work/link.srv.log"; then
	pass "a planted symbolic link is not followed: root's file is untouched"
else
	failed "planted link: victim now $(stat -c %s "$work/victim") bytes; $(cat "$work/link.srv.log")"
fi

# 5. The same directory, a file mallory pre-created for alice's next process
#    with mode 0666: not adopted, not truncated, nothing of alice's in it.
plant_file() {
	runuser -u $mallory -- sh -c "echo mallory >'$shared/sdp-stat.$1'; chmod 666 '$shared/sdp-stat.$1'"
	planted=$shared/sdp-stat.$1
}
plant=plant_file
start_planted $alice precreated
send_planted $alice precreated
if [ "$(cat "$planted")" = mallory ] &&
   [ "$(stat -c '%U %s' "$planted")" = "$mallory 8" ] &&
   grep -q "cannot create $planted: File exists" "$work/precreated.srv.log"; then
	pass "a file pre-created by another user is neither adopted nor truncated"
else
	failed "pre-created file: $(ls -l "$planted"; cat "$work/precreated.srv.log")"
fi

# 6. /dev/shm full from the start, in a private mount namespace: no
#    statistics, the reason logged, the connection still carried.
cat >"$work/fullshm.sh" <<'SH'
set -u
work=$1 stat_bin=$2 preload=$3
. "$4/lib.sh"
mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm || exit 3
dd if=/dev/zero of=/dev/shm/fill bs=4k 2>/dev/null
port=$(sdp_free_port)
head -c $((4 << 20)) /dev/urandom >"$work/full.in"
LD_PRELOAD="$preload" socat -u TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr \
	OPEN:"$work/full.out",creat,trunc 2>"$work/full.srv.log" &
srv=$!
sdp_wait_listen $port
LD_PRELOAD="$preload" socat -u OPEN:"$work/full.in" TCP:127.0.0.1:$port \
	2>"$work/full.cli.log"
rc=$?
wait $srv
echo "$rc $?" >"$work/full.rc"
SH
SDP_PROVIDERS=shm SDP_PROVIDER_DIR="$work/bin/sdp" \
	unshare -m --propagation private bash "$work/fullshm.sh" "$work" \
	"$stat_bin" "$preload" "$sdp_lib_dir"
if [ "$(cat "$work/full.rc" 2>/dev/null)" = "0 0" ] &&
   cmp -s "$work/full.in" "$work/full.out" &&
   grep -q "statistics: cannot allocate [0-9]* bytes for /dev/shm/sdp-stat-0/sdp-stat.[0-9]*: No space left on device; this process runs without them" \
	"$work/full.srv.log"; then
	pass "a full /dev/shm: no statistics, the reason logged, the program works"
else
	failed "full /dev/shm: rc $(cat "$work/full.rc" 2>/dev/null); $(cat "$work/full.srv.log" "$work/full.cli.log")"
fi

# 7. /dev/shm filled while the program runs: a server holding 400 plain
#    connections needs more slots than its file's first allocation; the
#    growth fails, the server says so and serves every connection.
cat >"$work/filllater.sh" <<'SH'
set -u
work=$1 stat_bin=$2 preload=$3
. "$4/lib.sh"
mount -t tmpfs -o size=200k,mode=1777 tmpfs /dev/shm || exit 3
port=$(sdp_free_port)
LD_PRELOAD="$preload" python3 -c '
import socket, sys
ls = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=512)
open(sys.argv[2], "w").close()
cs = [ls.accept()[0] for _ in range(400)]
for c in cs:
    c.sendall(c.recv(64))
for c in cs:
    c.close()
' $port "$work/later.ready" 2>"$work/later.srv.log" &
srv=$!
for _ in $(seq 50); do
	[ -e "$work/later.ready" ] && break
	sleep 0.1
done
dd if=/dev/zero of=/dev/shm/fill bs=4k 2>/dev/null
python3 -c '
import socket, sys
cs = [socket.create_connection(("127.0.0.1", int(sys.argv[1])))
      for _ in range(400)]
for i, c in enumerate(cs):
    c.sendall(b"hello %d" % i)
ok = sum(c.recv(64) == b"hello %d" % i for i, c in enumerate(cs))
print(ok)
' $port >"$work/later.ok" 2>"$work/later.cli.log"
wait $srv
echo $? >"$work/later.rc"
SH
SDP_PROVIDERS=shm SDP_PROVIDER_DIR="$work/bin/sdp" \
	unshare -m --propagation private bash "$work/filllater.sh" "$work" \
	"$stat_bin" "$preload" "$sdp_lib_dir"
if [ "$(cat "$work/later.rc" 2>/dev/null)" = 0 ] &&
   [ "$(cat "$work/later.ok" 2>/dev/null)" = 400 ] &&
   grep -q "statistics: cannot grow /dev/shm/sdp-stat-0/sdp-stat.[0-9]* to [0-9]* slots: No space left on device; new connections are not listed by sdp-stat" \
	"$work/later.srv.log" &&
   [ "$(grep -c "cannot grow" "$work/later.srv.log")" = 1 ]; then
	pass "/dev/shm filled while running: the growth fails once, said once; 400 connections served"
else
	failed "/dev/shm filled later: rc $(cat "$work/later.rc" 2>/dev/null), ok $(cat "$work/later.ok" 2>/dev/null); $(cat "$work/later.srv.log" "$work/later.cli.log")"
fi
exit $fail
