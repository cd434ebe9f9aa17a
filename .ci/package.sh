#!/usr/bin/env bash
# The Debian package, end to end: builds it (packaging/build-deb.sh: the release
# profile, the man pages, completions, example schedule and copyright it generates),
# installs it with dpkg, checks what it installed (the man pages of sections 1 and 5
# read by man, README with the docs/ it links), purges it, and checks that nothing
# of it is left. `.ci/run` runs it after the tests; alone, as root on a throwaway
# machine: `bash .ci/package.sh`.
#
# - cargo-deb is installed with `cargo install cargo-deb --locked` when `cargo deb` is
#   missing; it compiles beside the release build.
# - man-db (`man -w`) and systemd (`systemd-analyze verify`) are installed when missing.
# - Debian's container images drop /usr/share/man and most of /usr/share/doc at
#   install (path-exclude in /etc/dpkg/dpkg.cfg.d/): such files are checked in the
#   .deb (`dpkg -c`), and on disk only where dpkg keeps them.
# - The unit's sandbox is rated with `systemd-analyze security --offline=true` (systemd
#   250 and later) before anything is built: an exposure above 5.0 fails the run.
# - The unit is checked with `systemd-analyze verify` on an instance, backlog@ci,
#   which needs no running systemd: any line it prints (an unknown key, a bad value, a
#   missing command or man page) fails the run. `systemctl enable` works offline too,
#   so the purge is checked to take the link it made.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
started=$SECONDS

updated=no
need() {
    command -v "$1" >/dev/null && return
    echo ".ci/package.sh: installing $2 (for $1)"
    if [ "$updated" = no ]; then apt-get update -qq; updated=yes; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
need cc gcc
need man man-db
need systemd-analyze systemd
fail() { echo ".ci/package.sh: $*" >&2; exit 1; }

# The unit's sandbox, before the build, as it needs none: `systemd-analyze security`
# rates its exposure from 0 to 10, and above 5.0 the package fails (it was 8.3 before
# the unit was hardened; docs/operating.md, "The service's sandbox").
security=$(systemd-analyze security --offline=true --no-pager packaging/backlog@.service 2>&1) ||
    fail "systemd-analyze security --offline=true packaging/backlog@.service: $security"
exposure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\) .*/\1/p' <<<"$security")
[ -n "$exposure" ] || fail "systemd-analyze security printed no exposure level: $security"
awk -v e="$exposure" 'BEGIN { exit !(e <= 5.0) }' ||
    fail "backlog@.service: exposure $exposure is above 5.0; harden it: $(grep '✗' <<<"$security")"
echo ".ci/package.sh: backlog@.service exposure $exposure (at most 5.0)"

# The binary is built at opt-level 0, without the release profile's fat LTO and
# single codegen unit: what is checked here is the package, not the optimiser, and on
# two cores the release profile's build took 5 to 6 of CI's 20 minutes (opt-level 1
# without LTO as long: 307 to 362 s). BACKLOG_PACKAGE_PROFILE=release builds it as a
# release is (packaging/build-deb.sh alone always does).
if [ "${BACKLOG_PACKAGE_PROFILE:-ci}" != release ]; then
    export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        CARGO_PROFILE_RELEASE_OPT_LEVEL=0
fi

installing=
if ! cargo deb --version >/dev/null 2>&1; then
    echo ".ci/package.sh: installing cargo-deb (cargo install cargo-deb --locked)"
    # In a folder of its own (cargo's default), not a CARGO_TARGET_DIR the build locks.
    env -u CARGO_TARGET_DIR cargo install --quiet cargo-deb --locked &
    installing=$!
fi
cargo build --release --locked -p backlog -F cli
if [ -n "$installing" ]; then wait "$installing"; fi
deb=$(packaging/build-deb.sh | tail -n 1)
[ -f "$deb" ] || fail "packaging/build-deb.sh made no package ($deb)"
built=$SECONDS
echo ".ci/package.sh: built $deb"

# What the package must hold, in the .deb itself.
dpkg -c "$deb" | awk '{print substr($6, 2)}' >"${deb%.deb}.contents"
expected=(
    /usr/bin/backlog
    /usr/share/man/man1/backlog.1.gz
    /usr/share/man/man1/backlog-daemon.1.gz
    /usr/share/man/man1/backlog-backoff-plot.1.gz
    /usr/share/man/man5/backlog.toml.5.gz
    /usr/share/bash-completion/completions/backlog
    /usr/share/zsh/vendor-completions/_backlog
    /usr/share/fish/vendor_completions.d/backlog.fish
    /usr/share/doc/backlog/examples/backlog.toml
    /usr/share/doc/backlog/copyright
    /usr/share/doc/backlog/README.md
    /usr/share/doc/backlog/docs/cli.md
    /usr/lib/systemd/system/backlog@.service
)
for path in "${expected[@]}"; do
    grep -qxF "$path" "${deb%.deb}.contents" || fail "$deb lacks $path"
done
# Every page a page of the package names (`backlog\-give\-up(1)`) is in it too.
named=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/share/man/man1/*.1.gz' | zcat |
    sed -n 's/^\(backlog\\-[a-z0-9\\-]*\)(1)$/\1/p' | sed 's/\\-/-/g' | sort -u)
[ -n "$named" ] || fail "the man pages of $deb name no other page"
for page in $named; do
    grep -qxF "/usr/share/man/man1/$page.1.gz" "${deb%.deb}.contents" ||
        fail "$deb lacks the man page $page(1), which another of its pages names"
done

# README's links into docs/ reach files of the package, beside it in /usr/share/doc.
linked=$(grep -o '](docs/[^)#]*' README.md | sed 's/^](//' | sort -u)
[ -n "$linked" ] || fail "README.md links nothing under docs/"
for doc in $linked; do
    grep -qxF "/usr/share/doc/backlog/$doc" "${deb%.deb}.contents" ||
        fail "$deb lacks /usr/share/doc/backlog/$doc, which README.md links"
done
# Every page reads as a man page: man renders it with no warning, and backlog.toml(5)
# is the schedule file's.
pages=$(grep -E '^/usr/share/man/man[15]/.*\.gz$' "${deb%.deb}.contents")
for page in $pages; do
    warnings=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ".$page" | zcat |
        MANWIDTH=80 man --warnings -l - 2>&1 >/dev/null) || fail "man -l $page failed: $warnings"
    [ -z "$warnings" ] || fail "man -l $page: $warnings"
done
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/man/man5/backlog.toml.5.gz | zcat |
    MANWIDTH=80 man -l - 2>/dev/null | grep -q 'backlog.toml - the schedule file of backlog' ||
    fail "backlog.toml(5) in $deb does not read as the schedule file's page"

# Whether dpkg leaves PATH out at install: the last path-exclude or path-include of
# its configuration that matches it decides.
dropped() {
    local verdict=no option pattern
    while read -r option pattern; do
        # shellcheck disable=SC2053 # the pattern is a glob
        case "$option" in
            path-exclude) [[ $1 == $pattern ]] && verdict=yes ;;
            path-include) [[ $1 == $pattern ]] && verdict=no ;;
        esac
    done < <(cat /etc/dpkg/dpkg.cfg.d/* /etc/dpkg/dpkg.cfg 2>/dev/null | sed -n 's/^\(path-[a-z]*\)[= ]\(.*\)$/\1 \2/p')
    [ "$verdict" = yes ]
}

dpkg -i "$deb" >/dev/null
for path in "${expected[@]}"; do
    [ -e "$path" ] || dropped "$path" || fail "$path is not installed"
done
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[ "$(/usr/bin/backlog --version)" = "backlog $version" ] || fail "/usr/bin/backlog --version: $(/usr/bin/backlog --version)"
man_flag=
if dropped /usr/share/man/man1/backlog.1.gz; then
    echo ".ci/package.sh: dpkg here drops /usr/share/man; the man pages were checked in the .deb only"
    man_flag=--man=no
else
    [ "$(man -w backlog)" = /usr/share/man/man1/backlog.1.gz ] || fail "man -w backlog: $(man -w backlog)"
    [ "$(man -w backlog-daemon)" = /usr/share/man/man1/backlog-daemon.1.gz ] || fail "man -w backlog-daemon"
    [ "$(man -w backlog.toml)" = /usr/share/man/man5/backlog.toml.5.gz ] || fail "man -w backlog.toml: $(man -w backlog.toml 2>&1)"
fi
bash -c 'source /usr/share/bash-completion/completions/backlog && complete -p backlog' >/dev/null ||
    fail "the bash completion does not load"
if ! dropped /usr/share/doc/backlog/examples/backlog.toml; then
    # Its database is the service's, not made yet: the table is not checked, and said so.
    said=$(/usr/bin/backlog explain --schedule /usr/share/doc/backlog/examples/backlog.toml 2>&1 >/dev/null) ||
        fail "backlog explain on the example: $said"
    other=$(printf '%s\n' "$said" | grep -v 'WARN the table was not checked against the schedule file: ' || true)
    [ -z "$other" ] || fail "backlog explain on the example: $said"
fi
verify=$(systemd-analyze verify $man_flag backlog@ci.service 2>&1) || true
[ -z "$verify" ] || fail "systemd-analyze verify backlog@ci.service: $verify"
systemctl enable backlog@ci.service 2>/dev/null
[ -L /etc/systemd/system/multi-user.target.wants/backlog@ci.service ] || fail "systemctl enable made no link"

dpkg --purge backlog >/dev/null
[ ! -e /usr/bin/backlog ] || fail "/usr/bin/backlog is still there after the purge"
while read -r path; do
    case "$path" in
        # A folder may stay if it holds other files, or another package has it.
        */) [ ! -d "$path" ] || [ -n "$(ls -A "$path")" ] || dpkg -S "${path%/}" >/dev/null 2>&1 ||
            fail "the purge left the empty folder $path" ;;
        *) [ ! -e "$path" ] || fail "the purge left $path" ;;
    esac
done <"${deb%.deb}.contents"
[ ! -e /etc/systemd/system/multi-user.target.wants/backlog@ci.service ] ||
    fail "the purge left the link systemctl enable made"
if dpkg-query -W -f '${Status}' backlog 2>/dev/null | grep -qv 'not-installed'; then
    fail "dpkg still knows backlog: $(dpkg-query -W -f '${Status}' backlog)"
fi

echo ".ci/package.sh: the package installs, checks out and purges clean:" \
    "$((built - started))s to build, $((SECONDS - built))s to check"
