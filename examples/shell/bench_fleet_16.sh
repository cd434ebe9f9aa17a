#!/bin/bash
# The fleet bench as docs/benchmarks.md's 16-core figures were taken, on a machine with
# nothing installed: a throwaway PostgreSQL from PyPI's `pgserver` wheel (run as root;
# the server runs as the user `pgbench`), then bench_fleet's two tables.
#
#   cargo build --release --bin backlog -F cli --examples
#   pip download --no-deps --only-binary=:all: --python-version 3.12 pgserver -d .whl
#   bash examples/shell/bench_fleet_16.sh .whl/pgserver-*.whl OUTDIR
#
# FLEET_* override the sizes (the defaults are the issue's: 100,000 records of 100 ms,
# 64 at once a runner, 4 to 128 runners; a no-op handler over 300,000 at 1 to 32, and
# the workers by hand at FLEET_BY_HAND, the same counts unless set).
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
waiting() {
    BENCH_RECORDS=${FLEET_RECORDS:-100000} BENCH_WAIT_MS=100 BENCH_LANES=2 BENCH_BATCH=32 \
        BENCH_RUNNERS=${FLEET_RUNNERS:-4,16,32,64,128} BENCH_ROUNDS=1 \
        timeout "${FLEET_LIMIT:-240}" $fleet 2>&1
}
no_op() {
    BENCH_RECORDS=${FLEET_NOOP_RECORDS:-300000} BENCH_WAIT_MS=0 BENCH_LANES=2 BENCH_BATCH=500 \
        BENCH_RUNNERS=${FLEET_NOOP_RUNNERS:-1,8,16,32} BENCH_ROUNDS=1 \
        timeout "${FLEET_LIMIT:-240}" $fleet 2>&1
}
waiting | tee "$out/wait.txt"
BENCH_BY_HAND=${FLEET_BY_HAND-${FLEET_NOOP_RUNNERS:-1,8,16,32}} no_op | tee "$out/noop.txt"
# FLEET_OLD: another binary, the same runs after this one's, each on a database of its
# own (a binary refuses the tool's tables at another schema version).
if [ -n "${FLEET_OLD:-}" ]; then
    BENCH_BIN=$FLEET_OLD waiting | tee "$out/wait-old.txt"
    BENCH_BIN=$FLEET_OLD BENCH_BY_HAND= no_op | tee "$out/noop-old.txt"
fi

# FLEET_PROFILE=1: then one run each of 128 runners (100 ms) and 32 (no-op) again, with
# every statement logged and the backends' wait events sampled: where the server's
# time went (pg_log_totals.py), what the backends waited on, and the rows each table's
# scans visited.
[ -n "${FLEET_PROFILE:-}" ] || exit 0
psql() { "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qAt "$@"; }
psql -c "ALTER SYSTEM SET log_min_duration_statement = 0" -c "SELECT pg_reload_conf()" >/dev/null
profile() { # name, then the bench's settings
    local name=$1
    shift
    : >"$data/server.log"
    (while :; do
        psql -d backlog_bench_fleet -c "SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') || ' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 40) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND datname = 'backlog_bench_fleet'" 2>/dev/null
        sleep 0.02
    done >"$out/waits-$name.txt") &
    local sampler=$!
    env "$@" BENCH_ROUNDS=1 BENCH_KEEP=1 timeout 120 $fleet 2>&1 | tail -2
    kill $sampler
    {
        echo "== $name: statements"
        python3 examples/shell/pg_log_totals.py "$data/server.log" 12
        echo "== $name: wait events sampled"
        sort "$out/waits-$name.txt" | uniq -c | sort -rn | head -12
        echo "== $name: rows visited (table, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del)"
        psql -d backlog_bench_fleet -c "SELECT relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY 1"
    } | tee "$out/profile-$name.txt"
}
profile wait BENCH_RECORDS=${FLEET_RECORDS:-100000} BENCH_WAIT_MS=100 BENCH_LANES=2 BENCH_BATCH=32 BENCH_RUNNERS=${FLEET_PROFILE_RUNNERS:-128}
profile noop BENCH_RECORDS=${FLEET_NOOP_RECORDS:-300000} BENCH_WAIT_MS=0 BENCH_LANES=2 BENCH_BATCH=500 BENCH_RUNNERS=${FLEET_PROFILE_NOOP_RUNNERS:-32} BENCH_BY_HAND=
