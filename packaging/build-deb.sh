#!/usr/bin/env bash
# Builds the Debian package: `packaging/build-deb.sh`, then
# `dpkg -i target/debian/backlog_VERSION-1_ARCH.deb` as root (its path is printed last).
#
# cargo-deb packs files that must exist first, so this script:
# 1. builds the release binary (`cargo build --release -F cli --locked`: the release profile,
#    thin LTO and stripped, as Cargo.toml says);
# 2. generates, with that binary, into TARGET/release/deb-assets/: the man pages,
#    gzipped (`backlog man` is backlog(1); `backlog man run` is backlog-run(1), and so
#    on for every command the pages list, `backlog man backoff plot` included;
#    `backlog man backlog.toml` is backlog.toml(5), the schedule file), the shell
#    completions (`backlog completions bash|zsh|fish`), the example schedule (the
#    default one, schedules/progressive.toml, pointed at the paths the systemd unit
#    allows) and the DEP-5 copyright file (LICENSE-MIT and LICENSE-APACHE, whole);
# 3. runs `cargo deb --no-build`, which packs them as [package.metadata.deb] lists, with
#    README.md and docs/ (under /usr/share/doc/backlog/, so README's links to docs/…
#    reach them).
#
# Needs cargo-deb (`cargo install cargo-deb --locked`). TARGET is the crate's target
# folder (CARGO_TARGET_DIR or `target`), as `cargo metadata` reports it.
set -euo pipefail
cd "$(dirname "$0")/.."

target=$(cargo metadata --no-deps --format-version 1 |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target" ] || { echo "build-deb.sh: cannot find the target folder" >&2; exit 1; }
bin="$target/release/backlog"
assets="$target/release/deb-assets"

cargo build --release --locked -p backlog -F cli

rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"

# Man pages: backlog(1), then each page its parent's COMMANDS section names, as
# clap_mangen writes them (`backlog\-run(1)`), to any depth.
man_page() { # words of the command after `backlog`
    local name page
    name=$(printf '%s-' backlog "$@")
    name=${name%-}
    page="$assets/man/$name.1"
    "$bin" man "$@" >"$page"
    local sub rest
    while read -r sub; do
        # A child of this page: its name is ours plus one more word, which may hold a
        # hyphen itself (give-up); a deeper page is none of ours (`backlog man WORD`
        # refuses backoff-plot: it is backoff's child).
        rest=${sub#"$name"-}
        [ "$rest" != "$sub" ] || continue
        if "$bin" man "$@" "$rest" >/dev/null 2>&1; then man_page "$@" "$rest"; fi
    done < <(sed -n 's/^\(backlog\\-[a-z0-9\\-]*\)(1)$/\1/p' "$page" | sed 's/\\-/-/g')
}
man_page
# backlog.toml(5), the schedule file's format: a page of section 5, not a command's.
"$bin" man backlog.toml >"$assets/man/backlog.toml.5"
# Gzipped, as Debian's man pages are (cargo-deb leaves files under target/ as they are);
# -n keeps the time out, so the same pages make the same package.
gzip -9n "$assets"/man/*.1 "$assets"/man/*.5

"$bin" completions bash >"$assets/completions/backlog.bash"
"$bin" completions zsh >"$assets/completions/_backlog"
"$bin" completions fish >"$assets/completions/backlog.fish"

# The example schedule: the default one, with the two paths a daemon of the unit can
# use. Each substitution must match, or the example would quietly keep the old path.
example="$assets/backlog.toml"
{
    cat <<'EOF'
# An example schedule for backlog@.service: copy it to /etc/backlog/orders.toml, point
# it at your table and handler, check it with
# `backlog doctor --schedule /etc/backlog/orders.toml`, then
# `systemctl enable --now backlog@orders`. The service writes only under its state
# directory, /var/lib/backlog/orders/ (/usr/lib/systemd/system/backlog@.service says
# why), so a SQLite backlog lives there; a database server needs no such path.
#
EOF
    sed -e 's|^# A SQLite file, relative to this file\.$|# A SQLite file the service may write (a relative path is to this file: read-only).|' \
        -e 's|^url = "backlog\.db"$|url = "/var/lib/backlog/orders/backlog.db"|' \
        -e 's|^command = \["\./handler\.sh"\]$|command = ["/etc/backlog/orders-handler.sh"]|' \
        schedules/progressive.toml
} >"$example"
for line in '^# A SQLite file the service may write' '^url = "/var/lib/backlog/orders/backlog.db"$' \
    '^command = \["/etc/backlog/orders-handler.sh"\]$'; do
    grep -q "$line" "$example" || {
        echo "build-deb.sh: schedules/progressive.toml changed: no line $line in the example" >&2
        exit 1
    }
done
# The example loads. Its database is the service's, not here: explain says the table
# was not checked against it, and nothing else.
said=$("$bin" explain --schedule "$example" 2>&1 >/dev/null)
other=$(printf '%s\n' "$said" | grep -v 'WARN the table was not checked against the schedule file: ' || true)
[ -z "$other" ] || {
    echo "build-deb.sh: backlog explain on the example: $said" >&2
    exit 1
}

# DEP-5 copyright: the license texts indented by one space, blank lines as " .".
indent() { sed -e 's/^$/./' -e 's/^/ /' "$1"; }
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: backlog"
    echo
    echo "Files: *"
    echo "Copyright: $(sed -n '1s/^Copyright (c) //p' LICENSE-MIT)"
    echo "License: MIT or Apache-2.0"
    echo
    echo "License: MIT"
    indent LICENSE-MIT
    echo
    echo "License: Apache-2.0"
    indent LICENSE-APACHE
} >"$assets/copyright"

# It prints the path of the .deb it wrote, on stdout.
cargo deb -p backlog --no-build --locked
