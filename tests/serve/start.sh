# start.sh — sourced by the CLI tests of `frugal serve` (sh): serve_start OUT ERR ARGS... starts
# "$BIN serve ARGS" in the background with stdout in OUT and stderr in ERR, and waits (30 s at
# most) for its first line "listening on http://HOST:PORT". Sets PID (the server's) and PORT
# (empty when the server exited or never said where it listens).
serve_start() {
    _out=$1 _err=$2; shift 2
    "$BIN" serve "$@" >"$_out" 2>"$_err" &
    PID=$!
    _i=0; PORT=
    while [ $_i -lt 300 ]; do
        PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$_out" 2>/dev/null)
        [ -n "$PORT" ] && break
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1; _i=$((_i + 1))
    done
}
