# A throwaway PostgreSQL cluster for the tests, sourced by .ci/run (or by hand:
# `source .ci/postgres.sh && pg_start`, then `pg_stop`).
#
# pg_start installs Debian's server package if no initdb is found (openssl, for the
# certificates, is .ci/run's to install), initdb's a cluster
# in a temp folder as an unprivileged user (the server refuses to run as root), starts
# it on a free loopback port with TLS and password authentication, and exports
# BACKLOG_TEST_PG, the superuser's URL the tests use, BACKLOG_TEST_PG_BIN and _OWNER (the
# programs, and the user who runs them, for the tests' own clusters), and
# BACKLOG_TEST_PG_CA, the test certificate authority that signed the server's
# certificate (for 127.0.0.1 and localhost), for the sslmode=verify-full test.
# The role `tls_only` may log in only over TLS, for the sslmode test. pg_stop stops the
# server and deletes the folder.

# Runs a command as the cluster's owner, PG_USER (root may not run the server).
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "$PG_USER" -- "$@"; else "$@"; fi; }

pg_start() {
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        echo ".ci/postgres.sh: installing postgresql (for initdb and postgres)"
        # Debian's package would create and start a cluster of its own: not wanted.
        mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/backlog-ci.conf
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
        bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    fi
    local user
    if [ "$(id -u)" = 0 ]; then
        user=backlog-ci
        id "$user" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$user"
    else
        user=$(id -un)
    fi
    PG_USER=$user

    PG_DIR=$(mktemp -d /tmp/backlog-pg.XXXXXX)
    chown "$user" "$PG_DIR"
    local password=ci-secret
    echo "$password" >"$PG_DIR/pw"
    chown "$user" "$PG_DIR/pw"
    # UTF-8 whatever the caller's locale (CI's bare environment has none, which would
    # make an SQL_ASCII cluster, where no ICU collation exists).
    as_pg "$bin/initdb" -D "$PG_DIR/data" -U postgres --pwfile="$PG_DIR/pw" -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >"$PG_DIR/initdb.log"
    mkdir "$PG_DIR/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=backlog test CA" \
        -keyout "$PG_DIR/tls/ca.key" -out "$PG_DIR/tls/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$PG_DIR/tls/server.key" -out "$PG_DIR/tls/server.csr" 2>/dev/null
    printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\n' >"$PG_DIR/tls/ext"
    openssl x509 -req -in "$PG_DIR/tls/server.csr" -CA "$PG_DIR/tls/ca.crt" -CAkey "$PG_DIR/tls/ca.key" \
        -CAcreateserial -days 2 -extfile "$PG_DIR/tls/ext" -out "$PG_DIR/tls/server.crt" 2>/dev/null
    cp "$PG_DIR/tls/server.crt" "$PG_DIR/tls/server.key" "$PG_DIR/data/"
    chown "$user" "$PG_DIR/data/server.crt" "$PG_DIR/data/server.key"
    chmod 600 "$PG_DIR/data/server.key"
    # tls_only may come in over TLS only; everyone else as initdb set it up.
    { printf 'hostnossl all tls_only 127.0.0.1/32 reject\n'; cat "$PG_DIR/data/pg_hba.conf"; } >"$PG_DIR/hba"
    mv "$PG_DIR/hba" "$PG_DIR/data/pg_hba.conf"
    chown "$user" "$PG_DIR/data/pg_hba.conf"
    PG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c ssl=on -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null
    PG_BIN=$bin
    # For the tests that make clusters of their own (a primary and its standby).
    export BACKLOG_TEST_PG_BIN=$bin BACKLOG_TEST_PG_OWNER=$user
    export BACKLOG_TEST_PG="postgres://postgres:$password@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
    export BACKLOG_TEST_PG_CA="$PG_DIR/tls/ca.crt"
    "$bin/psql" -q "$BACKLOG_TEST_PG" -c "CREATE ROLE tls_only LOGIN SUPERUSER PASSWORD '$password'"
    echo ".ci/postgres.sh: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT, data in $PG_DIR"
}

pg_stop() {
    [ -n "${PG_DIR:-}" ] || return 0
    # A start that failed half-way may have made the folder and no server.
    if [ -n "${PG_BIN:-}" ] && [ -d "$PG_DIR/data" ]; then
        as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$PG_DIR"
    PG_DIR=
}
