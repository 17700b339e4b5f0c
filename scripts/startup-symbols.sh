#!/usr/bin/env bash
# Regenerates crates/ironplane/link/startup-symbols.txt.gz, the order in which the linker lays out
# the binary's functions (crates/ironplane/build.rs passes it to lld as --symbol-ordering-file).
#
# Why: at start-up the server runs ~5 MB of its ~19 MB of code, spread over the whole `.text`.
# The kernel maps file pages around every page a fault touches (fault-around), so an idle server
# kept ~15 MiB of `.text` resident. With the functions that start-up and idling run laid out
# first, side by side, it keeps ~7 MiB (BENCHMARKS.md, "Idle memory", fourth session).
#
# How: the release binary runs under callgrind (valgrind) three times on one data directory —
# a fresh start, a restart, each idle for a while, then a restart that serves a few requests —
# and every function of the binary that ran is listed: the first two runs' functions first, the
# requests' after them. The list is by name, so it survives most code changes (a function that
# is gone is skipped; a new one is laid out with the rest of the code): regenerate it when the
# idle RSS figure of scripts/startup-rss.sh creeps up.
#
# The names carry each crate's disambiguator, which changes when the crate's dependencies do:
# after a change to Cargo.lock most of our own crates' names in the list are stale.
# `scripts/startup-symbols.sh --check` tells how much of the list a binary still has.
# Rebuild after regenerating and check: local functions carry an `.llvm.<hash>` suffix that can
# change when the crate is rebuilt with the new list; if such names are missing, regenerate from
# the rebuilt binary and rebuild once more (the second list then holds). With 92 % of the names
# found an idle server kept 12.9 MiB of `.text`, with 100 % 7.3 MiB.
#
# Usage: scripts/startup-symbols.sh [idle seconds, 15 by default] | --check; needs valgrind
# and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${IRONPLANE_BIN:-target/release/ironplane}
list=crates/ironplane/link/startup-symbols.txt.gz
if [ "${1:-}" = --check ]; then
    python3 - "$bin" "$list" <<'PY'
import gzip, subprocess, sys
binary, listed = sys.argv[1:3]
names = gzip.open(listed).read().decode().split()
have = {l.split()[-1] for l in subprocess.run(['nm', binary], capture_output=True, text=True, check=True).stdout.splitlines()}
found = sum(n in have for n in names)
print(f'{binary}: {found} of the {len(names)} functions in {listed} ({100 * found / len(names):.0f} %)')
PY
    exit 0
fi
idle=${1:-15}
for tool in valgrind curl python3; do
    command -v "$tool" > /dev/null || { echo "$tool is needed (apt-get install -y $tool)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "no $bin: cargo build --release -p ironplane first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="$work/data"

# Runs the binary under callgrind until it is ready, then `$2` (a shell function), then stops it.
run() {
    local out=$1 then=$2 port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$out" \
        "$bin" --secure-port "$port" --data-dir "$data" > "$work/log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do
        if curl -sk "https://127.0.0.1:$port/readyz" 2>/dev/null | grep -qx ok; then break; fi
        sleep 0.5
    done
    curl -sk "https://127.0.0.1:$port/readyz" | grep -qx ok || { cat "$work/log" >&2; exit 1; }
    "$then" "$port"
    kill -INT "$pid"
    wait "$pid" || true
}

idle_for() { sleep "$idle"; }

# What a client does most: discovery, reads, a write of each verb, a watch.
requests() {
    local port=$1
    local c=(-sk --cert "$data/pki/admin.crt" --key "$data/pki/admin.key")
    local api="https://127.0.0.1:$port"
    curl "${c[@]}" "$api/api" "$api/apis" "$api/api/v1" "$api/apis/apps/v1" > /dev/null
    curl "${c[@]}" "$api/api/v1/namespaces/default" "$api/api/v1/pods" "$api/apis/apps/v1/deployments" > /dev/null
    curl "${c[@]}" -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "$api/api/v1/namespaces" > /dev/null
    curl "${c[@]}" -X POST -H 'Content-Type: application/json' "$api/api/v1/namespaces/default/configmaps" \
        -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"symbols"},"data":{"a":"1"}}' > /dev/null
    curl "${c[@]}" -X PATCH -H 'Content-Type: application/merge-patch+json' \
        "$api/api/v1/namespaces/default/configmaps/symbols" -d '{"data":{"b":"2"}}' > /dev/null
    curl "${c[@]}" -X PATCH -H 'Content-Type: application/apply-patch+yaml' \
        "$api/api/v1/namespaces/default/configmaps/symbols?fieldManager=symbols&force=true" \
        -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"symbols"},"data":{"c":"3"}}' > /dev/null
    curl "${c[@]}" -X POST -H 'Content-Type: application/json' "$api/apis/apps/v1/namespaces/default/deployments" \
        -d '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"symbols"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}' > /dev/null
    curl "${c[@]}" --max-time 3 "$api/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1" > /dev/null || true
    curl "${c[@]}" -X DELETE "$api/api/v1/namespaces/default/configmaps/symbols" > /dev/null
    curl "${c[@]}" -X DELETE "$api/apis/apps/v1/namespaces/default/deployments/symbols" > /dev/null
}

run "$work/fresh.out" idle_for
run "$work/restart.out" idle_for
run "$work/requests.out" requests

python3 - "$bin" "$work" "$list" <<'PY'
import gzip, re, subprocess, sys
binary, work, dest = sys.argv[1:4]
name = binary.rsplit('/', 1)[-1]

def executed(path):
    """Functions of the binary that ran, from a callgrind profile with compressed names."""
    objects, functions, ran = {}, {}, set()
    current = called = None
    for line in open(path, errors='replace'):
        m = re.match(r'^(ob|cob)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if m:
            if m.group(3):
                objects[m.group(2)] = m.group(3)
            if m.group(1) == 'ob':
                current = objects.get(m.group(2))
            else:
                called = objects.get(m.group(2))
            continue
        m = re.match(r'^(fn|cfn)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if m:
            if m.group(3):
                functions[m.group(2)] = m.group(3)
            obj = current if m.group(1) == 'fn' else (called or current)
            if m.group(1) == 'fn':
                called = None
            if obj and obj.rsplit('/', 1)[-1] == name:
                ran.add(functions[m.group(2)])
    return ran

symbols = {}
for line in subprocess.run(['nm', '-S', binary], capture_output=True, text=True, check=True).stdout.splitlines():
    p = line.split()
    if len(p) == 4 and p[2] in 'tTwW':
        symbols[p[3]] = int(p[1], 16)
first = (executed(f'{work}/fresh.out') | executed(f'{work}/restart.out')) & symbols.keys()
then = (executed(f'{work}/requests.out') & symbols.keys()) - first
with gzip.GzipFile(dest, 'wb', mtime=0) as out:
    out.write(''.join(s + '\n' for s in sorted(first) + sorted(then)).encode())
mb = lambda names: sum(symbols[n] for n in names) / 1e6
print(f'{dest}: {len(first)} start-up and idle functions ({mb(first):.1f} MB), then {len(then)} '
      f'for requests ({mb(then):.1f} MB), of {len(symbols)} ({mb(symbols):.1f} MB)')
PY
