"""The envd endpoint (docs/envd.md) driven by E2B's real SDK (the `e2b`
npm package, pinned in scripts/deps.sh, run by e2b_driver.mjs in
hearth's network namespace): commands, background processes, a pty,
files, the user CubeSandbox asks for, the access token; and the bounds
and the route a raw client can try."""
import base64
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import ROOT, SLOW

DRIVER = os.path.join(os.path.dirname(__file__), "e2b_driver.mjs")
SDK = os.path.join(ROOT, "build", "node", "node_modules", "e2b", "dist", "index.mjs")
PORT = 49983


def envd_cfg(**extra):
    cfg = {"listen": f"tcp:127.0.0.1:{PORT}"}
    cfg.update(extra)
    return cfg


def start(hearth, binds=(), **envd):
    # Commands run as `bash -l`, which as root reads this machine's
    # /root/.profile: an empty home of its own in hearth's mount namespace
    # keeps the host's login scripts (a version manager's rehash, with a
    # lock file a killed command leaves behind) out of every figure and
    # timeout here.
    home = hearth.dir / "root-home"
    home.mkdir(exist_ok=True)
    os.chmod(home, 0o755)
    h = hearth.start(hearth.config(envd=envd_cfg(**envd)), binds=[(home, "/root"), *binds])
    subprocess.run(["nsenter", "-t", str(h.pid), "-n", "ip", "link", "set", "lo", "up"], check=True)
    h.wait_for(lambda: h.rpc("status").get("envd", {}).get("state") == "running",
               what="the envd role process")
    wait_health(h)
    return h


def in_netns(h, cmd, timeout=60, **kw):
    return subprocess.run(["nsenter", "-t", str(h.pid), "-n", *cmd], capture_output=True,
                          timeout=timeout * SLOW, **kw)


def drive(h, scenario, version=None, token=None):
    assert os.path.exists(SDK), "the e2b SDK is missing: run scripts/deps.sh --test"
    args = ["node", DRIVER, f"http://127.0.0.1:{PORT}", scenario]
    if version or token:
        args += [version or "", token or ""]
    r = in_netns(h, args, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace") + "\n" + h.log_text()[-3000:]
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def raw(h, request: bytes, timeout=10):
    """Sends request bytes from inside hearth's network namespace and
    returns everything the endpoint answers until it closes."""
    code = ("import socket,sys\n"
            f"s=socket.create_connection(('127.0.0.1',{PORT}),timeout={timeout})\n"
            "s.sendall(sys.stdin.buffer.read())\n"
            "s.shutdown(socket.SHUT_WR)\n"
            "out=b''\n"
            "while True:\n"
            "    b=s.recv(65536)\n"
            "    if not b: break\n"
            "    out+=b\n"
            "sys.stdout.buffer.write(out)\n")
    r = in_netns(h, ["python3", "-c", code], input=request, timeout=timeout + 5)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def wait_health(h):
    deadline = time.monotonic() + 10 * SLOW
    while time.monotonic() < deadline:
        try:
            if raw(h, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                   timeout=2).startswith(b"HTTP/1.1 204"):
                return
        except AssertionError:
            pass
        time.sleep(0.1)
    raise AssertionError("no /health answer:\n" + h.log_text()[-3000:])


def test_envd_commands(hearth):
    h = start(hearth)
    out = drive(h, "commands")
    assert out["run"] == {"exitCode": 0, "stdout": "hello\n", "stderr": "oops\n"}
    assert out["exit"]["error"] == "CommandExitError"
    assert out["exit"]["exitCode"] == 3 and out["exit"]["stdout"] == "partial\n"
    assert out["env"] == "hi there\n"
    assert out["cwd"] == "/tmp\n"
    assert out["user"] == "nobody\n"
    assert out["id"] == "0\n"  # envd.user defaults to root
    assert out["timeout"]["error"] == "TimeoutError", out["timeout"]
    assert out["timeout_ms"] < 10000
    assert out["streamed"] == "line1\nline2\nline3\n"
    assert out["badcmd"]["error"] == "CommandExitError" and out["badcmd"]["exitCode"] == 127
    # Every command went through hearth's exec sessions.
    assert h.rpc("exec.list")["processes"], "no exec session recorded"


def test_envd_background_stdin_kill_list_connect(hearth):
    h = start(hearth)
    out = drive(h, "background")
    pid = out["pid"]
    assert {"pid": pid, "cmd": "/bin/bash", "args": ["-l", "-c", 'read line; echo "got:$line"; sleep 30']} \
        in out["listed"]
    assert "got:ping" in out["stdout"]
    assert out["killed"] is True
    assert out["wait"]["error"] == "CommandExitError" and out["wait"]["exitCode"] == -1
    assert out["wait2"]["error"] == "CommandExitError"
    assert pid not in out["after"]
    assert out["kill_gone"] is False
    assert out["cat"] == "echoed\n"


def test_envd_pty(hearth):
    h = start(hearth)
    out = drive(h, "pty")
    assert "30 100" in out["data"], out
    assert out["wait"]["exitCode"] == 7


def test_envd_files(hearth):
    h = start(hearth)
    out = drive(h, "files")
    assert out["write"] == {"name": "b.txt", "type": "file", "path": "/tmp/e2b/a/b.txt"}
    assert out["read"] == "hello file"
    assert out["bin_len"] == 300000 and out["bin_same"] is True
    assert out["octet"] == "via octet-stream"
    assert [w["path"] for w in out["multi"]] == ["/tmp/e2b/m1", "/tmp/e2b/m2"]
    assert out["m2"] == "two"
    assert out["empty"] == ""
    assert out["exists"] == [True, False]
    assert out["info"] == {"name": "b.txt", "type": "file", "path": "/tmp/e2b/a/b.txt", "size": 10,
                           "permissions": "-rw-r--r--", "owner": "root", "mtime": True}
    assert out["mkdir"] == [True, False]
    assert "dir:/tmp/e2b/a" in out["list1"] and "file:/tmp/e2b/bin" in out["list1"]
    assert "/tmp/e2b/a/b.txt" not in out["list1"]
    assert "/tmp/e2b/a/b.txt" in out["list2"] and "/tmp/e2b/d/e" in out["list2"]
    assert out["rename"] == {"name": "m1", "path": "/tmp/e2b/moved/m1"}
    assert out["moved"] == "one"
    assert out["removed"] is False
    assert out["missing"]["error"] == "FileNotFoundError"
    assert out["readdir"]["error"] == "InvalidArgumentError"
    assert out["listfile"]["error"] == "InvalidArgumentError"
    assert out["statmissing"]["error"] == "FileNotFoundError"
    with open("/tmp/e2b/a/b.txt") as f:
        assert f.read() == "hello file"


def test_envd_watch_dir(hearth):
    """files.watchDir: the events envd sends for a directory (create,
    write, chmod, rename, remove; nothing from a subdirectory), then
    recursive (a file in a subdirectory, a directory created meanwhile
    watched in turn); not_found and invalid_argument as envd answers;
    includeEntry's entries (create, write, chmod; none for a removal);
    the SDK's timeoutMs ends it.
    The watches are added by hearth (envd.watch) to the role process's
    inotify instance."""
    import shutil
    shutil.rmtree("/tmp/w", ignore_errors=True)
    h = start(hearth)
    try:
        out = drive(h, "watch")
    finally:
        shutil.rmtree("/tmp/w", ignore_errors=True)
    flat = out["flat"]
    for want in ["create:f", "write:f", "chmod:f", "rename:f", "create:g", "remove:g"]:
        assert want in flat, (want, flat)
    assert flat.index("create:f") < flat.index("rename:f") < flat.index("create:g") < \
        flat.index("remove:g"), flat
    assert not [e for e in flat if "deep" in e], flat
    assert out["flat_exited"] == "running", out  # stop() is not an error
    tree = out["tree"]
    assert "create:sub/deep2" in tree and "write:sub/deep2" in tree, tree
    assert "create:new" in tree and "create:new/inner" in tree, tree
    assert out["missing"]["error"] == "FileNotFoundError", out["missing"]
    assert out["notdir"]["error"] == "InvalidArgumentError", out["notdir"]
    entry = {e["ev"]: e["entry"] for e in out["entry"]}
    assert entry["write:e"] == {"name": "e", "type": "file", "path": "/tmp/w/e", "size": 5}, entry
    assert "create:e" in entry and entry["remove:e"] is None, entry
    assert out["timeout_exit"] == "TimeoutError", out


def watch_raw(h, path, timeout_ms=1500):
    msg = json.dumps({"path": path}).encode()
    env = bytes([0]) + len(msg).to_bytes(4, "big") + msg
    return raw(h, b"POST /filesystem.Filesystem/WatchDir HTTP/1.1\r\nContent-Type: "
                  b"application/connect+json\r\nConnect-Timeout-Ms: " + str(timeout_ms).encode() +
                  b"\r\nContent-Length: " + str(len(env)).encode() +
                  b"\r\nConnection: close\r\n\r\n" + env, timeout=20)


def http(h, method, path, body=b"", headers=b"", ctype=b"application/json"):
    """One request on its own connection: (status, headers, body)."""
    r = raw(h, method.encode() + b" " + path.encode() + b" HTTP/1.1\r\nContent-Type: " + ctype +
            b"\r\n" + headers + b"Content-Length: " + str(len(body)).encode() +
            b"\r\nConnection: close\r\n\r\n" + body)
    head, _, rest = r.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), rest


def unary(h, method, msg, headers=b""):
    """A Connect unary call of filesystem.Filesystem: (status, JSON answer)."""
    st, _, body = http(h, "POST", "/filesystem.Filesystem/" + method, json.dumps(msg).encode(),
                       headers)
    return st, json.loads(body)


def events(h, wid):
    st, r = unary(h, "GetWatcherEvents", {"watcherId": wid})
    assert st == 200, r
    return [f"{e['type'][11:].lower()}:{e['name']}" for e in r["events"]], r["events"]


def test_envd_polling_watchers(hearth):
    """CreateWatcher / GetWatcherEvents / RemoveWatcher, the watchers the
    Python SDK polls: the events since the last poll (each once), flat and
    recursive, with entries; envd's errors; the bounds on watchers and on
    queued events."""
    import shutil
    shutil.rmtree("/tmp/pw", ignore_errors=True)
    os.makedirs("/tmp/pw/sub")
    h = start(hearth)
    try:
        st, r = unary(h, "CreateWatcher", {"path": "/tmp/pw"})
        assert st == 200 and len(r["watcherId"]) == 32, r
        flat = r["watcherId"]
        st, r = unary(h, "CreateWatcher", {"path": "/tmp/pw", "recursive": True,
                                           "include_entry": True})
        assert st == 200, r
        deep = r["watcherId"]
        with open("/tmp/pw/f", "w") as f:
            f.write("hello")
        os.chmod("/tmp/pw/f", 0o600)
        with open("/tmp/pw/sub/x", "w") as f:
            f.write("x")
        os.rename("/tmp/pw/f", "/tmp/pw/g")
        time.sleep(0.5)
        got, _ = events(h, flat)
        for want in ["create:f", "write:f", "chmod:f", "rename:f", "create:g"]:
            assert want in got, (want, got)
        assert got.index("create:f") < got.index("rename:f") < got.index("create:g"), got
        assert not [e for e in got if "sub/" in e], got
        # Taken once: the next poll has only what came since.
        assert events(h, flat)[0] == []
        got, raw_events = events(h, deep)
        assert "create:sub/x" in got and "write:sub/x" in got, got
        entry = [e.get("entry") for e in raw_events if e["name"] == "sub/x"][-1]
        assert entry["path"] == "/tmp/pw/sub/x" and entry["type"] == "FILE_TYPE_FILE", entry
        # A directory made later is watched too (recursive).
        os.makedirs("/tmp/pw/new")
        time.sleep(0.3)
        open("/tmp/pw/new/inner", "w").close()
        time.sleep(0.5)
        got, _ = events(h, deep)
        assert "create:new" in got and "create:new/inner" in got, got
        # Removed: gone for good.
        st, r = unary(h, "RemoveWatcher", {"watcher_id": deep})
        assert (st, r) == (200, {}), r
        st, r = unary(h, "GetWatcherEvents", {"watcherId": deep})
        assert st == 404 and r["code"] == "not_found", r
        st, r = unary(h, "RemoveWatcher", {"watcherId": "nope"})
        assert st == 404 and r["code"] == "not_found", r
        # envd's answers for a path that is missing or not a directory.
        st, r = unary(h, "CreateWatcher", {"path": "/tmp/pw/none"})
        assert st == 404 and r["code"] == "not_found", r
        st, r = unary(h, "CreateWatcher", {"path": "/tmp/pw/g"})
        assert st == 400 and r["code"] == "invalid_argument", r
        # At most 32 watchers at once.
        ids = [flat]
        for _ in range(31):
            st, r = unary(h, "CreateWatcher", {"path": "/tmp/pw"})
            assert st == 200, r
            ids.append(r["watcherId"])
        st, r = unary(h, "CreateWatcher", {"path": "/tmp/pw"})
        assert st == 429 and r["code"] == "resource_exhausted" and "32 watchers" in r["message"], r
        for wid in ids[1:]:
            assert unary(h, "RemoveWatcher", {"watcherId": wid})[0] == 200
        # More than 4096 queued events: the watcher stops, its next poll
        # says so once, then it is gone.
        for i in range(2100):
            with open(f"/tmp/pw/n{i}", "w") as f:
                f.write("y")
        time.sleep(1)
        st, r = unary(h, "GetWatcherEvents", {"watcherId": flat})
        assert st == 429 and r["code"] == "resource_exhausted" and "were lost" in r["message"], r
        st, r = unary(h, "GetWatcherEvents", {"watcherId": flat})
        assert st == 404, r
    finally:
        shutil.rmtree("/tmp/pw", ignore_errors=True)


def test_envd_unpolled_watcher_expires(hearth):
    """Polling keeps a watcher; one left unpolled past
    envd.watcher_idle_ms (2 s here) is removed, its events with it."""
    h = start(hearth, watcher_idle_ms=2000)
    kept = unary(h, "CreateWatcher", {"path": "/tmp"})[1]["watcherId"]
    left = unary(h, "CreateWatcher", {"path": "/tmp"})[1]["watcherId"]
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4:
        time.sleep(0.5)
        assert unary(h, "GetWatcherEvents", {"watcherId": kept})[0] == 200
    st, r = unary(h, "GetWatcherEvents", {"watcherId": left})
    assert st == 404 and r["code"] == "not_found" and "2000 ms" in r["message"], r
    assert unary(h, "GetWatcherEvents", {"watcherId": kept})[0] == 200


def test_envd_watch_on_a_share_is_added_from_a_child(hearth, tmp_path):
    """A directory that may be on a share is watched from a child process
    (like any files.* call there), which keeps the role's inotify
    instance for the call: the watch comes back and the stream starts
    (its Connect-Timeout-Ms then ends it). A share that stops answering
    ends the stream with files.timeout_ms's error, and hearth answers
    everyone meanwhile."""
    import fusefs
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    mnt = tmp_path / "share"
    mnt.mkdir()
    h = hearth.start(hearth.config(envd=envd_cfg(), files={"timeout_ms": 1500}))
    subprocess.run(["nsenter", "-t", str(h.pid), "-n", "ip", "link", "set", "lo", "up"], check=True)
    h.wait_for(lambda: h.rpc("status").get("envd", {}).get("state") == "running",
               what="the envd role process")
    wait_health(h)
    fs = fusefs.FuseServer({"small": b"x"})
    fs.mount(h.pid, str(mnt))
    try:
        r = watch_raw(h, str(mnt))
        assert b'{"start":{}}' in r, r
        assert b'"code":"deadline_exceeded"' in r, r
        fs.pause()
        t0 = time.monotonic()
        r = watch_raw(h, f"{mnt}/nothing")
        took = time.monotonic() - t0
        assert b'{"start":{}}' not in r and b"files.timeout_ms" in r, r
        assert 1.4 < took < 10, took
        assert h.rpc("ping") == {}
    finally:
        fs.close()


def test_envd_watch_is_the_role_process_own(hearth):
    """envd.watch adds to the role process's inotify instance: nobody
    else may call it, and its path rules are files.stat's."""
    h = start(hearth)
    c = h.client()
    err = c.error("envd.watch", {"path": "/tmp", "follow": True})
    c.close()
    assert err["code"] == -32601 and "only the envd role process" in err["message"], err


def test_envd_cube_user_alias(hearth, tmp_path):
    """As the SDK talks to CubeSandbox (envd 0.2.0): every call names the
    user "user", which envd.users maps to an account of the image (here
    one a test passwd adds, with its home in the test's directory)."""
    import pathlib
    import shutil
    import tempfile
    home = pathlib.Path(tempfile.mkdtemp(prefix="envd-home-"))  # reachable by uid 4242
    request_cleanup = shutil.rmtree
    os.chown(home, 4242, 4242)
    passwd = tmp_path / "passwd"
    passwd.write_text(open("/etc/passwd").read() + f"agent:x:4242:4242::{home}:/bin/sh\n")
    h = start(hearth, binds=[(passwd, "/etc/passwd")], users={"user": "agent"}, user="root")
    out = drive(h, "cube", version="0.2.0")
    assert out["whoami"] == "agent\n"
    assert out["write"] == {"name": "cube.txt", "type": "file", "path": f"{home}/cube.txt"}
    assert out["read"] == "in the home"
    assert out["info"] == "agent"
    st = os.stat(home / "cube.txt")
    assert (st.st_uid, st.st_gid) == (4242, 4242)
    request_cleanup(home)


def test_envd_access_token(hearth):
    h = start(hearth, access_token="s3cret-token-1")
    # /health needs none; everything else does.
    assert raw(h, b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 204")
    out = drive(h, "token")
    assert out["run"]["error"] == "AuthenticationError"
    assert out["read"]["error"] == "AuthenticationError", out
    out = drive(h, "token", version="99.99.99", token="s3cret-token-1")
    assert out["run"]["value"]["stdout"] == "ok\n"
    # The host sets another in sandbox.init; the old one stops working.
    r = h.rpc("sandbox.init", {"envd": {"access_token": "another-token-2"}})
    assert r["envd"] == "access_token set"
    out = drive(h, "token", version="99.99.99", token="s3cret-token-1")
    assert out["run"]["error"] == "AuthenticationError"
    out = drive(h, "token", version="99.99.99", token="another-token-2")
    assert out["run"]["value"]["stdout"] == "ok\n"
    # Never shown: config.get and status.
    cfg = h.rpc("config.get")
    assert cfg["envd"]["access_token"] == "<redacted>"
    assert h.rpc("status")["envd"]["access_token"] is True


def test_envd_bounds_and_raw_routes(hearth):
    h = start(hearth, max_header_bytes=2048, max_upload_bytes=1000)
    big = b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 4000 + b"\r\n\r\n"
    assert raw(h, big).startswith(b"HTTP/1.1 431")
    assert raw(h, b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 404")
    assert raw(h, b"BREW / HTTP/2.0\r\n\r\n").startswith(b"HTTP/1.1 505")
    # An upload over envd.max_upload_bytes.
    body = b"x" * 5000
    r = raw(h, b"POST /files?path=/tmp/big HTTP/1.1\r\nContent-Type: application/octet-stream\r\n"
               b"Content-Length: 5000\r\n\r\n" + body)
    assert r.startswith(b"HTTP/1.1 413"), r[:200]
    assert not os.path.exists("/tmp/big")
    # A method hearth does not cover: Connect's unimplemented.
    r = raw(h, b"POST /filesystem.Filesystem/Nothing HTTP/1.1\r\nContent-Type: "
               b"application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    assert r.startswith(b"HTTP/1.1 501") and b'"code":"unimplemented"' in r
    # A stream with keepalives every second (Keepalive-Ping-Interval).
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 2.5; echo done"]}}).encode()
    env = bytes([0]) + len(msg).to_bytes(4, "big") + msg
    r = raw(h, b"POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
               b"Keepalive-Ping-Interval: 1\r\nContent-Length: " + str(len(env)).encode() +
               b"\r\nConnection: close\r\n\r\n" + env, timeout=20)
    assert r.count(b'"keepalive"') >= 2, r
    assert base64.b64encode(b"done\n") in r
    assert b'"end":{"exited":true,"status":"exit status 0"}' in r


def test_envd_cwd_and_stream_and_connection_limits(hearth):
    """envd.cwd is where a command that names no directory runs;
    envd.max_streams and envd.max_connections bound what a client holds."""
    h = start(hearth, cwd="/tmp", max_streams=1, max_connections=2)
    out = drive(h, "token")
    assert out["run"]["value"]["stdout"] == "ok\n"
    msg = json.dumps({"process": {"cmd": "/bin/pwd"}}).encode()
    env = bytes([0]) + len(msg).to_bytes(4, "big") + msg
    start_req = (b"POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
                 b"Content-Length: " + str(len(env)).encode() + b"\r\nConnection: close\r\n\r\n" + env)
    assert base64.b64encode(b"/tmp\n") in raw(h, start_req)
    # One stream open (a process that waits): a second one is refused.
    sleep = json.dumps({"process": {"cmd": "/bin/sleep", "args": ["5"]}}).encode()
    senv = bytes([0]) + len(sleep).to_bytes(4, "big") + sleep
    sleep_req = (b"POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
                 b"Content-Length: " + str(len(senv)).encode() + b"\r\n\r\n" + senv)
    code = ("import socket,sys,time\n"
            "first,second=sys.stdin.buffer.read().split(b'@@')\n"
            f"a=socket.create_connection(('127.0.0.1',{PORT}),timeout=10)\n"
            "a.sendall(first)\n"
            "a.recv(100)\n"
            f"b=socket.create_connection(('127.0.0.1',{PORT}),timeout=10)\n"
            "b.sendall(second)\n"
            "out=b''\n"
            "while True:\n"
            "    x=b.recv(65536)\n"
            "    if not x: break\n"
            "    out+=x\n"
            f"c=socket.create_connection(('127.0.0.1',{PORT}),timeout=10)\n"
            f"d=socket.create_connection(('127.0.0.1',{PORT}),timeout=10)\n"
            "third=d.recv(200)\n"
            "sys.stdout.buffer.write(out+b'@@'+third)\n")
    r = in_netns(h, ["python3", "-c", code], input=sleep_req + b"@@" + start_req, timeout=30)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    second, third = r.stdout.split(b"@@")
    assert b"resource_exhausted" in second and b"envd.max_streams" in second, second
    assert third.startswith(b"HTTP/1.1 503"), third


def test_envd_start_whose_client_left_is_listed(hearth):
    """A client that resets its connection right after a Start leaves a
    process that runs all the same: List shows it, SendSignal ends it."""
    h = start(hearth)
    msg = json.dumps({"process": {"cmd": "/bin/sleep", "args": ["30.5"]}, "tag": "left"}).encode()
    env = bytes([0]) + len(msg).to_bytes(4, "big") + msg
    req = (b"POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
           b"Content-Length: " + str(len(env)).encode() + b"\r\n\r\n" + env)
    code = ("import socket,struct,sys\n"
            f"s=socket.create_connection(('127.0.0.1',{PORT}),timeout=10)\n"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_LINGER,struct.pack('ii',1,0))\n"
            "s.sendall(sys.stdin.buffer.read())\n"
            "s.close()\n")
    r = in_netns(h, ["python3", "-c", code], input=req)
    assert r.returncode == 0, r.stderr

    def listed():
        body = raw(h, b"POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
        procs = json.loads(body.split(b"\r\n\r\n", 1)[1])["processes"]
        return [p for p in procs if p.get("tag") == "left"]
    got = h.wait_for(listed, what="the process in List")
    assert got[0]["config"]["args"] == ["30.5"], got
    sig = json.dumps({"process": {"tag": "left"}, "signal": "SIGNAL_SIGKILL"}).encode()
    r = raw(h, b"POST /process.Process/SendSignal HTTP/1.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + str(len(sig)).encode() + b"\r\nConnection: close\r\n\r\n" + sig)
    assert r.startswith(b"HTTP/1.1 200"), r
    h.wait_for(lambda: not listed(), what="the process gone from List")


STREAM_INPUT_CLIENT = r"""
import base64, json, socket, sys
PORT = int(sys.argv[1])
CRLF = b"\r\n"


def env(obj, flags=0):
    b = json.dumps(obj).encode()
    return bytes([flags]) + len(b).to_bytes(4, "big") + b


def frames(data):
    # the envelopes of a chunked connect+json body, as [flags, JSON]
    body = data.split(CRLF + CRLF, 1)[1]
    raw, out = b"", []
    while body:
        size, rest = body.split(CRLF, 1)
        n = int(size, 16)
        raw, body = raw + rest[:n], rest[n + 2:]
        if n == 0:
            break
    while raw:
        n = int.from_bytes(raw[1:5], "big")
        out.append([raw[0], json.loads(raw[5:5 + n])])
        raw = raw[5 + n:]
    return out


def readall(s):
    out = b""
    while True:
        x = s.recv(65536)
        if not x:
            return out
        out += x


def chunk(b):
    return b"%x" % len(b) + CRLF + b + CRLF


def stream_input(msgs):
    b = socket.create_connection(("127.0.0.1", PORT), timeout=20)
    b.sendall(b"POST /process.Process/StreamInput HTTP/1.1" + CRLF +
              b"Content-Type: application/connect+json" + CRLF +
              b"Transfer-Encoding: chunked" + CRLF + b"Connection: close" + CRLF + CRLF)
    for m in msgs:
        b.sendall(chunk(env(m)))
    b.sendall(b"0" + CRLF + CRLF)
    return readall(b)


start = env({"process": {"cmd": "/bin/sh", "args": ["-c", "head -c 12; echo; echo done"]},
             "stdin": True, "tag": "sin"})
a = socket.create_connection(("127.0.0.1", PORT), timeout=20)
a.sendall(b"POST /process.Process/Start HTTP/1.1" + CRLF +
          b"Content-Type: application/connect+json" + CRLF +
          b"Content-Length: %d" % len(start) + CRLF + b"Connection: close" + CRLF + CRLF + start)
first = a.recv(65536)
assert b'"start"' in first, first
ok = stream_input([{"start": {"process": {"tag": "sin"}}},
                   {"data": {"input": {"stdin": base64.b64encode(b"hello ").decode()}}},
                   {"keepalive": {}},
                   {"data": {"input": {"stdin": base64.b64encode(b"world!").decode()}}}])
rest = readall(a)
out = b"".join(base64.b64decode(f[1]["event"]["data"]["stdout"]) for f in frames(first + rest)
               if "data" in f[1].get("event", {}))
missing = stream_input([{"start": {"process": {"tag": "nobody-has-this"}}}])
print(json.dumps({"ok": frames(ok), "out": out.decode(), "missing": frames(missing)}))
"""


def test_envd_stream_input(hearth):
    """process.Process/StreamInput, a client stream (no SDK call of 2.51.0
    sends it; envd's own clients do): a chunked body of envelopes, start
    (the process by tag), input, a keepalive, more input, each passed to
    exec.input as it comes; the end of the body is the answer {} and the
    end-stream frame. A process that is not there is not_found."""
    h = start(hearth)
    r = in_netns(h, ["python3", "-c", STREAM_INPUT_CLIENT, str(PORT)], timeout=30)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = json.loads(r.stdout)
    assert got["ok"] == [[0, {}], [2, {}]], got
    assert got["out"] == "hello world!\ndone\n", got
    assert got["missing"][-1][0] == 2 and got["missing"][-1][1]["error"]["code"] == "not_found", got


def envelope(obj):
    b = json.dumps(obj).encode()
    return bytes([0]) + len(b).to_bytes(4, "big") + b


def stdout_of(r):
    """The stdout of a Start stream's answer (base64 data events)."""
    head, _, body = r.partition(b"\r\n\r\n")
    data = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        data, body = data + rest[:n], rest[n + 2:]
    out = b""
    while data:
        n = int.from_bytes(data[1:5], "big")
        m = json.loads(data[5:5 + n])
        data = data[5 + n:]
        out += base64.b64decode(m.get("event", {}).get("data", {}).get("stdout", ""))
    return out.decode()


def run_sh(h, script, token=b""):
    """A command through a raw Start stream: its stdout."""
    msg = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", script]}})
    r = raw(h, b"POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json"
               b"\r\n" + token + b"Content-Length: " + str(len(msg)).encode() +
               b"\r\nConnection: close\r\n\r\n" + msg, timeout=20)
    return stdout_of(r)


def test_envd_init_and_envs(hearth):
    """envd's POST /init: envVars (every process gets them, GET /envs
    shows them), defaultUser, defaultWorkdir; bad values are 400. The
    token rule: /init may set a token when none is set; once one is, it
    must be presented (X-Access-Token, or as the body's accessToken, as
    envd takes it) to change anything, a new one included; an empty one
    clears nothing. What /init set survives the role process's restart."""
    h = start(hearth)
    assert http(h, "GET", "/envs")[::2] == (200, b"{}")
    body = {"envVars": {"FOO": "bar", "E2B_SANDBOX": "true"}, "defaultUser": "nobody",
            "defaultWorkdir": "/tmp", "timestamp": "2026-01-01T00:00:00Z",
            "hyperloopIP": "10.0.0.9", "volumeMounts": []}
    st, _, r = http(h, "POST", "/init", json.dumps(body).encode())
    assert st == 204, r
    st, _, r = http(h, "GET", "/envs")
    assert st == 200 and json.loads(r) == {"FOO": "bar", "E2B_SANDBOX": "true"}, r
    assert run_sh(h, 'echo "$FOO"; id -un; pwd') == "bar\nnobody\n/tmp\n"
    # A call's own variables win over /init's.
    msg = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "echo $FOO"],
                                "envs": {"FOO": "own"}}})
    r = raw(h, b"POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json"
               b"\r\nContent-Length: " + str(len(msg)).encode() + b"\r\nConnection: close\r\n\r\n" +
            msg, timeout=20)
    assert stdout_of(r) == "own\n", r
    for bad in [{"defaultUser": "no-such-user"}, {"defaultWorkdir": "relative"},
                {"envVars": {"A=B": "x"}}, {"envVars": {"A": 1}}, {"accessToken": "has blank"}]:
        st, _, r = http(h, "POST", "/init", json.dumps(bad).encode())
        assert st == 400, (bad, r)
    assert http(h, "POST", "/init", b"not json")[0] == 400
    assert http(h, "GET", "/init")[0] == 405
    assert http(h, "POST", "/envs")[0] == 405
    # The first token: no token was set, so none is needed.
    assert http(h, "POST", "/init", b'{"accessToken":"tok-1"}')[0] == 204
    assert h.rpc("status")["envd"]["access_token"] is True
    assert http(h, "GET", "/envs")[0] == 401
    one = b"X-Access-Token: tok-1\r\n"
    assert http(h, "GET", "/envs", headers=one)[0] == 200
    # Not replaced without presenting it; an empty body changes nothing.
    assert http(h, "POST", "/init", b'{"accessToken":"tok-2"}')[0] == 401
    assert http(h, "POST", "/init", b'{"envVars":{"X":"1"}}')[0] == 401
    assert http(h, "POST", "/init", b'{"accessToken":"tok-2"}',
                headers=b"X-Access-Token: wrong\r\n")[0] == 401
    # envd's way: the token in force in the body.
    st, _, r = http(h, "POST", "/init", b'{"accessToken":"tok-1","envVars":{"X":"1"}}')
    assert st == 204, r
    assert json.loads(http(h, "GET", "/envs", headers=one)[2])["X"] == "1"
    # Presented in the header, a new one replaces it; "" clears nothing.
    assert http(h, "POST", "/init", b'{"accessToken":"tok-2"}', headers=one)[0] == 204
    two = b"X-Access-Token: tok-2\r\n"
    assert http(h, "GET", "/envs", headers=one)[0] == 401
    assert http(h, "POST", "/init", b'{"accessToken":""}', headers=two)[0] == 204
    assert http(h, "GET", "/envs")[0] == 401
    # hearth keeps it all: a role process started again has it.
    pid = h.host_pid(h.rpc("status")["envd"]["pid"])
    os.kill(pid, 9)
    h.wait_for(lambda: h.rpc("status")["envd"]["restarts"] == 1 and
               h.rpc("status")["envd"]["state"] == "running", what="a restarted role process")
    wait_health(h)
    assert http(h, "GET", "/envs")[0] == 401
    st, _, r = http(h, "GET", "/envs", headers=two)
    assert st == 200 and json.loads(r) == {"FOO": "bar", "E2B_SANDBOX": "true", "X": "1"}, r
    assert run_sh(h, 'echo "$FOO"; id -un; pwd', token=two) == "bar\nnobody\n/tmp\n"
    # envd.init is the role's own.
    c = h.client()
    err = c.error("envd.init", {})
    c.close()
    assert err["code"] == -32601 and "only the envd role process" in err["message"], err


def test_envd_metrics(hearth):
    """GET /metrics in envd's shape: the machine's CPU count and busy
    share (/proc/stat), memory (/proc/meminfo: used is total less
    available) and the root filesystem's size and use (statvfs, from a
    child of the role process); the token rule applies."""
    h = start(hearth, access_token="m-tok")
    assert http(h, "GET", "/metrics")[0] == 401
    tok = b"X-Access-Token: m-tok\r\n"
    st, _, r = http(h, "GET", "/metrics", headers=tok)
    assert st == 200, r
    m = json.loads(r)
    assert set(m) == {"ts", "cpu_count", "cpu_used_pct", "mem_total", "mem_used", "mem_total_mib",
                      "mem_used_mib", "disk_used", "disk_total"}, m
    assert abs(m["ts"] - time.time()) < 5
    assert m["cpu_count"] == len(os.sched_getaffinity(0)) or m["cpu_count"] >= 1
    assert 0 <= m["cpu_used_pct"] <= 100
    with open("/proc/meminfo") as f:
        total = int(f.read().split("MemTotal:")[1].split()[0]) * 1024
    assert m["mem_total"] == total and 0 < m["mem_used"] < total
    assert m["mem_total_mib"] == total >> 20
    vfs = os.statvfs("/")
    assert m["disk_total"] == vfs.f_blocks * vfs.f_frsize, m
    assert 0 < m["disk_used"] <= m["disk_total"]
    # Several at once share one probe; each gets its answer.
    outs = [http(h, "GET", "/metrics", headers=tok)[0] for _ in range(3)]
    assert outs == [200, 200, 200]
    # The statvfs children are gone, none left as a zombie.
    role = h.host_pid(h.rpc("status")["envd"]["pid"])

    def children():
        kids = []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(st[1]) == role:
                kids.append((d, st[0]))
        return kids
    h.wait_for(lambda: not children(), what="no child of the role process")


def test_envd_role_process_is_unprivileged_and_restarted(hearth):
    h = start(hearth)
    st = h.rpc("status")["envd"]
    assert st["listen"] == f"tcp:127.0.0.1:{PORT}"
    pid = h.host_pid(st["pid"])
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    assert "\nUid:\t65534\t65534\t65534\t65534" in status
    assert "\nCapEff:\t0000000000000000" in status
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[0] == b"hearth-envd"
    os.kill(pid, 9)
    h.wait_for(lambda: h.rpc("status")["envd"]["restarts"] == 1 and
               h.rpc("status")["envd"]["state"] == "running", what="a restarted role process")
    wait_health(h)
    out = drive(h, "token")
    assert out["run"]["value"]["stdout"] == "ok\n"


def test_envd_config_errors(hearth, tmp_path):
    import subprocess as sp
    from conftest import HEARTH
    bad = tmp_path / "bad.json"
    for envd, want in [({"listen": "tcp:nowhere:1"}, "envd.listen"),
                       ({"access_token": "has space"}, "envd.access_token"),
                       ({"users": {"bad/name": "root"}}, "envd.users"),
                       ({"max_streams": 0}, "envd.max_streams"),
                       ({"max_header_bytes": 10}, "envd.max_header_bytes"),
                       ({"max_connections": 5000}, "envd.max_connections"),
                       ({"cwd": "relative"}, "envd.cwd"),
                       ({"user": ""}, "envd.user")]:
        bad.write_text(json.dumps({"envd": envd}))
        r = sp.run([HEARTH, "--check-config", str(bad)], capture_output=True, text=True)
        assert r.returncode == 1 and want in r.stderr, (envd, r.stderr)
