#!/bin/bash
# The fleet bench as BENCHMARKS.md's 16-core figures were taken, on a machine with
# nothing installed: a throwaway PostgreSQL from PyPI's `pgserver` wheel (run as root;
# the server runs as the user `pgbench`), then bench_fleet's two tables.
#
#   cargo build --release --bin backlog --examples
#   pip download --no-deps --only-binary=:all: --python-version 3.12 pgserver -d .whl
#   bash examples/shell/bench_fleet_16.sh .whl/pgserver-*.whl OUTDIR
#
# FLEET_* override the sizes (the defaults are the issue's: 100,000 records of 100 ms,
# 64 at once a runner, 4 to 128 runners; a no-op handler over 300,000 at 1 to 32).
set -u
wheel=$1
out=$2
mkdir -p "$out"
pg=/tmp/bench-pgserver
data=/tmp/bench-pgdata
rm -rf "$pg" "$data"
python3 -m zipfile -e "$wheel" "$pg" || exit 1
bin=$pg/pgserver/pginstall/bin
chmod +x "$bin"/*
id pgbench >/dev/null 2>&1 || useradd -M pgbench || exit 1
mkdir -p "$data" && chown pgbench "$data"
chmod a+rx "$pg" "$pg/pgserver" "$pg/pgserver/pginstall"
runuser -u pgbench -- "$bin/initdb" -D "$data" -U postgres --auth=trust >"$out/initdb.log" 2>&1 || {
    cat "$out/initdb.log"
    exit 1
}
port=${FLEET_PORT:-55432}
runuser -u pgbench -- "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
    -o "-c max_connections=1000 -c shared_buffers=2GB -c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=/tmp" \
    start >/dev/null || {
    cat "$data/server.log"
    exit 1
}
trap 'runuser -u pgbench -- "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null; cp "$data/server.log" "$out/postgres.log"' EXIT
export BENCH_PG=postgres://postgres@127.0.0.1:$port/postgres BENCH_DIR=/tmp/bench-fleet
echo "$(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB; $("$bin/postgres" --version)"

fleet=target/release/examples/bench_fleet
# FLEET_OLD: another binary run beside this one at every count (bench_fleet's BENCH_BIN_OLD).
[ -n "${FLEET_OLD:-}" ] && export BENCH_BIN_OLD=$FLEET_OLD
BENCH_RECORDS=${FLEET_RECORDS:-100000} BENCH_WAIT_MS=100 BENCH_LANES=2 BENCH_BATCH=32 \
    BENCH_RUNNERS=${FLEET_RUNNERS:-4,16,32,64,128} BENCH_ROUNDS=1 \
    timeout "${FLEET_LIMIT:-240}" $fleet 2>&1 | tee "$out/wait.txt"
BENCH_RECORDS=${FLEET_NOOP_RECORDS:-300000} BENCH_WAIT_MS=0 BENCH_LANES=2 BENCH_BATCH=500 \
    BENCH_RUNNERS=${FLEET_NOOP_RUNNERS:-1,8,16,32} BENCH_ROUNDS=1 \
    timeout "${FLEET_LIMIT:-240}" $fleet 2>&1 | tee "$out/noop.txt"
