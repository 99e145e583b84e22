"""What the multi-process launch tests share."""

import socket


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now (for the launch's rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
