"""The seat's side of its egress, run inside the sandbox's own network namespace (only ``lo``)
in front of the seat's program: it listens on loopback, carries every connection to the
host's egress proxy over the unix socket bound into the sandbox, then becomes the program.

Usage (what :func:`assay.adapters.netwrap.forward_argv` builds)::

    python -I -S netforward.py '{"socket": "/abs/proxy.sock", "port": 47901,
                                 "tunnels": [["127.0.0.1", 8123], ["::1", 9000]]}' PROGRAM ARGS...

* ``127.0.0.1:port`` (and ``[::1]:port`` when the namespace has IPv6) is the seat's HTTP proxy
  (``HTTPS_PROXY`` and friends point at it): each connection is spliced raw to a new connection
  on the proxy's socket, which speaks HTTP proxy itself.
* each tunnel ``[host, port]`` (a loopback address, or ``localhost`` for both ``127.0.0.1`` and
  ``::1``) listens on that very address and port, and carries each connection through
  ``CONNECT host:port`` to the proxy (closing it when the proxy refuses): a client that
  reaches a loopback model server without its proxy settings (as many do for loopback) still
  gets there, if the allowlist has it.

Every listener is bound before the program starts, so the program never races it. A server
process (forked twice, so it is not the program's child: a program that waits for every child
never waits for it) then serves the connections in threads, and exits when the program does;
the first process ``exec``s the program, which inherits none of the sockets (Python's sockets
are not inheritable) and starts with SIGPIPE at its default. Exit codes: the program's own;
125 for a bad configuration or a listener that cannot be bound; 127 when the program is not
found, 126 when it cannot be executed (as a shell says).

Standard library only, and kept this short: Python compiles a script on every start but
caches the bytecode of a module it imports, so the work is in :mod:`assay.adapters.relay`,
imported from this folder (appended to the path: the standard library still comes first).
"""

import os
import sys

DEFAULT_PORT = 47901
"""The loopback port a seat's proxy variables name (inside its own namespace, always free)."""

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import relay  # type: ignore[import-not-found]

    relay.main(sys.argv[1:])
