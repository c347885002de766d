#!/bin/sh
# tests/examples/echo_check.sh SERVER [EMULATOR...] - runs an echo server example
# (examples/echo_server.c or .cc; through EMULATOR when cross-built) at 2 VPs for 20
# connections, made all at once by a Python client, each sending 200 KB that must
# come back byte for byte; then the server must exit 0 by itself.
# Exit 77 (skipped) without python3.
set -eu
server=$1
shift
command -v python3 >/dev/null 2>&1 || exit 77
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" "$server" 0 20 2 >"$out" &
pid=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
  [ -n "$port" ] && break
  sleep 0.05
done
if [ -z "$port" ]; then
  echo "echo_check: the server printed no port"; kill "$pid" 2>/dev/null; exit 1
fi
python3 - "$port" <<'PY'
import socket, sys, threading
port = int(sys.argv[1])
N, SIZE = 20, 200 * 1024
bad = []
def client(i):
    data = bytes((i * 7 + k) % 251 for k in range(SIZE))
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    w = threading.Thread(target=s.sendall, args=(data,))
    w.start()
    got = bytearray()
    while len(got) < SIZE:
        b = s.recv(65536)
        if not b:
            break
        got += b
    w.join()
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"":
        bad.append((i, "bytes after the echo"))
    s.close()
    if bytes(got) != data:
        bad.append((i, "echo of %d bytes differs (%d back)" % (SIZE, len(got))))
ts = [threading.Thread(target=client, args=(i,)) for i in range(N)]
for t in ts: t.start()
for t in ts: t.join()
if bad:
    print("echo_check:", bad)
    sys.exit(1)
print("echo_check: %d connections echoed %d bytes each" % (N, SIZE))
PY
rc=0
wait "$pid" || rc=$?
if [ "$rc" -ne 0 ]; then echo "echo_check: the server exited with $rc"; cat "$out"; exit 1; fi
cat "$out"
