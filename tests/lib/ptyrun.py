"""A command run on a pseudo-terminal of its own, driven from the master
side as a person at a terminal would: `hearthctl exec -t` in
tests/integration (against hearth's unix socket) and tests/vm (over the
virtio-serial channel).

    with PtyCommand(argv, rows=40, cols=90) as p:
        out = p.read_until(b"40 90", 10)
        p.resize(30, 70)
        p.write(b"abc\\r")
        status = p.wait()

Leaving the block kills the command if it still runs, reaps it and
closes the master."""
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time


def _winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class PtyCommand:
    def __init__(self, argv, rows, cols):
        pid, fd = pty.fork()
        if pid == 0:
            # The size is set in the child before the command runs: set
            # from the parent, it could come after the command has read
            # it, and the SIGWINCH that reports it before the command is
            # ready for one.
            try:
                _winsize(0, rows, cols)
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.reaped = False

    def read_until(self, needle, timeout):
        """What the command writes until needle has come, the command
        closed its terminal or timeout seconds have passed."""
        data, deadline = b"", time.monotonic() + timeout
        while needle not in data and time.monotonic() < deadline:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
        return data

    def write(self, data):
        os.write(self.fd, data)

    def resize(self, rows, cols):
        """A window change of the terminal (the kernel tells the
        command's foreground process group with SIGWINCH)."""
        _winsize(self.fd, rows, cols)

    def raw(self):
        """Whether the command has set its terminal raw (no line
        editing)."""
        return not termios.tcgetattr(self.fd)[3] & termios.ICANON

    def wait(self):
        """The command's wait status once it ends."""
        _, status = os.waitpid(self.pid, 0)
        self.reaped = True
        return status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.reaped:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)
        return False

