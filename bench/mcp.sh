#!/usr/bin/env bash
# kennel's MCP gateway (/mcp/{pool}) against supergateway, both in front of
# the same stdio MCP server, @modelcontextprotocol/server-everything
# (`node .../dist/index.js stdio`), driven by the same client: the official
# MCP Python SDK (`mcp` in target/mcp-venv: streamable_http_client and
# ClientSession), bench/mcp_client.py. One run measures both, kennel first.
# Not in CI (it installs supergateway into target/supergateway-node and takes
# a few minutes).
#
#   kennel        `kennel serve`, one pool `everything`: protocol = "json-rpc",
#                 mcp = {}, startup = "parallel", a fixed pool of 8 workers;
#                 sessions at /mcp/everything (one worker per session, retired
#                 at its end and replaced)
#   supergateway  supergateway@4.0.0 --stdio "node .../index.js stdio"
#                 --outputTransport streamableHttp --stateful, its defaults
#                 otherwise (log level info, session timeout 30 min); a new
#                 server process per session
#
#   attach    wall time from opening the transport (before initialize()) to
#             the answer of the first tools/list, over --attach sequential
#             sessions (default 50), each closed after (the SDK's DELETE);
#             p50 and p90. Before each session the gateway is back at rest:
#             kennel, all 8 workers up and free (the retired one replaced:
#             the warm pool a client meets in steady use); supergateway, the
#             previous session's process gone
#   parallel  --parallel sessions (default 8) opened, then each calls
#             trigger-long-running-operation {"duration": 2, "steps": 1} at
#             once: wall time of the calls against one such call alone
#             (ratio; kennel's target <= 1.2); also sessions_ratio, the same
#             from before initialize()
#   cut       --cut sessions (default 60), one after another, each on a raw
#             HTTP client: initialize, notifications/initialized, then
#             tools/call trigger-long-running-operation {"duration": 30,
#             "steps": 1}, held 0.5 s and cut by a reset (SO_LINGER 0); then
#             the server-everything processes under the gateway 1 s and 10 s
#             after the last cut, the gateway's RSS and theirs (MiB)
#   leak      with --leak N only (kennel alone): the test
#             sessions_cut_mid_call_leave_no_process_behind
#             (crates/kennel-server/tests/mcp_transport.rs, 2,000 sessions in
#             CI) run with N sessions in release, on a small MCP server of
#             ours: 30% cut by a reset mid-call, the worker processes sampled
#             every 100 ms (never above the pool's 8), how long after the
#             last session every worker was back, the server's RSS before and
#             after
#
# server-everything is copied from target/mcp-node (installed by .ci/run, or
# here when missing) into the run's directory, so that both gateways run the
# same files even if target/mcp-node is reinstalled meanwhile.
#
# Prints one JSON line per (gateway, measurement) on stdout, progress on
# stderr.
#
# Usage: [CARGO_TARGET_DIR=DIR] bench/mcp.sh [--attach N] [--cut N]
#            [--parallel N] [--only REGEX] [--keep DIR] > target/mcp-results.jsonl
#        bench/mcp.sh --leak N >> target/mcp-results.jsonl   (the leak run alone)
#        --only 'kennel|attach': the measurements whose name ("kennel attach",
#        "supergateway cut", ...) matches; --keep: the gateways' logs and
#        kennel's config kept in DIR (kennel logs with RUST_LOG, default
#        kennel_server=info)
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/common.sh

if [ "${1:-}" = --leak ]; then
    n=$2
    say "== leak: $n sessions through kennel, 30% cut mid-call (release)"
    line=$(KENNEL_MCP_SESSIONS=$n cargo test --release -q -p kennel-server --test mcp_transport \
        sessions_cut_mid_call_leave_no_process_behind -- --nocapture 2>&1 | tee /dev/stderr | grep ' sessions: settled')
    printf '{"gateway":"kennel","measurement":"leak","result":"%s"}\n' "$line"
    exit 0
fi

SG_VERSION=4.0.0
SG=target/supergateway-node
EVERYTHING_VERSION=2026.8.31
VENV=target/mcp-venv
TARGET_DIR=${CARGO_TARGET_DIR:-target}
WORKERS=8
driver_args=()
keep=
only=
while [ $# -gt 0 ]; do
    case "$1" in
        --attach|--cut|--parallel) driver_args+=("$1" "$2"); shift 2 ;;
        --only) only=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        *) die "unknown argument $1" ;;
    esac
done

if ! "$VENV/bin/python" -c "import mcp, anyio" >/dev/null 2>&1; then
    say "== installing the MCP Python SDK into $VENV (as .ci/run)"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "mcp-server-time==2026.10.19"
fi
EVERYTHING=node_modules/@modelcontextprotocol/server-everything/dist/index.js
if [ ! -f "target/mcp-node/$EVERYTHING" ]; then
    say "== installing server-everything into target/mcp-node (as .ci/run)"
    mkdir -p target/mcp-node
    npm install --silent --no-audit --no-fund --prefix target/mcp-node \
        "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION"
fi
SG_JS=$SG/node_modules/supergateway/dist/index.js
if [ "$(node -p "require('./$SG/node_modules/supergateway/package.json').version" 2>/dev/null)" != "$SG_VERSION" ]; then
    say "== installing supergateway@$SG_VERSION into $SG"
    rm -rf "$SG"
    mkdir -p "$SG"
    npm install --silent --no-audit --no-fund --prefix "$SG" "supergateway@$SG_VERSION"
fi

say "== building $TARGET_DIR/release/kennel"
cargo build --release --quiet -p kennel-server --bin kennel
KENNEL=$TARGET_DIR/release/kennel

run=$(mktemp -d)
gw_pid=
stop_gateway() {
    [ -n "$gw_pid" ] || return 0
    local left
    left=$("$VENV/bin/python" bench/mcp_client.py pids "$gw_pid" 2>/dev/null || true)
    kill "$gw_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$gw_pid" 2>/dev/null || true
    wait "$gw_pid" 2>/dev/null || true
    # Whatever it left behind (supergateway's children are in their own
    # process groups), by pid.
    for p in $left; do kill -9 "$p" 2>/dev/null || true; done
    gw_pid=
}
cleanup() {
    stop_gateway
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$run"/*.log "$run"/*.toml "$keep"/ 2>/dev/null || true; fi
    rm -rf "$run"
}
trap cleanup EXIT

cp -a target/mcp-node "$run/mcp-node"
SERVER=$(realpath "$run/mcp-node/$EVERYTHING")
free_port() { "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() { # URL SECONDS: until URL answers 200
    for _ in $(seq $(($2 * 10))); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        kill -0 "$gw_pid" 2>/dev/null || die "the gateway exited; its log: $(tail -20 "$run"/*.log)"
        sleep 0.1
    done
    die "$1 did not answer in $2 s"
}

say "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load average $(cut -d' ' -f1-3 /proc/loadavg)"
say "== versions: $("$KENNEL" --version 2>/dev/null || echo kennel), supergateway $SG_VERSION, server-everything $(node -p "require('$run/mcp-node/node_modules/@modelcontextprotocol/server-everything/package.json').version"), node $(node --version), mcp $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"

# kennel
port=$(free_port)
cat > "$run/kennel.toml" <<EOF
[server]
listen = "127.0.0.1:$port"

[[pool]]
name = "everything"
argv = ["node", "$SERVER", "stdio"]
protocol = "json-rpc"
mcp = {}
startup = "parallel"
sizing = { kind = "fixed", workers = $WORKERS }
EOF
say "== kennel on port $port"
RUST_LOG=${RUST_LOG:-kennel_server=info} "$KENNEL" serve --config "$run/kennel.toml" > "$run/kennel.log" 2>&1 &
gw_pid=$!
wait_http "http://127.0.0.1:$port/pools/everything/workers" 30
"$VENV/bin/python" bench/mcp_client.py run --gateway kennel --url "http://127.0.0.1:$port/mcp/everything" \
    --pid "$gw_pid" --workers-url "http://127.0.0.1:$port/pools/everything/workers" --workers "$WORKERS" \
    --only "$only" "${driver_args[@]}"
stop_gateway

# supergateway
port=$(free_port)
say "== supergateway on port $port"
node "$SG_JS" --stdio "node $SERVER stdio" --outputTransport streamableHttp --stateful \
    --port "$port" --healthEndpoint /healthz > "$run/supergateway.log" 2>&1 &
gw_pid=$!
wait_http "http://127.0.0.1:$port/healthz" 30
"$VENV/bin/python" bench/mcp_client.py run --gateway supergateway --url "http://127.0.0.1:$port/mcp" \
    --pid "$gw_pid" --only "$only" "${driver_args[@]}"
stop_gateway
