"""The data plane's operation names, in one place (docs/data-plane.md, "Operations" and
"Callbacks"): the ``op`` of a CALL frame's metadata. Both sides name them from here; the
worker's table of what runs each is ``Worker.operations``.
"""

__all__ = [
    "CALL",
    "CALLBACK",
    "DEFINE",
    "ENSURE",
    "FETCH",
    "FILE",
    "FILE_OBJECT",
    "FIND",
    "FS",
    "IMPORT",
    "ITEMS",
    "METHODS",
    "OPEN",
    "PING",
    "READS",
    "RETAIN",
    "SHIP",
    "STATS",
]

# The client's requests to the worker.
CALL = "call"
FETCH = "fetch"
IMPORT = "import"
ITEMS = "items"
METHODS = "methods"
RETAIN = "retain"
ENSURE = "ensure"
DEFINE = "define"
FIND = "find"
SHIP = "ship"
STATS = "stats"
PING = "ping"

#: Requests other than calls that change nothing on the worker (``import``, ``define`` and
#: ``ship`` may run the program's code: the client forgets what it knew after them).
READS = frozenset((FETCH, METHODS, ITEMS, STATS, PING, RETAIN, ENSURE))

# The worker's requests to the client, while the client waits for an answer.
CALLBACK = "callback"
OPEN = "open"
FILE = "file"
FS = "fs"
FILE_OBJECT = "fo"
