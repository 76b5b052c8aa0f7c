#!/bin/sh
# cli_ledger.sh — the ledger's durability through the real `frugal serve` on the tiny Qwen2
# fixture (docs/METERING.md, "Ledger"):
#   - kill -9 in the middle of a burst of 200 concurrent requests (chat and completions, JSON and
#     SSE), three times: every request the client got a complete answer for (a 200 with its body,
#     or a stream up to `data: [DONE]`) has its ledger row, found by the trace id of its
#     traceparent;
#   - a ledger that cannot write, twice: a file-size limit (RLIMIT_FSIZE: EFBIG, an I/O error)
#     and, where mounting is allowed, a full tmpfs (ENOSPC): the answer is 503 ledger_unavailable
#     with Retry-After (a stream ends with that error instead of its final chunk), /ready is 503
#     with the reason, new work is refused, and once writing works again the server recovers by
#     itself and the rows of everything it answered or refused are in the file;
#   - `ledger.path` of --meter-config is used without --ledger;
#   - the default ledger is one file per server (ledger-MODEL-PORT.db in $XDG_STATE_HOME/frugal,
#     or ~/.local/state/frugal), named in the start-up line.
# Prints one line per check and ends with "N passed, N failed".
# Needs: curl, node (>= 18), sqlite3, prlimit (util-linux); mount for the tmpfs part (optional).
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
MODEL=tests/fixtures/qwen2-tiny
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-ledger.XXXXXX")
pass=0; fail=0; PID=; PORT=; MNT=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

for tool in curl node sqlite3 prlimit; do
    command -v $tool >/dev/null 2>&1 || { bad "$tool is not installed"; echo "$pass passed, $fail failed"; exit 1; }
done
[ -x "$BIN" ] || { bad "binary $BIN missing"; echo "$pass passed, $fail failed"; exit 1; }

. tests/serve/start.sh # serve_start
# start_server NAME [serve options...]: sets PID, PORT, URL (the caller names the ledger)
start_server() {
    name=$1; shift
    serve_start "$TMP/$name.out" "$TMP/$name.err" --model "$MODEL" --port 0 "$@"
    URL=http://127.0.0.1:$PORT
    if [ -z "$PORT" ]; then bad "$name: server started"; tail -n 20 "$TMP/$name.err"; PID=; return 1; fi
    return 0
}
stop_server() { # NAME: SIGTERM, exit 0
    [ -n "$PID" ] || return
    kill -TERM "$PID" 2>/dev/null; wait "$PID"; rc=$?; PID=
    check "$1: SIGTERM exits 0" "$rc" 0
    [ "$rc" = 0 ] || tail -n 20 "$TMP/$1.err"
}
trace() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
# req NAME TRACE [stream]: POST /v1/completions; body in $TMP/NAME.body, headers in
# $TMP/NAME.hdr; prints the status
req() {
    s=false; [ "$3" = stream ] && s=true
    curl -sN -o "$TMP/$1.body" -D "$TMP/$1.hdr" -w '%{http_code}' "$URL/v1/completions" \
        -H "traceparent: 00-$2-00f067aa0ba902b7-01" -H 'Content-Type: application/json' \
        -d "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"stream\":$s}"
}
# wait_ready: /ready 200 within 10 s
wait_ready() {
    i=0
    while [ $i -lt 100 ]; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/ready")" = 200 ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# row DB TRACE: "http_status|status" of the row with that trace id
row() { sqlite3 "$1" "SELECT http_status||'|'||status FROM requests WHERE trace_id='$2'"; }

# ---------------------------------------------------------------- kill -9 during a burst
for round in 1 2 3; do
    db=$TMP/burst$round.db
    kill_after=$((round * 40 - 20)) # 20, 60, 100 answers
    start_server burst$round --ledger "$db" || continue
    out=$(FRUGAL_URL=$URL FRUGAL_PID=$PID N=200 KILL_AFTER=$kill_after OUT="$TMP/answered$round" \
          node tests/serve/ledger_burst.mjs 2>&1)
    wait "$PID" 2>/dev/null; PID=
    echo "  round $round: $out"
    n=$(wc -l <"$TMP/answered$round")
    [ "$n" -ge $kill_after ] && ok "round $round: $n answers before the kill (>= $kill_after)" \
        || bad "round $round: only $n answers before the kill"
    case "$out" in *"mismatches 0"*) ok "round $round: responses carry their traceparent";;
                   *) bad "round $round: traceparent of the responses";; esac
    check "round $round: ledger intact after kill -9" "$(sqlite3 "$db" 'PRAGMA integrity_check')" ok
    sqlite3 "$db" "SELECT trace_id FROM requests WHERE http_status=200 AND status='ok'" | sort >"$TMP/rows$round"
    cut -d' ' -f1 "$TMP/answered$round" | sort >"$TMP/ans$round"
    missing=$(comm -23 "$TMP/ans$round" "$TMP/rows$round" | wc -l)
    check "round $round: every answered request has its row ($n answered, $(grep -c stream "$TMP/answered$round") streams)" "$missing" 0
done

# ---------------------------------------------------------------- the ledger cannot write
printf '{"ledger": {"commit_wait_ms": 1000}}\n' >"$TMP/wait.json"

# (1) a file-size limit: writes past it fail with EFBIG (an I/O error)
db=$TMP/fsize.db
if start_server fsize --ledger "$db" --meter-config "$TMP/wait.json"; then
    t1=$(trace); t2=$(trace); t3=$(trace); t4=$(trace); t5=$(trace); t6=$(trace)
    check "fsize: answered while it writes" "$(req a "$t1")" 200
    check "fsize: stream while it writes" "$(req b "$t2" stream)" 200
    sleep 0.5 # the final rows land too; then the files may not grow
    lim=$(stat -c %s "$db-wal")
    prlimit --pid "$PID" --fsize="$lim:unlimited"
    check "fsize: not answered 200 without its row" "$(req c "$t3")" 503
    grep -q '"code":"ledger_unavailable"' "$TMP/c.body" && ok "fsize: 503 says ledger_unavailable" \
        || bad "fsize: 503 body: $(cat "$TMP/c.body")"
    grep -qi '^Retry-After: [0-9]' "$TMP/c.hdr" && ok "fsize: 503 has Retry-After" || bad "fsize: Retry-After"
    check "fsize: /ready 503" "$(curl -s -o "$TMP/ready" -w '%{http_code}' "$URL/ready")" 503
    grep -q '"reason":"ledger cannot write: disk I/O error' "$TMP/ready" && ok "fsize: /ready says why" \
        || bad "fsize: /ready body: $(cat "$TMP/ready")"
    check "fsize: new work refused" "$(req d "$t4" stream)" 503
    check "fsize: still healthy" "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" 200
    prlimit --pid "$PID" --fsize=unlimited:unlimited
    wait_ready && ok "fsize: ready again by itself" || bad "fsize: not ready after the limit went"
    check "fsize: answers again" "$(req e "$t5")" 200
    check "fsize: streams again" "$(req f "$t6" stream)" 200
    grep -q '^data: \[DONE\]' "$TMP/f.body" && ok "fsize: stream complete" || bad "fsize: stream: $(cat "$TMP/f.body")"
    stop_server fsize
    check "fsize: rows of the answers" "$(row "$db" "$t1") $(row "$db" "$t2") $(row "$db" "$t5") $(row "$db" "$t6")" \
        "200|ok 200|ok 200|ok 200|ok"
    check "fsize: the withheld answer's row says 503" "$(row "$db" "$t3")" "503|failed"
    check "fsize: the refusal's row was kept and written" "$(row "$db" "$t4")" "503|rejected"
    check "fsize: no provisional row left" "$(sqlite3 "$db" 'SELECT count(*) FROM requests WHERE incomplete=1')" 0
fi

# (2) a full filesystem (ENOSPC), where this user may mount a tmpfs
MNT=$TMP/mnt
mkdir -p "$MNT"
if mount -t tmpfs -o size=8m tmpfs "$MNT" 2>/dev/null; then
    db=$MNT/full.db
    if start_server full --ledger "$db" --meter-config "$TMP/wait.json"; then
        t1=$(trace); t2=$(trace); t3=$(trace); t4=$(trace)
        check "full disk: answered while there is room" "$(req a "$t1")" 200
        sleep 0.5
        dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null
        check "full disk: stream opened" "$(req b "$t2" stream)" 200
        grep -q '"code":"ledger_unavailable"' "$TMP/b.body" && ! grep -q '\[DONE\]' "$TMP/b.body" \
            && ok "full disk: the stream ends with ledger_unavailable, not its final chunk" \
            || bad "full disk: stream body: $(cat "$TMP/b.body")"
        check "full disk: /ready 503" "$(curl -s -o "$TMP/ready" -w '%{http_code}' "$URL/ready")" 503
        grep -q 'database or disk is full' "$TMP/ready" && ok "full disk: /ready says the disk is full" \
            || bad "full disk: /ready body: $(cat "$TMP/ready")"
        check "full disk: new work refused" "$(req c "$t3")" 503
        rm -f "$MNT/filler"
        wait_ready && ok "full disk: ready again once there is room" || bad "full disk: not ready after rm"
        check "full disk: answers again" "$(req d "$t4")" 200
        stop_server full
        check "full disk: rows" "$(row "$db" "$t1") $(row "$db" "$t2") $(row "$db" "$t3") $(row "$db" "$t4")" \
            "200|ok 503|failed 503|rejected 200|ok"
    fi
    umount "$MNT"
else
    echo "  (cannot mount a tmpfs here: the full-disk case ran with the file-size limit only)"
fi
MNT=

# ---------------------------------------------------------------- where the ledger is
# ledger.path in --meter-config, no --ledger
mkdir -p "$TMP/state"
printf '{"ledger": {"path": "%s/from-config.db"}}\n' "$TMP" >"$TMP/path.json"
if XDG_STATE_HOME=$TMP/state start_server cfgpath --meter-config "$TMP/path.json"; then
    t1=$(trace)
    check "config path: answered" "$(req a "$t1")" 200
    stop_server cfgpath
    check "config path: the row is in [ledger] path" "$(row "$TMP/from-config.db" "$t1")" "200|ok"
    check "config path: no default ledger beside it" "$(ls "$TMP/state/frugal" 2>/dev/null | grep -c '\.db$')" 0
    grep -q "meter $TMP/from-config.db" "$TMP/cfgpath.err" && ok "config path: named at start" \
        || bad "config path: start-up line: $(grep serving "$TMP/cfgpath.err")"
fi

# ledger.path in the serve config's "metering" section (the one config format), no --ledger;
# a typo in that section stops the server with the file, the line and the key
printf '{"port": 0,\n "metering": {"ledger": {"path": "%s/from-serve-config.db"}}}\n' "$TMP" >"$TMP/serve.json"
if XDG_STATE_HOME=$TMP/state start_server srvcfg --config "$TMP/serve.json"; then
    t1=$(trace)
    check "serve config metering: answered" "$(req a "$t1")" 200
    stop_server srvcfg
    check "serve config metering: the row is in its ledger.path" "$(row "$TMP/from-serve-config.db" "$t1")" "200|ok"
fi
printf '{"port": 0,\n "metering": {"ledger": {\n   "pth": "x.db"}}}\n' >"$TMP/typo.json"
"$BIN" serve --model "$MODEL" --config "$TMP/typo.json" >"$TMP/typo.out" 2>"$TMP/typo.err"; rc=$?
check "serve config typo: exit status" "$rc" 1
grep -q "$TMP/typo.json:3: metering.ledger.pth: unknown key" "$TMP/typo.err" && ok "serve config typo: file:line and key" \
    || bad "serve config typo: message: $(cat "$TMP/typo.err")"

# the default: one file per server, named after the model and the port
fixed=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
if XDG_STATE_HOME=$TMP/state start_server dflt_a; then
    PID_A=$PID; URL_A=$URL; PID=
    XDG_STATE_HOME=$TMP/state "$BIN" serve --model "$MODEL" --port "$fixed" >"$TMP/dflt_b.out" 2>"$TMP/dflt_b.err" &
    PID=$!
    i=0; while [ $i -lt 100 ] && ! grep -qs '^listening' "$TMP/dflt_b.out"; do sleep 0.1; i=$((i + 1)); done
    ta=$(trace); tb=$(trace)
    URL=$URL_A; check "default: server A answered" "$(req a "$ta")" 200
    URL=http://127.0.0.1:$fixed; check "default: server B answered" "$(req b "$tb")" 200
    stop_server dflt_b
    PID=$PID_A; stop_server dflt_a
    fa=$TMP/state/frugal/ledger-qwen2-tiny-p$PID_A.db
    fb=$TMP/state/frugal/ledger-qwen2-tiny-$fixed.db
    check "default: A's row in A's file (port 0: named by pid)" "$(row "$fa" "$ta") $(row "$fa" "$tb")" "200|ok "
    check "default: B's row in B's file (named by port)" "$(row "$fb" "$tb") $(row "$fb" "$ta")" "200|ok "
    grep -q "meter $fb" "$TMP/dflt_b.err" && ok "default: the start-up line names the file" \
        || bad "default: start-up line: $(grep serving "$TMP/dflt_b.err")"
fi
mkdir -p "$TMP/home"
env -u XDG_STATE_HOME HOME="$TMP/home" "$BIN" serve --model "$MODEL" --port 0 >"$TMP/home.out" 2>"$TMP/home.err" &
PID=$!; PID_H=$PID
i=0; while [ $i -lt 100 ] && ! grep -qs '^listening' "$TMP/home.out"; do sleep 0.1; i=$((i + 1)); done
stop_server home
[ -f "$TMP/home/.local/state/frugal/ledger-qwen2-tiny-p$PID_H.db" ] \
    && ok "default without XDG_STATE_HOME: ~/.local/state/frugal/ledger-qwen2-tiny-pPID.db" \
    || bad "default without XDG_STATE_HOME: $(grep serving "$TMP/home.err"; ls -R "$TMP/home")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
