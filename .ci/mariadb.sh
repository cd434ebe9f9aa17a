# A throwaway MariaDB server for the tests, sourced by .ci/run (or by hand:
# `source .ci/mariadb.sh && my_start`, then `my_stop`).
#
# my_start installs Debian's mariadb-server if no mariadbd is found (Debian's package
# would start a server of its own: its policy-rc.d refusal is kept for the install),
# makes a data folder in a temp folder with mariadb-install-db as an unprivileged user,
# starts mariadbd on a free loopback port with TLS (certificates made by openssl, as
# for PostgreSQL), and exports BACKLOG_TEST_MYSQL, a URL of a user with every right,
# and BACKLOG_TEST_MYSQL_CA, the certificate authority that signed the server's
# certificate. my_stop stops the server and deletes the folder.

# Runs a command as the server's owner, MY_USER (mariadbd refuses to run as root).
as_my() { if [ "$(id -u)" = 0 ]; then runuser -u "$MY_USER" -- "$@"; else "$@"; fi; }

my_start() {
    if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
        echo ".ci/mariadb.sh: installing mariadb-server (for mariadbd)"
        local policy=/usr/sbin/policy-rc.d made_policy=no
        if [ ! -e "$policy" ]; then
            printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=yes
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
        [ "$made_policy" = yes ] && rm -f "$policy"
    fi
    local user
    if [ "$(id -u)" = 0 ]; then
        user=backlog-ci
        id "$user" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$user"
    else
        user=$(id -un)
    fi
    MY_USER=$user
    MY_DIR=$(mktemp -d /tmp/backlog-my.XXXXXX)
    chown "$user" "$MY_DIR"
    as_my mariadb-install-db --no-defaults --datadir="$MY_DIR/data" --auth-root-authentication-method=normal \
        --skip-test-db >"$MY_DIR/install.log" 2>&1 ||
        { cat "$MY_DIR/install.log" >&2; return 1; }
    mkdir "$MY_DIR/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=backlog test CA" \
        -keyout "$MY_DIR/tls/ca.key" -out "$MY_DIR/tls/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$MY_DIR/tls/server.key" -out "$MY_DIR/tls/server.csr" 2>/dev/null
    printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\n' >"$MY_DIR/tls/ext"
    openssl x509 -req -in "$MY_DIR/tls/server.csr" -CA "$MY_DIR/tls/ca.crt" -CAkey "$MY_DIR/tls/ca.key" \
        -CAcreateserial -days 2 -extfile "$MY_DIR/tls/ext" -out "$MY_DIR/tls/server.crt" 2>/dev/null
    chown -R "$user" "$MY_DIR/tls"
    MY_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # Durability is not what the tests measure: commits cost what they cost in memory.
    as_my mariadbd --no-defaults --datadir="$MY_DIR/data" --socket="$MY_DIR/sock" \
        --pid-file="$MY_DIR/pid" --bind-address=127.0.0.1 --port="$MY_PORT" \
        --log-error="$MY_DIR/server.log" --max-connections=300 \
        --innodb-flush-log-at-trx-commit=0 --innodb-buffer-pool-size=256M \
        --ssl-ca="$MY_DIR/tls/ca.crt" --ssl-cert="$MY_DIR/tls/server.crt" \
        --ssl-key="$MY_DIR/tls/server.key" </dev/null >"$MY_DIR/stdout.log" 2>&1 &
    local i
    for i in $(seq 1 120); do
        mariadb --no-defaults -S "$MY_DIR/sock" -u root -e 'SELECT 1' >/dev/null 2>&1 && break
        sleep 0.5
    done
    local password=ci-secret
    mariadb --no-defaults -S "$MY_DIR/sock" -u root -e "
        CREATE USER 'backlog'@'127.0.0.1' IDENTIFIED BY '$password';
        GRANT ALL ON *.* TO 'backlog'@'127.0.0.1' WITH GRANT OPTION;
        CREATE USER 'tls_only'@'127.0.0.1' IDENTIFIED BY '$password' REQUIRE SSL;
        GRANT ALL ON *.* TO 'tls_only'@'127.0.0.1';" ||
        { cat "$MY_DIR/server.log" >&2; return 1; }
    export BACKLOG_TEST_MYSQL="mysql://backlog:$password@127.0.0.1:$MY_PORT/mysql"
    export BACKLOG_TEST_MYSQL_CA="$MY_DIR/tls/ca.crt"
    # For the tests that start servers of their own (restarted and crashed).
    export BACKLOG_TEST_MYSQL_OWNER=$user
    echo ".ci/mariadb.sh: $(mariadbd --version | awk '{print $3}') on 127.0.0.1:$MY_PORT, data in $MY_DIR"
}

my_stop() {
    [ -n "${MY_DIR:-}" ] || return 0
    if [ -f "$MY_DIR/pid" ]; then
        local pid
        pid=$(cat "$MY_DIR/pid")
        kill "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    rm -rf "$MY_DIR"
    MY_DIR=
}
