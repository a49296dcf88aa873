"""Local TCP ports: one nobody uses, whether one is free, whether something listens on one."""

from __future__ import annotations

import contextlib
import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the kernel's pick for port 0). Another process may take it before the
    caller binds it; callers that must not race keep the socket instead."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether we could listen on localhost:`port` (SO_REUSEADDR, as the JVM and uvicorn bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_accepts(port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on localhost:`port`."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout):
        return True
    return False
