"""files.* methods: stat, list, read, hash, write, rename, mkdir, remove;
their limits, hostile paths (FIFO, symlink, device) and atomic writes."""
import base64
import hashlib
import os
import stat
import subprocess
import threading
import time

import pytest

from conftest import HEARTHCTL, Client

CHUNK = 256 * 1024


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def h(hearth):
    hearth.start(hearth.config())
    return hearth


@pytest.fixture
def c(h):
    cl = h.client()
    yield cl
    cl.close()


def test_stat_describes_each_type_without_opening_it(c, tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"hello")
    os.chmod(f, 0o640)
    os.mkfifo(tmp_path / "fifo")
    os.symlink("f", tmp_path / "link")
    r = c.result("files.stat", {"path": str(f)})
    assert r["type"] == "file" and r["size"] == 5 and r["mode"] == "0640"
    assert r["uid"] == 0 and r["nlink"] == 1
    assert abs(r["mtime_ms"] - f.stat().st_mtime * 1000) < 2000
    assert c.result("files.stat", {"path": str(tmp_path)})["type"] == "dir"
    assert c.result("files.stat", {"path": str(tmp_path / "fifo")})["type"] == "fifo"
    ln = c.result("files.stat", {"path": str(tmp_path / "link")})
    assert ln["type"] == "symlink" and ln["target"] == "f"
    assert c.result("files.stat", {"path": str(tmp_path / "link"), "follow": True})["type"] == "file"
    assert c.result("files.stat", {"path": "/"})["type"] == "dir"
    assert c.result("files.stat", {"path": "/dev/null"})["type"] == "char"
    e = c.error("files.stat", {"path": str(tmp_path / "nope")})
    assert e["code"] == -32002 and str(tmp_path / "nope") in e["message"]


def test_path_rules_name_the_parameter(c, tmp_path):
    cases = [
        ({}, "path: required"),
        ({"path": 7}, "path: expected a string"),
        ({"path": "relative/x"}, "path: expected an absolute path"),
        ({"path": "/tmp/../etc/passwd"}, "path: '..'"),
        ({"path": "/" + "a" * 5000}, "path: longer than 4095"),
        ({"path": "/" + "a" * 300}, "path: a component is longer than 255"),
        ({"path": "/tmp", "follow": 1}, "follow: expected true or false"),
        ({"path": "/tmp", "bogus": 1}, "bogus: unknown parameter"),
    ]
    for params, msg in cases:
        e = c.error("files.stat", params)
        assert e["code"] == -32602 and msg in e["message"], (params, e)
    # A symbolic link in a parent is never followed, whatever the method.
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"x")
    os.symlink(str(tmp_path / "real"), tmp_path / "alias")
    for m, p in [("files.stat", {}), ("files.read", {}), ("files.write", {"data": ""}),
                 ("files.remove", {}), ("files.mkdir", {})]:
        e = c.error(m, {"path": str(tmp_path / "alias" / "f"), **p})
        assert "symbolic link" in e["message"] and "alias" in e["message"], (m, e)
    assert (tmp_path / "real" / "f").read_bytes() == b"x"
    # With follow the read-only methods go through it.
    r = c.result("files.read", {"path": str(tmp_path / "alias" / "f"), "follow": True})
    assert base64.b64decode(r["data"]) == b"x"


@pytest.mark.valgrind
def test_read_in_chunks_and_its_limits(c, tmp_path):
    data = os.urandom(CHUNK * 2 + 1234)
    f = tmp_path / "big"
    f.write_bytes(data)
    got, off = b"", 0
    while True:
        r = c.result("files.read", {"path": str(f), "offset": off})
        assert r["offset"] == off and r["size"] == len(data)
        chunk = base64.b64decode(r["data"])
        assert len(chunk) == r["length"] <= CHUNK
        got += chunk
        off += len(chunk)
        if r["eof"]:
            break
    assert got == data
    r = c.result("files.read", {"path": str(f), "offset": 10, "length": 5})
    assert base64.b64decode(r["data"]) == data[10:15] and not r["eof"]
    r = c.result("files.read", {"path": str(f), "offset": len(data) + 5})
    assert r["length"] == 0 and r["data"] == "" and r["eof"]
    e = c.error("files.read", {"path": str(f), "length": CHUNK + 1})
    assert e["code"] == -32602 and "length: at most 262144" in e["message"]
    e = c.error("files.read", {"path": str(f), "offset": -1})
    assert e["code"] == -32602 and e["message"].startswith("offset:")
    e = c.error("files.read", {"path": str(tmp_path)})
    assert "a directory, not a regular file" in e["message"]
    # /proc reports a size of 0: only a short read ends it.
    r = c.result("files.read", {"path": "/proc/1/status", "length": 16})
    assert r["size"] == 0 and r["length"] == 16 and r["eof"] is False
    r = c.result("files.read", {"path": "/proc/1/status"})
    assert base64.b64decode(r["data"]).startswith(b"Name:\t") and r["eof"] is True


def test_planted_fifo_symlink_and_device_never_block_or_leak(h, c, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    secret = tmp_path / "secret"
    secret.write_bytes(b"root only")
    os.symlink(str(secret), tmp_path / "link")
    os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    start = time.monotonic()
    for m in ("files.read", "files.hash"):
        e = c.error(m, {"path": str(tmp_path / "fifo")})
        assert "a FIFO, not a regular file" in e["message"]
        e = c.error(m, {"path": str(tmp_path / "link")})
        assert "a symbolic link, not followed" in e["message"]
        e = c.error(m, {"path": str(tmp_path / "null")})
        assert "a device, not a regular file" in e["message"]
    e = c.error("files.read", {"path": str(tmp_path / "fifo"), "follow": True})
    assert "a FIFO" in e["message"]
    e = c.error("files.write", {"path": str(tmp_path / "fifo"), "data": b64(b"x"), "append": True})
    assert "a FIFO" in e["message"]
    e = c.error("files.write", {"path": str(tmp_path / "link"), "data": b64(b"x"), "append": True})
    assert "symbolic link" in e["message"]
    assert secret.read_bytes() == b"root only"
    # A whole write replaces the link itself, never its target.
    c.result("files.write", {"path": str(tmp_path / "link"), "data": b64(b"new")})
    assert not os.path.islink(tmp_path / "link")
    assert (tmp_path / "link").read_bytes() == b"new"
    assert secret.read_bytes() == b"root only"
    assert time.monotonic() - start < 10
    assert h.rpc("ping") == {}


def test_hash_ranges(c, tmp_path):
    data = os.urandom(2 * 1024 * 1024 + 17)
    f = tmp_path / "h"
    f.write_bytes(data)
    r = c.result("files.hash", {"path": str(f)})
    assert r["length"] == 1 << 20 and not r["eof"] and r["size"] == len(data)
    assert r["sha256"] == hashlib.sha256(data[:1 << 20]).hexdigest()
    r = c.result("files.hash", {"path": str(f), "offset": 2 << 20})
    assert r["eof"] and r["length"] == 17
    assert r["sha256"] == hashlib.sha256(data[2 << 20:]).hexdigest()
    r = c.result("files.hash", {"path": str(f), "offset": 5, "length": 1000})
    assert r["sha256"] == hashlib.sha256(data[5:1005]).hexdigest()
    r = c.result("files.hash", {"path": str(f), "offset": 3, "length": 0})
    assert r["sha256"] == hashlib.sha256(b"").hexdigest()
    e = c.error("files.hash", {"path": str(f), "length": (1 << 20) + 1})
    assert e["code"] == -32602 and "length: at most 1048576" in e["message"]


@pytest.mark.valgrind
def test_write_whole_append_mode_owner_exclusive(c, tmp_path):
    f = tmp_path / "w"
    r = c.result("files.write", {"path": str(f), "data": b64(b"one"), "mode": "0600",
                                 "uid": 1234, "gid": 5678})
    assert r == {"path": str(f), "written": 3, "size": 3, "created": True}
    st = f.stat()
    assert f.read_bytes() == b"one" and stat.S_IMODE(st.st_mode) == 0o600
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    # Replacing keeps mode and owner unless told otherwise.
    r = c.result("files.write", {"path": str(f), "data": b64(b"two!")})
    assert r["created"] is False and f.read_bytes() == b"two!"
    st = f.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 1234
    r = c.result("files.write", {"path": str(f), "data": b64(b"++"), "append": True, "mode": 0o644})
    assert r["size"] == 6 and f.read_bytes() == b"two!++"
    assert stat.S_IMODE(f.stat().st_mode) == 0o644
    e = c.error("files.write", {"path": str(f), "data": b64(b"x"), "exclusive": True})
    assert "already exists" in e["message"] and f.read_bytes() == b"two!++"
    c.result("files.write", {"path": str(tmp_path / "new"), "data": b64(b"n"), "exclusive": True,
                             "append": True})
    assert (tmp_path / "new").read_bytes() == b"n"
    c.result("files.write", {"path": str(tmp_path / "empty")})
    assert (tmp_path / "empty").read_bytes() == b""
    cases = [
        ({"data": "!!!"}, "data: invalid base64"),
        ({"data": "A" * ((CHUNK + 2) // 3 * 4 + 4)}, "data: over 262144 bytes"),
        ({"mode": "999"}, "mode: expected"),
        ({"mode": 0o10000}, "mode: expected"),
        ({"uid": -1}, "uid: expected"),
        ({"gid": 4294967295}, "gid: expected"),
        ({"append": "yes"}, "append: expected true or false"),
    ]
    for p, msg in cases:
        e = c.error("files.write", {"path": str(tmp_path / "z"), **p})
        assert e["code"] == -32602 and msg in e["message"], (p, e)
    e = c.error("files.write", {"path": str(tmp_path), "data": ""})
    assert "a directory" in e["message"]
    e = c.error("files.write", {"path": "/", "data": ""})
    assert e["message"] == "path: not allowed on /"
    e = c.error("files.write", {"path": str(tmp_path / "no" / "dir"), "data": ""})
    assert e["code"] == -32002 and "no/dir" in e["message"]
    assert not (tmp_path / "z").exists()
    assert not [n for n in os.listdir(tmp_path) if ".hearth-" in n]


def test_whole_write_is_atomic_for_a_reader(c, tmp_path):
    """A reader polling the file sees only whole versions, and no temp
    name is left behind."""
    (tmp_path / "w").mkdir()
    f = tmp_path / "w" / "atomic"
    versions = [bytes([65 + i]) * (CHUNK - i) for i in range(12)]
    f.write_bytes(versions[0])
    seen, stop = set(), threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.add(f.read_bytes())
            except FileNotFoundError:
                seen.add(b"<missing>")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for v in versions[1:]:
            c.result("files.write", {"path": str(f), "data": b64(v)})
    finally:
        stop.set()
        t.join()
    assert seen <= set(versions), "a reader saw a partial or missing file"
    assert f.read_bytes() == versions[-1]
    assert os.listdir(tmp_path / "w") == ["atomic"]


@pytest.mark.valgrind
def test_rename_mkdir_remove(c, tmp_path):
    d = tmp_path / "a" / "b" / "c"
    e = c.error("files.mkdir", {"path": str(d)})
    assert e["code"] == -32002
    r = c.result("files.mkdir", {"path": str(d), "parents": True, "mode": "0750", "uid": 77})
    assert r["created"] is True and d.is_dir()
    assert stat.S_IMODE(d.stat().st_mode) == 0o750 and d.stat().st_uid == 77
    assert c.result("files.mkdir", {"path": str(d), "parents": True})["created"] is False
    e = c.error("files.mkdir", {"path": str(d)})
    assert "already exists" in e["message"]
    r = c.result("files.mkdir", {"path": str(tmp_path / "one"), "mode": 0o700})
    assert r["created"] is True and stat.S_IMODE((tmp_path / "one").stat().st_mode) == 0o700
    (tmp_path / "f").write_bytes(b"x")
    e = c.error("files.mkdir", {"path": str(tmp_path / "f")})
    assert "not a directory" in e["message"]

    src, dst = tmp_path / "src", tmp_path / "one" / "dst"
    src.write_bytes(b"payload")
    (tmp_path / "taken").write_bytes(b"keep")
    e = c.error("files.rename", {"from": str(src), "to": str(tmp_path / "taken"), "exclusive": True})
    assert "to: " in e["message"] and "already exists" in e["message"]
    assert c.result("files.rename", {"from": str(src), "to": str(dst)}) == \
        {"from": str(src), "to": str(dst)}
    assert dst.read_bytes() == b"payload" and not src.exists()
    e = c.error("files.rename", {"from": str(src), "to": str(dst)})
    assert e["code"] == -32002 and e["message"].startswith("from: ")
    e = c.error("files.rename", {"from": str(dst)})
    assert e["message"] == "to: required (an absolute path)"

    e = c.error("files.remove", {"path": str(tmp_path / "a")})
    assert "recursive: true" in e["message"] and d.is_dir()
    r = c.result("files.remove", {"path": str(tmp_path / "f")})
    assert r == {"path": str(tmp_path / "f"), "removed": 1, "done": True}
    os.symlink(str(tmp_path / "one"), tmp_path / "a" / "link")
    r = c.result("files.remove", {"path": str(tmp_path / "a"), "recursive": True})
    assert r["done"] and r["removed"] == 4 and not (tmp_path / "a").exists()
    assert dst.read_bytes() == b"payload", "a link inside was followed"
    e = c.error("files.remove", {"path": "/"})
    assert e["message"] == "path: not allowed on /"
    e = c.error("files.remove", {"path": str(tmp_path / "gone")})
    assert e["code"] == -32002


def test_recursive_remove_is_bounded_per_call(c, tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(2500):
        (d / str(i)).touch()
    r = c.result("files.remove", {"path": str(d), "recursive": True})
    assert r["removed"] == 2000 and r["done"] is False and d.exists()
    r = c.result("files.remove", {"path": str(d), "recursive": True})
    assert r["removed"] == 501 and r["done"] is True and not d.exists()


def test_recursive_remove_stops_at_a_mount_point(h, c, tmp_path):
    d = tmp_path / "tree"
    (d / "mnt").mkdir(parents=True)
    (d / "x").touch()
    # In hearth's mount namespace only: the test's own is not touched.
    pid = h.pid
    subprocess.run(["nsenter", "-t", str(pid), "-m", "mount", "-t", "tmpfs", "t", str(d / "mnt")],
                   check=True)
    subprocess.run(["nsenter", "-t", str(pid), "-m", "touch", str(d / "mnt" / "inside")], check=True)
    e = c.error("files.remove", {"path": str(d), "recursive": True})
    assert "mount point" in e["message"]
    r = subprocess.run(["nsenter", "-t", str(pid), "-m", "ls", str(d / "mnt")],
                       capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["inside"]
    e = c.error("files.remove", {"path": str(d / "mnt"), "recursive": True})
    assert "a mount point (not removed)" in e["message"]


def test_list_pages_with_a_cursor(c, tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    names = {f"f{i:04d}" for i in range(2345)}
    for n in names:
        (d / n).touch()
    (d / "sub").mkdir()
    os.symlink("nowhere", d / "ln")
    got, cursor, pages = {}, None, 0
    while True:
        p = {"path": str(d)}
        if cursor:
            p["cursor"] = cursor
        r = c.result("files.list", p)
        pages += 1
        assert len(r["entries"]) <= 1000
        for e in r["entries"]:
            assert e["name"] not in got
            got[e["name"]] = e
        cursor = r["next"]
        if cursor is None:
            break
    assert pages == 3
    assert set(got) == names | {"sub", "ln"}
    assert got["sub"]["type"] == "dir" and got["ln"]["type"] == "symlink"
    assert got["f0001"]["type"] == "file" and got["f0001"]["size"] == 0
    r = c.result("files.list", {"path": str(d), "limit": 10})
    assert len(r["entries"]) == 10 and r["next"]
    for p, msg in [({"limit": 0}, "limit: expected 1 to 1000"),
                   ({"limit": 1001}, "limit: expected 1 to 1000"),
                   ({"cursor": "abc"}, "cursor: expected"),
                   ({"cursor": 5}, "cursor: expected a string")]:
        e = c.error("files.list", {"path": str(d), **p})
        assert e["code"] == -32602 and msg in e["message"], (p, e)
    e = c.error("files.list", {"path": str(d / "f0001")})
    assert "not a directory" in e["message"]
    os.symlink(str(d), tmp_path / "dlink")
    e = c.error("files.list", {"path": str(tmp_path / "dlink")})
    assert "symbolic link" in e["message"]
    assert len(c.result("files.list", {"path": str(tmp_path / "dlink"), "follow": True,
                                       "limit": 5})["entries"]) == 5


def test_list_names_that_are_not_utf8(c, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    open(os.path.join(os.fsencode(str(d)), b"bad\xffname"), "w").close()
    r = c.result("files.list", {"path": str(d)})
    assert [(e["name"], e.get("lossy")) for e in r["entries"]] == [("bad\ufffdname", True)]


def test_large_read_does_not_stall_other_clients(h, tmp_path):
    """One client reads 64 MiB as fast as it can; another's pings are
    answered all along."""
    f = tmp_path / "big"
    with open(f, "wb") as fh:
        fh.truncate(64 << 20)
    reader = h.client(timeout=60)
    done = threading.Event()
    pings = []

    def pinger():
        p = h.client()
        while not done.is_set():
            t0 = time.monotonic()
            assert p.result("ping") == {}
            pings.append(time.monotonic() - t0)
            time.sleep(0.01)
        p.close()

    t = threading.Thread(target=pinger)
    t.start()
    try:
        off = 0
        while off < (64 << 20):
            r = reader.result("files.read", {"path": str(f), "offset": off})
            off += r["length"]
    finally:
        done.set()
        t.join()
    assert off == 64 << 20
    assert len(pings) >= 5, "pings were not answered while the read ran"


def test_hearthctl_cp_round_trip_100_mib(h, tmp_path):
    src = tmp_path / "src.bin"
    with open(src, "wb") as fh:
        block = os.urandom(1 << 20)
        for i in range(100):
            fh.write(block[i:] + block[:i])
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    guest = tmp_path / "guest" / "copy.bin"
    guest.parent.mkdir()
    env = {**os.environ, "HEARTH_CONNECT": "unix:" + h.sock}
    r = subprocess.run([HEARTHCTL, "cp", str(src), "sandbox:" + str(guest)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert want in r.stdout
    assert hashlib.sha256(guest.read_bytes()).hexdigest() == want
    assert os.listdir(guest.parent) == ["copy.bin"], "temp name left behind"
    back = tmp_path / "back.bin"
    r = subprocess.run([HEARTHCTL, "cp", "sandbox:" + str(guest), str(back)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert want in r.stdout
    assert hashlib.sha256(back.read_bytes()).hexdigest() == want


def test_hearthctl_cp_errors_and_small_files(h, tmp_path):
    env = {**os.environ, "HEARTH_CONNECT": "unix:" + h.sock}

    def cp(*args):
        return subprocess.run([HEARTHCTL, "cp", *args], env=env, capture_output=True, text=True,
                              timeout=60)

    small = tmp_path / "small"
    small.write_bytes(b"tiny\n")
    os.chmod(small, 0o751)
    r = cp(str(small), "sandbox:" + str(tmp_path / "g"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "g").read_bytes() == b"tiny\n"
    assert stat.S_IMODE((tmp_path / "g").stat().st_mode) == 0o751
    # A directory on either side receives the file by its own name.
    (tmp_path / "gd").mkdir()
    assert cp(str(small), "sandbox:" + str(tmp_path / "gd")).returncode == 0
    assert (tmp_path / "gd" / "small").read_bytes() == b"tiny\n"
    (tmp_path / "ld").mkdir()
    r = cp("sandbox:" + str(tmp_path / "gd" / "small"), str(tmp_path / "ld") + "/")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ld" / "small").read_bytes() == b"tiny\n"
    assert stat.S_IMODE((tmp_path / "ld" / "small").stat().st_mode) == 0o751
    assert os.listdir(tmp_path / "ld") == ["small"]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert cp(str(empty), "sandbox:" + str(tmp_path / "ge")).returncode == 0
    assert (tmp_path / "ge").read_bytes() == b""
    # Sizes at the chunk and hash-range boundaries, both ways.
    for size in (CHUNK - 1, CHUNK, CHUNK + 1, 1 << 20, (1 << 20) + 1):
        data = os.urandom(size)
        (tmp_path / "b").write_bytes(data)
        r = cp(str(tmp_path / "b"), "sandbox:" + str(tmp_path / "gb"))
        assert r.returncode == 0 and hashlib.sha256(data).hexdigest() in r.stdout, (size, r.stderr)
        assert (tmp_path / "gb").read_bytes() == data
        (tmp_path / "lb").unlink(missing_ok=True)
        r = cp("sandbox:" + str(tmp_path / "gb"), str(tmp_path / "lb"))
        assert r.returncode == 0, (size, r.stderr)
        assert (tmp_path / "lb").read_bytes() == data
    r = cp(str(small), str(tmp_path / "x"))
    assert r.returncode == 2 and "sandbox:" in r.stderr
    r = cp("sandbox:" + str(tmp_path / "missing"), str(tmp_path / "y"))
    assert r.returncode == 1 and "missing" in r.stderr and not (tmp_path / "y").exists()
    os.mkfifo(tmp_path / "fifo")
    r = cp("sandbox:" + str(tmp_path / "fifo"), str(tmp_path / "y"))
    assert r.returncode == 1 and "a fifo, not a regular file" in r.stderr
    r = cp(str(small), "sandbox:" + str(tmp_path / "nodir" / "g"))
    assert r.returncode == 1 and "nodir" in r.stderr


def test_write_reply_and_ping_share_the_queue(h, tmp_path):
    """Pipelined reads on one connection come back in order, each whole."""
    f = tmp_path / "p"
    data = os.urandom(CHUNK * 4)
    f.write_bytes(data)
    cl = Client(h.sock)
    import json
    reqs = b"".join((json.dumps({"jsonrpc": "2.0", "id": i, "method": "files.read",
                                 "params": {"path": str(f), "offset": i * CHUNK}}) + "\n").encode()
                    for i in range(4))
    cl.send_raw(reqs + b'{"jsonrpc":"2.0","id":99,"method":"ping"}\n')
    got = b""
    for i in range(4):
        m = cl.read_reply()
        assert m["id"] == i
        got += base64.b64decode(m["result"]["data"])
    assert cl.read_reply() == {"jsonrpc": "2.0", "id": 99, "result": {}}
    assert got == data
    cl.close()


def test_hearthctl_cp_reports_a_file_that_changed_meanwhile(h, tmp_path):
    """The guest file is replaced over and over (two versions of the same
    size) while it is copied out: the ranges read and the ranges hashed
    cannot all come from one version, and cp must say so rather than
    leave a mixed copy."""
    gdir = tmp_path / "g"
    gdir.mkdir()
    f = gdir / "moving"
    versions = [os.urandom(8 << 20), os.urandom(8 << 20)]
    f.write_bytes(versions[0])
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            (gdir / ".next").write_bytes(versions[i % 2])
            os.replace(gdir / ".next", f)

    t = threading.Thread(target=writer)
    t.start()
    try:
        env = {**os.environ, "HEARTH_CONNECT": "unix:" + h.sock}
        r = subprocess.run([HEARTHCTL, "cp", "sandbox:" + str(f), str(tmp_path / "out")],
                           env=env, capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        t.join()
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "checksum mismatch" in r.stderr
    assert not (tmp_path / "out").exists()
    assert not [n for n in os.listdir(tmp_path) if "hearthctl-" in n]


def test_hearthctl_cp_shows_progress_on_a_terminal_only(h, tmp_path):
    import pty
    src = tmp_path / "src"
    src.write_bytes(os.urandom(3 << 20))
    env = {**os.environ, "HEARTH_CONNECT": "unix:" + h.sock}
    master, slave = pty.openpty()
    try:
        r = subprocess.run([HEARTHCTL, "cp", str(src), "sandbox:" + str(tmp_path / "g1")], env=env,
                           stdout=subprocess.PIPE, stderr=slave, timeout=60)
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert r.returncode == 0
    assert b"3.0 / 3.0 MiB (100%)" in out
    r = subprocess.run([HEARTHCTL, "cp", str(src), "sandbox:" + str(tmp_path / "g2")], env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stderr == b""


def test_hearthctl_cp_usage_errors_need_no_server(tmp_path):
    """Wrong arguments are reported before anything connects."""
    env = {**os.environ, "HEARTH_CONNECT": "unix:" + str(tmp_path / "none.sock")}
    for args, msg in [(["a"], "needs SRC and DST"),
                      (["a", "b", "c"], "too many arguments"),
                      (["a", "b"], "exactly one of SRC and DST"),
                      (["sandbox:/a", "sandbox:/b"], "exactly one of SRC and DST"),
                      (["sandbox:rel", "b"], "guest path 'rel' is not absolute")]:
        r = subprocess.run([HEARTHCTL, "cp", *args], env=env, capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and msg in r.stderr and "unable to connect" not in r.stderr, (args, r)


def test_hearthctl_cp_lands_with_the_owner_and_mode_asked(h, tmp_path):
    """A copy in chunks (a temp name renamed over the target) lands like a
    copy in one call: over an existing file it keeps that file's owner,
    and --owner / --mode are what the copy gets either way."""
    env = {**os.environ, "HEARTH_CONNECT": "unix:" + h.sock}

    def cp(*args):
        r = subprocess.run([HEARTHCTL, "cp", *args], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r

    def owner_mode(p):
        st = os.stat(p)
        return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)

    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"tiny\n")
    big.write_bytes(os.urandom(CHUNK * 2 + 5))  # three files.write calls
    os.chmod(small, 0o640)
    os.chmod(big, 0o640)
    for src in (small, big):
        target = tmp_path / ("over-" + src.name)
        target.write_bytes(b"old\n")
        os.chown(target, 1000, 1001)
        cp(str(src), "sandbox:" + str(target))
        assert owner_mode(target) == (1000, 1001, 0o640), src.name
        assert target.read_bytes() == src.read_bytes()
        new = tmp_path / ("new-" + src.name)
        cp("--owner", "1234:55", "--mode", "0600", str(src), "sandbox:" + str(new))
        assert owner_mode(new) == (1234, 55, 0o600), src.name
        cp("--owner", "77", str(src), "sandbox:" + str(target))
        assert owner_mode(target) == (77, 77, 0o640), src.name
    assert [n for n in os.listdir(tmp_path) if "hearthctl" in n] == []
    r = subprocess.run([HEARTHCTL, "cp", "--owner", "x", str(small), "sandbox:/tmp/x"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--owner 'x': expected UID or UID:GID" in r.stderr
    r = subprocess.run([HEARTHCTL, "cp", "--mode", "0600", "sandbox:" + str(small),
                        str(tmp_path / "back")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "for a copy into the sandbox" in r.stderr
