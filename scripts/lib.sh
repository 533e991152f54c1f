# scripts/lib.sh: what scripts/test, scripts/demo and bench/run share: the
# Debian packages collegedb needs, and building and installing it.
# Source it; it defines functions and variables only.

PG_MAJOR=15
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
PG_CONFIG=${PG_CONFIG:-$PG_BINDIR/pg_config}

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
