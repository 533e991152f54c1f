# bench/lib.sh: what the benchmarks under bench/ share, on top of scripts/lib.sh
# (packages, build, ports, MariaDB).  Source it after scripts/lib.sh, and after
# setting BENCH_NAME (the name messages start with: bench/$BENCH_NAME).  It
# defines functions only, but for WORK, which bench_workdir sets.

log() { printf '=== %s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	echo "bench/${BENCH_NAME:-bench}: $*" >&2
	exit 1
}
as_pg() { runuser -u postgres -- "$@"; }

# bench_workdir PREFIX: a new work dir for this run, /tmp/collegedb-PREFIX.XXXXXX
# (under BENCH_TMPDIR when set), readable by the postgres user; sets WORK.
bench_workdir() {
	WORK=$(mktemp -d "${BENCH_TMPDIR:-/tmp}/collegedb-$1.XXXXXX")
	chmod 755 "$WORK"
	chown postgres:postgres "$WORK"
}

# bench_build REPO: make and make install, unless BENCH_SKIP_BUILD=1; the log
# goes to $WORK/build.log, its tail to the terminal when the build fails.
bench_build() {
	[[ ${BENCH_SKIP_BUILD:-0} == 1 ]] && return 0
	log "building and installing collegedb (log: $WORK/build.log)"
	build_and_install "$1" >"$WORK/build.log" 2>&1 || {
		tail -n 30 "$WORK/build.log"
		die "build failed"
	}
}

# bench_finish RC: the end of a run: the work dir is kept (and named) when
# BENCH_KEEP=1 or the run failed, and removed otherwise.  Call it last in the
# EXIT trap, after stopping the servers.
bench_finish() {
	if [[ ${BENCH_KEEP:-0} == 1 || $1 != 0 ]]; then
		echo "bench/${BENCH_NAME:-bench}: work dir kept: $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}

# start_cluster NAME PORT [CONF]: a PostgreSQL cluster in $WORK/NAME, its
# socket in $WORK (no TCP), log in $WORK/NAME.log, with the settings every
# benchmark uses, then BENCH_CLUSTER_CONF, then CONF.
start_cluster() {
	local name=$1 port=$2 extra=${3:-}
	as_pg "$PG_BINDIR/initdb" -D "$WORK/$name" -A trust -E UTF8 --locale=C.UTF-8 >"$WORK/$name-initdb.log"
	cat >>"$WORK/$name/postgresql.conf" <<CONF
listen_addresses = ''
port = $port
unix_socket_directories = '$WORK'
max_connections = 100
jit = off
log_min_messages = warning
${BENCH_CLUSTER_CONF:-}
$extra
CONF
	as_pg "$PG_BINDIR/pg_ctl" -D "$WORK/$name" -l "$WORK/$name.log" -w start >/dev/null
}

# stop_clusters NAME...: stop the clusters start_cluster started (those up).
stop_clusters() {
	local c
	for c in "$@"; do
		[[ -f "$WORK/$c/postmaster.pid" ]] &&
			as_pg "$PG_BINDIR/pg_ctl" -D "$WORK/$c" -m fast -w stop >/dev/null 2>&1
	done
	return 0
}

# psql_at PORT DB [psql args...]: psql as postgres on a start_cluster cluster.
psql_at() {
	local port=$1 db=$2
	shift 2
	as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$port" -d "$db" "$@"
}

# median_lines: the median of the numbers on stdin, one a line.
median_lines() {
	sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
