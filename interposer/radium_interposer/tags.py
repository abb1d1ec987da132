"""The value tags of the data plane: what ``"$"`` says a tagged JSON object is
(docs/data-plane.md, "Values"). Every module names a tag by its constant here, never by its
letters, so the spec's table and the code meet in one place. Stdlib-free: the bottom layer.
"""

__all__ = [
    "ARRAY",
    "ATTRIBUTE",
    "BYTEARRAY",
    "BYTES",
    "CALLBACK",
    "CLASS",
    "CLIENT_OBJECT",
    "COMPLEX",
    "COUNTER",
    "DATACLASS",
    "DATETIME",
    "DECIMAL",
    "DEFAULTDICT",
    "DEQUE",
    "DICT",
    "ELLIPSIS",
    "ENUM",
    "EXCEPTION",
    "FRACTION",
    "FROZENSET",
    "HANDLE",
    "HELD",
    "MODULE",
    "NAMEDTUPLE",
    "NAMESPACE",
    "ORDERED_DICT",
    "PATH",
    "PICKLED",
    "PURE_PATH",
    "RANGE",
    "REFERENCES",
    "SCALAR_VALUE",
    "SET",
    "SLICE",
    "SLOT",
    "TIMEDELTA",
    "TUPLE",
]

# Containers and plain values.
TUPLE = "t"
DICT = "d"
SET = "set"
FROZENSET = "frozenset"
BYTES = "b"
BYTEARRAY = "ba"
COMPLEX = "c"
SLICE = "sl"
ELLIPSIS = "..."
#: A numpy array or scalar: dtype, shape, a buffer.
ARRAY = "nd"

# What stays where it is, by reference.
#: An object in the worker's handle table.
HANDLE = "h"
#: A numpy scalar of the worker's that came with its value (a handle too).
SCALAR_VALUE = "sv"
#: A library function or object by import path.
PATH = "p"
#: Attribute ``n`` of the object ``o``.
ATTRIBUTE = "a"
MODULE = "m"
#: A class by import path.
CLASS = "cls"
#: A callable of the client, called back.
CALLBACK = "cb"
#: An object of the client program (a file, a numpy-protocol object, an iterator).
CLIENT_OBJECT = "co"
#: Client to worker only: the client's library object, pickled.
PICKLED = "pk"
#: Client to worker only: an exception.
EXCEPTION = "ex"
#: A template's slot, filled from a record (docs/data-plane.md, "Batches").
SLOT = "_"

# Standard-library structures (structs.py).
NAMESPACE = "ns"
DATACLASS = "dc"
NAMEDTUPLE = "nt"
ENUM = "en"
PURE_PATH = "pa"
DATETIME = "dt"
TIMEDELTA = "td"
DECIMAL = "dec"
FRACTION = "fr"
ORDERED_DICT = "od"
COUNTER = "ctr"
DEFAULTDICT = "dd"
DEQUE = "dq"
RANGE = "rg"

#: The tags of objects that stay where they are: a side resolves each by reference.
REFERENCES = frozenset(
    (HANDLE, PATH, ATTRIBUTE, MODULE, CLASS, CALLBACK, CLIENT_OBJECT, SCALAR_VALUE)
)
#: The tags of objects in the worker's handle table.
HELD = frozenset((HANDLE, SCALAR_VALUE))
