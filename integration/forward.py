"""A TCP relay: ``python -m integration.forward LISTEN_HOST LISTEN_PORT TO_HOST TO_PORT``.

Run inside a network namespace it makes a service of the test's own namespace reachable as
``localhost:PORT`` there (docker trusts plain-HTTP registries on localhost only).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()
    writer.close()


async def main(listen_host: str, listen_port: int, to_host: str, to_port: int) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(to_host, to_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    server = await asyncio.start_server(relay, listen_host, listen_port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    host, port, to_host, to_port = sys.argv[1:5]
    asyncio.run(main(host, int(port), to_host, int(to_port)))
