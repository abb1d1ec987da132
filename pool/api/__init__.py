"""The pool's gRPC servicers (thin: they raise, the call guard answers), its metrics, and the
server that opens the store and wires the wings together."""
