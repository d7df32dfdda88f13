"""
On `PYTHONPATH` for a subprocess under test: every attempt to resolve a host name or open a network
connection is written to the file `NERZOO_NETWORK_LOG` names and refused, so a test sees attempts
whether or not they would have succeeded.
"""

import os
import socket


def _refuse(what, target):
    path = os.environ.get("NERZOO_NETWORK_LOG")  # read at each attempt: tests/warm_allennlp.py sets it after start-up
    if path:
        with open(path, "a") as log:
            log.write(f"{what} {target!r}\n")
    raise OSError(f"network access refused by the test: {what} {target!r}")


def _getaddrinfo(host, *args, **kwargs):
    _refuse("getaddrinfo", host)


def _create_connection(address, *args, **kwargs):
    _refuse("create_connection", address)


_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _guarded(method):
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _refuse("connect", address)
        return method(self, address)

    return connect


socket.getaddrinfo = _getaddrinfo
socket.create_connection = _create_connection
socket.socket.connect = _guarded(_connect)
socket.socket.connect_ex = _guarded(_connect_ex)
