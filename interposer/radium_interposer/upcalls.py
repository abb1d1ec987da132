"""What the interposer's lower layers ask of its upper ones, bound once when remoting starts.

The client's layers, bottom up: the wire and the codec; the connection (``client``, ``errors``,
``client_warnings``); remote objects (``proxy``, ``calls``, ``express``); the program's code and
classes (``classes``, ``shipping``, ``program_state``, ``client_serving``). An answer read deep
in the connection can need the top: a remote exception's class is a stand-in (``classes``), a
callback the worker makes runs the program's code (``client_serving``), the random state shipped
code drew from goes back to the program (``program_state``); and a class of the program on a
remote base ships on first use (``shipping``). A lower module calls such a service through
:data:`bound` instead of importing upward; ``wiring.install`` (run by ``finder.install``, the
client's one entry) fills it before the first connection, so each arrow in the import graph
points down (tests/test_layers.py).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

__all__ = ["NotWired", "Upcalls", "bound"]


class NotWired(RuntimeError):
    """An upcall made before ``wiring.install`` bound it: a bug of ours, never the program's."""


def _unbound(name: str) -> Callable[..., Any]:
    def unbound(*_args: Any, **_kwargs: Any) -> Any:
        raise NotWired(f"radium: the interposer's {name} was used before remoting started")

    return unbound


class Upcalls:
    """The upper layers' services, each a plain function (fast to call: an attribute read)."""

    def __init__(self) -> None:
        #: ``classes.local_or_stand_in(path, exception)``: the class a worker names by path.
        self.class_named: Callable[[str, Any], type] = _unbound("class_named")
        #: ``classes.for_instances(type_name)``: the class of a remote object's proxy.
        self.proxy_class: Callable[[str], type] = _unbound("proxy_class")
        #: ``client_serving.serve(conn, frame)``: run a callback or file use the worker sent.
        self.serve: Callable[[Any, Any], None] = _unbound("serve")
        #: ``client_objects.drop(ids)``: the worker let go of our callables and objects.
        self.released: Callable[[Any], None] = _unbound("released")
        #: ``program_state.after_call(conn, states)``: the worker's generator states.
        self.random_states: Callable[[Any, Any], None] = _unbound("random_states")
        #: ``shipping.ship_class(cls)``: the worker path of a user class, shipped first.
        self.ship_class: Callable[[type], str] = _unbound("ship_class")
        #: ``shipping.callable_ref(obj)``: a function's reference for the worker, or None.
        self.callable_ref: Callable[[Any], Optional[Dict[str, Any]]] = _unbound("callable_ref")
        #: ``shipping.users_path(obj)``: the worker path of the user's class or function
        #: (shipped first), None for anything else (pickles name them by it).
        self.users_path: Callable[[Any], Optional[str]] = _unbound("users_path")
        #: ``shipping.resend(module, names)``: globals of shipped code, rebound since sent.
        self.resend: Callable[[Any, Any], None] = _unbound("resend")


#: The one set of upcalls of this process.
bound = Upcalls()
