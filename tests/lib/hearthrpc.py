"""The tests' one client for hearth's control protocol: newline-delimited
JSON-RPC 2.0 over a stream socket. tests/integration talks to hearth's unix
socket with it, tests/vm to the virtio-serial channel's host socket.

Both conftest.py files put this directory on sys.path."""
import json
import socket


class LineSocket:
    """A stream socket read a line at a time."""

    def __init__(self, family, addr, timeout):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(addr)
        self.buf = b""

    def send(self, data: bytes):
        self.sock.sendall(data)

    def line(self):
        """The next line, without its newline (bytes)."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class RpcClient:
    """JSON-RPC on one connection. Notifications met while waiting for a
    reply are kept in .events (their params). skip_stray: a reply with
    another id is passed over (the VM's channel may still carry answers
    to pings sent while it connected) instead of failing the call."""

    def __init__(self, ls, skip_stray=False):
        self.ls = ls
        self.next_id = 1
        self.events = []
        self.skip_stray = skip_stray

    @property
    def sock(self):
        return self.ls.sock

    @property
    def buf(self):
        return self.ls.buf

    @buf.setter
    def buf(self, value):
        self.ls.buf = value

    def send_raw(self, data: bytes):
        self.ls.send(data)

    def read_line(self):
        return json.loads(self.ls.line())

    def read_reply(self):
        """Next message that is not a notification."""
        while True:
            msg = self.read_line()
            if "id" in msg:
                return msg
            self.events.append(msg.get("params", {}))

    def call(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        req = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = params
        self.send_raw((json.dumps(req) + "\n").encode())
        while True:
            reply = self.read_reply()
            if reply.get("id") == rid or not self.skip_stray:
                break
        assert reply.get("id") == rid, reply
        return reply

    def result(self, method, params=None):
        reply = self.call(method, params)
        assert "result" in reply, reply
        return reply["result"]

    def error(self, method, params=None):
        """The error a call must get (a result fails the test)."""
        reply = self.call(method, params)
        assert "error" in reply, reply
        return reply["error"]

    def close(self):
        self.ls.close()


def unix_client(path, timeout, skip_stray=False):
    return RpcClient(LineSocket(socket.AF_UNIX, path, timeout), skip_stray)
