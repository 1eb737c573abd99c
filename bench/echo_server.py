"""The floor of a round trip (bench/roundtrip.py): a bare Python echo server over stdio with LSP
framing. It reads a frame, ``json.loads`` it, and writes a null result under its id; nothing
else (no pygls, no threads), so what a request costs above it is ours and pygls's."""

from __future__ import annotations

import json
import sys


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        length = None
        while True:
            line = stdin.readline()
            if not line:
                return
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            continue
        message = json.loads(stdin.read(length))
        if "id" not in message:
            if message.get("method") == "exit":
                return
            continue
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": None}).encode()
        stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdout.flush()


if __name__ == "__main__":
    main()
