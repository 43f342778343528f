"""Bind a command's listening socket first, so a port in use is one clear line.

A server binds before it opens its store or starts any background work: a port
that is taken (or an address this machine does not have) then ends the command
at once with :class:`BindError`, whose message says what to do, instead of a
traceback after start-up (or a hang while start-up work is shut down).
"""

from __future__ import annotations

import errno
import socket

__all__ = ["BindError", "bind_listener"]


class BindError(OSError):
    """The address cannot be listened on; the message is one line for the user."""


def bind_listener(host: str, port: int, *, flag: str = "--port",
                  backlog: int = 128) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (as aiohttp's ``TCPSite`` would bind it).

    Raises:
        BindError: the port is in use, needs privileges, or the host is not an
            address of this machine.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on {host}: {exc.strerror}") from None
    family = infos[0][0]
    try:
        return socket.create_server((host, port), family=family, backlog=backlog)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"port {port} on {host} is in use; pick another with {flag}",
                            ) from None
        if exc.errno == errno.EACCES:
            raise BindError(f"port {port} on {host} needs privileges this process does not "
                            f"have; pick one above 1023 with {flag}") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise BindError(f"{host} is not an address of this machine; "
                            "pick another with --host") from None
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
