# throwaway.sh: sourced by callgrind.sh and waits.sh: a data directory in a temp dir for a
# server with slotted_counter preloaded, listening on a unix socket there only, removed on exit.
#
#   throwaway_init PREFIX [postgresql.conf lines...]   sets WORK, PGBIN; defines as_pg, psql_
# The caller starts the server (pg_ctl, or postgres under valgrind); cleanup stops it.

PGBIN=/usr/lib/postgresql/15/bin

# PostgreSQL refuses to run as root: as root, the server and its clients run as "postgres".
if [[ $(id -u) -eq 0 ]]; then as_pg() { runuser -u postgres -- "$@"; }; else as_pg() { "$@"; }; fi

throwaway_init() {
    local prefix=$1
    shift
    WORK=$(mktemp -d "/tmp/$prefix.XXXXXX")
    [[ $(id -u) -eq 0 ]] && chown postgres "$WORK"
    trap throwaway_cleanup EXIT
    as_pg "$PGBIN/initdb" -D "$WORK/data" --no-sync >/dev/null 2>&1
    {
        echo "shared_preload_libraries = 'slotted_counter'"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$WORK'"
        local line
        for line in "$@"; do echo "$line"; done
    } >>"$WORK/data/postgresql.conf"
}

throwaway_cleanup() {
    as_pg "$PGBIN/pg_ctl" -D "$WORK/data" stop -m fast >/dev/null 2>&1 || true
    # Processes under valgrind write their profiles as they exit, after the postmaster.
    local try
    for try in 1 2 3 4 5; do rm -rf "$WORK" 2>/dev/null && return; sleep 1; done
    rm -rf "$WORK"
}

psql_() { as_pg "$PGBIN/psql" -h "$WORK" -d postgres -Atq -v ON_ERROR_STOP=1 "$@"; }
