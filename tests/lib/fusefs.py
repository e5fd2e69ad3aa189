"""A small FUSE file server for tests, speaking the kernel's protocol on
/dev/fuse directly (no libfuse, no fusermount): one directory of regular
files, read-only, nothing cached by the kernel (every call reaches the
server), no flush on close.

It can stall on demand, the way a stuck virtio-fs or 9p server does:

  - pause_after(op): answer that request, then read no more requests.
    The kernel keeps the next ones queued; a process waiting on one of
    them can still be killed (SIGKILL takes a request the server has not
    read).
  - hold(op): read requests of that kind and never answer them. A process
    waiting on one is stuck in the kernel even after SIGKILL, until
    release() answers them (EIO) or the connection goes.

It can fail on demand, the way a share whose disk or server broke does:

  - fail(err=EIO): answer every request but INIT, FORGET and RELEASE
    with that error; heal() answers normally again.

mount(ns_pid, target) mounts it in the mount namespace of ns_pid;
close() stops the server, unmounts (lazily) and closes the device."""
import ctypes
import errno
import os
import select
import struct
import subprocess
import threading

LOOKUP, FORGET, GETATTR, OPEN, READ, STATFS, RELEASE, FLUSH = 1, 2, 3, 14, 15, 17, 18, 25
INIT, OPENDIR, READDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = 26, 27, 28, 29, 36, 38, 42
NO_REPLY = {FORGET, INTERRUPT, BATCH_FORGET}
FOPEN_DIRECT_IO = 1

IN_HDR = struct.Struct("<IIQQIIII")   # len opcode unique nodeid uid gid pid extlen/padding
OUT_HDR = struct.Struct("<IiQ")       # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")
ROOT = 1


class FuseServer:
    def __init__(self, files):
        self.files = dict(files)          # name -> bytes
        self.names = sorted(self.files)
        self.fd = os.open("/dev/fuse", os.O_RDWR)
        self.target = None
        self.ns_pid = None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.paused = False
        self.pause_op = None
        self.hold_ops = set()
        self.held = []                    # uniques read and not answered
        self.fail_err = 0                 # every request answered with -fail_err
        self.seen = []                    # opcodes read, in order
        self.thread = None

    # ---- control, from the test ----

    def mount(self, ns_pid, target):
        """Mounts it on target inside ns_pid's mount namespace and starts
        serving."""
        pid = os.fork()
        if pid == 0:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                ns = os.open(f"/proc/{ns_pid}/ns/mnt", os.O_RDONLY)
                if libc.setns(ns, 0x00020000) != 0:  # CLONE_NEWNS
                    os._exit(3)
                opts = f"fd={self.fd},rootmode=40000,user_id=0,group_id=0".encode()
                rc = libc.mount(b"hearth-test", target.encode(), b"fuse", 0, opts)
                os._exit(0 if rc == 0 else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"unable to mount fuse on {target} (status {status})")
        self.target, self.ns_pid = target, ns_pid
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def pause_after(self, op):
        with self.lock:
            self.pause_op = op

    def pause(self):
        with self.lock:
            self.paused = True

    def resume(self):
        with self.lock:
            self.paused = False
            self.pause_op = None

    def hold(self, op):
        with self.lock:
            self.hold_ops.add(op)

    def fail(self, err=errno.EIO):
        with self.lock:
            self.fail_err = err

    def heal(self):
        with self.lock:
            self.fail_err = 0

    def release(self):
        """Answers every held request with EIO and stops holding."""
        with self.lock:
            self.hold_ops.clear()
            held, self.held = self.held, []
        for unique in held:
            self._reply(unique, -errno.EIO)

    def close(self):
        self.stop.set()
        if self.thread:
            self.thread.join(5)
        if self.target and self.ns_pid and os.path.exists(f"/proc/{self.ns_pid}"):
            subprocess.run(["nsenter", "-t", str(self.ns_pid), "-m", "umount", "-l", self.target],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        try:
            os.close(self.fd)  # aborts whatever is still waiting on it
        except OSError:
            pass

    # ---- the server ----

    def _serve(self):
        while not self.stop.is_set():
            with self.lock:
                paused = self.paused
            if paused:
                self.stop.wait(0.02)
                continue
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if not r:
                continue
            try:
                buf = os.read(self.fd, 1 << 20 | 4096)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                return  # ENODEV: unmounted
            self._handle(buf)

    def _reply(self, unique, error=0, payload=b""):
        try:
            os.write(self.fd, OUT_HDR.pack(OUT_HDR.size + len(payload), error, unique) + payload)
        except OSError:
            pass  # the request was interrupted meanwhile

    def _attr(self, node):
        if node == ROOT:
            return ATTR.pack(ROOT, 0, 0, 0, 0, 0, 0, 0, 0, 0o40755, 2, 0, 0, 0, 4096, 0)
        data = self.files[self.names[node - 2]]
        return ATTR.pack(node, len(data), (len(data) + 511) // 512, 0, 0, 0, 0, 0, 0,
                         0o100644, 1, 0, 0, 0, 4096, 0)

    def _handle(self, buf):
        _, op, unique, node, _, _, _, _ = IN_HDR.unpack_from(buf)
        body = buf[IN_HDR.size:]
        with self.lock:
            self.seen.append(op)
            if op in self.hold_ops:
                self.held.append(unique)
                return
            fail = self.fail_err
        if op in NO_REPLY:
            return
        if fail and op not in (INIT, RELEASE, RELEASEDIR):
            self._reply(unique, -fail)
            return
        if op == INIT:
            major, minor, readahead, _ = struct.unpack_from("<IIII", body)
            self._reply(unique, 0, struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), readahead, 0,
                                               16, 12, 128 * 1024, 1, 32, 0, 0, *[0] * 7))
        elif op == LOOKUP:
            name = body.split(b"\0", 1)[0].decode()
            if node != ROOT or name not in self.files:
                self._reply(unique, -errno.ENOENT)
            else:
                n = self.names.index(name) + 2
                self._reply(unique, 0, struct.pack("<QQQQII", n, 0, 0, 0, 0, 0) + self._attr(n))
        elif op == GETATTR:
            self._reply(unique, 0, struct.pack("<QII", 0, 0, 0) + self._attr(node))
        elif op == OPEN:
            # Direct I/O (no page cache, as virtio-fs with cache=none): each
            # read is a request of its own, never a wait on another's page.
            self._reply(unique, 0, struct.pack("<QII", 0, FOPEN_DIRECT_IO, 0))
        elif op == OPENDIR:
            self._reply(unique, 0, struct.pack("<QII", 0, 0, 0))
        elif op == READ:
            _, off, size = struct.unpack_from("<QQI", body)
            data = self.files[self.names[node - 2]]
            self._reply(unique, 0, data[off:off + size])
        elif op == READDIR:
            _, off, size = struct.unpack_from("<QQI", body)
            entries = [(ROOT, ".", 4), (ROOT, "..", 4)] + \
                [(i + 2, n, 8) for i, n in enumerate(self.names)]
            out = b""
            for i in range(off, len(entries)):
                ino, name, typ = entries[i]
                nb = name.encode()
                ent = struct.pack("<QQII", ino, i + 1, len(nb), typ) + nb
                ent += b"\0" * (-len(ent) % 8)
                if len(out) + len(ent) > size:
                    break
                out += ent
            self._reply(unique, 0, out)
        elif op == STATFS:
            self._reply(unique, 0, struct.pack("<QQQQQIIII6I", 1024, 512, 512, 100, 50, 4096, 255,
                                               4096, 0, *[0] * 6))
        elif op in (RELEASE, RELEASEDIR):
            self._reply(unique, 0)
        elif op == FLUSH:
            # No flush, as a server without one answers: the kernel stops
            # sending it. Else a process killed with the file open would
            # wait in exit for a flush the stalled server never answers.
            self._reply(unique, -errno.ENOSYS)
        else:
            self._reply(unique, -errno.ENOSYS)
        with self.lock:
            if self.pause_op is not None and op == self.pause_op:
                self.paused = True
                self.pause_op = None
