# pg_server.sh: sourced by every script that runs a PostgreSQL 15 server of its own with
# slotted_counter preloaded (scripts/demo.sh, test/bench/*.sh, test/clients/run.sh): one way to
# make, start and stop it, as the user PostgreSQL accepts.
#
#   as_pg CMD...                      runs CMD as "postgres" when we are root, else as ourselves
#   server_init DIR [conf lines...]   initdb into DIR/data (trust, UTF-8, C.UTF-8 collation), the
#                                     library preloaded, listening on a unix socket in DIR only,
#                                     then the given postgresql.conf lines (which win)
#   server_start DIR                  starts it, logging to DIR/server.log; on failure prints the
#                                     log's last lines and returns 1
#   server_stop DIR [MODE]            stops it (fast by default); quiet if it was not running
#   throwaway_init PREFIX [lines...]  a temp dir WORK with server_init done, stopped and removed
#                                     on exit; psql_ runs psql on its postgres database
# DIR must be reachable by the server's user, and short: a socket path has 107 bytes at most.

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

# PostgreSQL refuses to run as root: as root, the server and its clients run as "postgres".
if [[ $(id -u) -eq 0 ]]; then as_pg() { runuser -u postgres -- "$@"; }; else as_pg() { "$@"; }; fi

server_init() {
    local dir=$1
    shift
    [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
    if ! as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
            --no-sync >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        return 1
    fi
    {
        echo
        echo "# slotted_counter: a server of its own (scripts/pg_server.sh)"
        echo "shared_preload_libraries = 'slotted_counter'"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        local line
        for line in "$@"; do echo "$line"; done
    } >>"$dir/data/postgresql.conf"
}

server_start() {
    if ! as_pg "$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 60 start >/dev/null; then
        tail -n 30 "$1/server.log" >&2 || true
        return 1
    fi
}

server_stop() {
    as_pg "$PGBIN/pg_ctl" -D "$1/data" -m "${2:-fast}" -w stop >/dev/null 2>&1 || true
}

throwaway_init() {
    local prefix=$1
    shift
    WORK=$(mktemp -d "/tmp/$prefix.XXXXXX")
    trap throwaway_cleanup EXIT
    server_init "$WORK" "$@"
}

throwaway_cleanup() {
    server_stop "$WORK"
    # Processes under valgrind write their profiles as they exit, after the postmaster.
    local try
    for try in 1 2 3 4 5; do rm -rf "$WORK" 2>/dev/null && return; sleep 1; done
    rm -rf "$WORK"
}

psql_() { as_pg "$PGBIN/psql" -h "$WORK" -d postgres -Atq -v ON_ERROR_STOP=1 "$@"; }
