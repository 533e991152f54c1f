# scripts/lib.sh: what scripts/test, scripts/demo and bench/run share: the
# Debian packages collegedb needs, and building and installing it.
# Source it; it defines functions and variables only.

PG_MAJOR=15
# PG_CONFIG may name another (relocated) installation of PostgreSQL 15: the
# build installs into it, and every server the scripts start runs from it.
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
if [[ -x "$PG_CONFIG" ]]; then
	PG_BINDIR=$("$PG_CONFIG" --bindir)
fi

# The packages every command needs; callers may add their own.
COLLEGEDB_PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev libsqlite3-dev
	libmariadb-dev make gcc libc6-dev)

# install_packages PKG...: apt-get install the packages that are missing (one
# apt-get update first, only when something is missing).
install_packages() {
	local p missing=()
	for p in "$@"; do
		if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
			missing+=("$p")
		fi
	done
	if ((${#missing[@]})); then
		echo "=== apt-get install ${missing[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get update
		DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
	fi
}

# build_and_install REPO: make and make install collegedb (as root).
build_and_install() {
	echo "=== make"
	make -C "$1" PG_CONFIG="$PG_CONFIG" -j"$(nproc)"
	echo "=== make install"
	make -C "$1" PG_CONFIG="$PG_CONFIG" install
}

# require_root: the commands install packages and start servers as other users.
require_root() {
	if [[ $EUID -ne 0 ]]; then
		echo "$0: must run as root (it installs packages, runs make install, and starts" >&2
		echo "servers as the postgres user)" >&2
		exit 1
	fi
}

# port_busy PORT: something listens on 127.0.0.1:PORT.
port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pick_port FROM [TAKEN...]: the first port from FROM on that nothing listens to
# (and not one of TAKEN).
pick_port() {
	local p=$1 i
	shift
	for i in $(seq 0 199); do
		if ! port_busy $((p + i)) && [[ " $* " != *" $((p + i)) "* ]]; then
			echo $((p + i))
			return 0
		fi
	done
	echo "no free port from $p" >&2
	return 1
}

# start_mariadb DIR [BASE_PORT]: a private MariaDB server in DIR (created; owned by
# user mysql), on 127.0.0.1 from BASE_PORT (33061) on and a socket in DIR/run, with
# user collegedb (password collegedb, for 'localhost' and '127.0.0.1') holding ALL on
# the databases named collegedb_%, and database collegedb_test.  Sets MDB_PORT,
# MDB_SOCKET and MDB_PID; stop it with stop_mariadb.  Returns non-zero (printing the
# server's log) when it does not start.
MDB_PID=""
MDB_SOCKET=""
MDB_PORT=""
start_mariadb() {
	local dir=$1 i
	mkdir -p "$dir/data" "$dir/run"
	chown -R mysql:mysql "$dir"
	chmod 700 "$dir/data"
	chmod 755 "$dir" "$dir/run"
	MDB_PORT=$(pick_port "${2:-33061}") || return 1
	MDB_SOCKET=$dir/run/mysqld.sock
	if ! (cd "$dir" && mariadb-install-db --no-defaults --user=mysql --datadir="$dir/data" \
		--auth-root-authentication-method=socket --skip-test-db >"$dir/install.log" 2>&1); then
		cat "$dir/install.log"
		return 1
	fi
	mariadbd --no-defaults --user=mysql --datadir="$dir/data" \
		--socket="$MDB_SOCKET" --port="$MDB_PORT" --bind-address=127.0.0.1 \
		--pid-file="$dir/run/mysqld.pid" --log-error="$dir/error.log" \
		--skip-name-resolve --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
		--default-time-zone=+00:00 --innodb-buffer-pool-size=64M \
		--innodb-flush-log-at-trx-commit=2 --max-connections=300 \
		</dev/null >"$dir/stdout.log" 2>&1 &
	MDB_PID=$!
	for i in $(seq 1 300); do
		if mariadb-admin --no-defaults -uroot --socket="$MDB_SOCKET" ping >/dev/null 2>&1; then
			break
		fi
		if ! kill -0 "$MDB_PID" 2>/dev/null || [[ $i -eq 300 ]]; then
			echo "MariaDB did not start" >&2
			tail -n 40 "$dir/error.log" "$dir/stdout.log" 2>/dev/null || true
			return 1
		fi
		sleep 0.1
	done
	mariadb --no-defaults -uroot --socket="$MDB_SOCKET" <<SQL
DROP USER IF EXISTS ''@'localhost';
DROP USER IF EXISTS ''@'$(uname -n)';
CREATE USER 'collegedb'@'localhost' IDENTIFIED BY 'collegedb';
CREATE USER 'collegedb'@'127.0.0.1' IDENTIFIED BY 'collegedb';
CREATE DATABASE collegedb_test;
GRANT ALL PRIVILEGES ON \`collegedb\\_%\`.* TO 'collegedb'@'localhost', 'collegedb'@'127.0.0.1';
-- the lock waits of information_schema.INNODB_TRX, for deadlock detection across shards
GRANT PROCESS ON *.* TO 'collegedb'@'localhost', 'collegedb'@'127.0.0.1';
SQL
}

# stop_mariadb: stop the server start_mariadb started (no-op when none runs).
stop_mariadb() {
	local i
	if [[ -n "$MDB_PID" ]] && kill -0 "$MDB_PID" 2>/dev/null; then
		mariadb-admin --no-defaults -uroot --socket="$MDB_SOCKET" shutdown >/dev/null 2>&1 || true
		for i in $(seq 1 100); do
			kill -0 "$MDB_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$MDB_PID" 2>/dev/null; then
			kill -TERM "$MDB_PID" 2>/dev/null || true
			sleep 1
			kill -KILL "$MDB_PID" 2>/dev/null || true
		fi
		wait "$MDB_PID" 2>/dev/null || true
	fi
	MDB_PID=""
}

# start_pg_cluster DIR PORT [CONF]: initdb (trust, UTF8, C.UTF-8) a PostgreSQL 15
# cluster in DIR as the postgres user, listening on 127.0.0.1:PORT and a socket in
# DIR, with CONF appended to postgresql.conf, and start it (log DIR/server.log).
start_pg_cluster() {
	local dir=$1 port=$2
	mkdir -p "$dir"
	chown postgres:postgres "$dir"
	runuser -u postgres -- "$PG_BINDIR/initdb" -D "$dir" -A trust -E UTF8 --locale=C.UTF-8 \
		>"$dir.initdb.log" 2>&1 || { cat "$dir.initdb.log"; return 1; }
	cat >>"$dir/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
${3:-}
CONF
	runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$dir" -l "$dir/server.log" -w start >/dev/null ||
		{ tail -n 40 "$dir/server.log"; return 1; }
}

# stop_pg_cluster DIR: stop a cluster start_pg_cluster started (no-op when it is down).
stop_pg_cluster() {
	[[ -f "$1/postmaster.pid" ]] &&
		runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$1" -m immediate -w stop >/dev/null 2>&1
	return 0
}
