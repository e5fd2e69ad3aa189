"""The envd endpoint of the shipped OCI image (rootfs/oci/hearth.json:
`envd` on TCP 49983, the SDK's user `user` mapped to `hermes`), reached
from outside the container by E2B's real SDK through a port podman
publishes on the host's loopback only, and closed to what runs inside
(the default `egress.deny_local_ports`): the agent, and a default root
service."""
import json
import os
import random
import socket
import subprocess
import time

from conftest import ROOT, podman, wait_until

DRIVER = os.path.join(ROOT, "tests", "integration", "e2b_driver.mjs")
SDK = os.path.join(ROOT, "build", "node", "node_modules", "e2b", "dist", "index.mjs")
SHIPPED = os.path.join(ROOT, "rootfs", "oci", "hearth.json")


def free_port():
    for _ in range(50):
        port = random.randrange(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port on 127.0.0.1")


def drive(url, scenario, version=None):
    assert os.path.exists(SDK), "the e2b SDK is missing: run scripts/deps.sh --test"
    args = ["node", DRIVER, url, scenario] + ([version, ""] if version else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def health(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(100).startswith(b"HTTP/1.1 204")
    except OSError:
        return False


def agent_connects(c, *targets):
    """The stand-in agent's own connect(2) to each (ADDR, PORT), through
    its test hook on 127.0.0.1:9119: "ok", "refused", "timeout"..."""
    lines = "".join(f"connect {a} {p}\n" for a, p in targets)
    r = c.exec("sh", "-c", f"printf '{lines}' | timeout 20 nc 127.0.0.1 9119")
    return [l.split()[0] for l in r.stdout.splitlines() if l.strip()]


def volumes(tmp_path):
    """The home and workspace the shipped config waits for (its platform
    mounts), as -v volumes of fresh host directories."""
    home, ws = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    ws.mkdir()
    return ["-v", f"{home}:/root/.hermes", "-v", f"{ws}:/workspace"]


def test_the_sdk_reaches_the_shipped_image_from_outside_and_the_agent_cannot(run, tmp_path):
    port = free_port()
    c = run(caps=["NET_ADMIN"], network="bridge",
            args=["-p", f"127.0.0.1:{port}:49983"] + volumes(tmp_path))
    wait_until(lambda: c.service("hermes")["state"] == "running", 60, "the agent running")
    st = c.ctl("status")["envd"]
    assert st["listen"] == "tcp:0.0.0.0:49983" and st["state"] == "running", st
    gateway = c.inspect("{{.NetworkSettings.Gateway}}")
    address = c.inspect("{{.NetworkSettings.IPAddress}}")
    assert gateway and address, (gateway, address)
    # The platform's side of a published port is the bridge's gateway, a
    # private address the shipped policy does not allow: its connections
    # are answered all the same (the answers to connections from outside),
    # with the shipped config as it is.
    eg = c.ctl("egress")
    assert eg["applied"] is True and eg["layers"]["replies"] is True, eg
    assert gateway + "/32" not in eg["policy"]["allowOut"], eg["policy"]
    wait_until(lambda: health(port), 30, "GET /health through the published port")

    url = f"http://127.0.0.1:{port}"
    # As the SDK talks to CubeSandbox (envd 0.2.0): every call names the
    # user "user", which the image maps to the agent's account.
    out = drive(url, "cube", version="0.2.0")
    assert out["whoami"] == "hermes\n", out
    assert out["write"] == {"name": "cube.txt", "type": "file", "path": "/root/.hermes/cube.txt"}, out
    assert out["read"] == "in the home" and out["info"] == "hermes", out
    assert c.exec("stat", "-c", "%U:%G %a", "/root/.hermes/cube.txt").stdout.split() == \
        ["hermes:hermes", "644"]
    assert c.exec("cat", "/root/.hermes/cube.txt").stdout == "in the home"
    # As Sandbox.create({debug: true}) makes it: no user named, envd.user.
    out = drive(url, "token")
    assert out["run"]["value"]["stdout"] == "ok\n", out
    assert out["get"]["value"] == "x", out

    # Inside, the agent (the image's own service, as hermes) is refused
    # on the loopback and on the container's own address; the positive
    # control is a port the same agent reaches (web-ui's).
    assert agent_connects(c, ("127.0.0.1", 49983), (address, 49983), ("127.0.0.1", 9000)) == \
        ["refused", "refused", "ok"]
    # Nor can it open anything of its own to the gateway whose
    # connections it answers: refused by egress's reset (a closed port of
    # the host's would answer "refused" too; the rule's counter tells).
    denied = c.ctl("egress")["counters"]["deny4-tcp"]["packets"]
    assert agent_connects(c, (gateway, 80)) == ["refused"]
    assert c.ctl("egress")["counters"]["deny4-tcp"]["packets"] == denied + 1
    # The endpoint is still up for the outside, through the replies rules.
    assert health(port)
    counters = c.ctl("egress")["counters"]
    assert counters["replies"]["packets"] > 0 and counters["netdev"]["replies"]["packets"] > 0, \
        counters


def test_a_default_root_service_in_the_shipped_config_cannot_reach_the_endpoint(run, tmp_path):
    """The shipped config plus one default service (root, contained)
    that tries the endpoint at the loopback and at the container's
    address, then a port that is open (the web UI's), and says what it
    got."""
    cfg = json.load(open(SHIPPED))
    probe = ("a=$(ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1); "
             "for t in 127.0.0.1:49983 $a:49983 127.0.0.1:9000; do "
             "  r=$(printf 'GET /health HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc ${t%:*} ${t#*:} 2>&1 | head -n 1); "
             "  echo \"probe-result $t $(id -u) $r\"; "
             "done; exec sleep 86400")
    cfg["services"].append({"name": "probe", "argv": ["sh", "-c", probe],
                            "after": ["egress", "web-ui"]})
    c = run(config=cfg, caps=["NET_ADMIN"], network="bridge", args=volumes(tmp_path))
    address = c.inspect("{{.NetworkSettings.IPAddress}}")

    def results():
        got = [l.split("probe-result ", 1)[1] for l in c.logs().splitlines() if "probe-result " in l]
        return got if len(got) == 3 else None
    got = wait_until(results, 60, "the probe's three results")
    assert got[0].startswith("127.0.0.1:49983 0 ") and "refused" in got[0], got
    assert got[1].startswith(f"{address}:49983 0 ") and "refused" in got[1], got
    assert got[2].startswith("127.0.0.1:9000 0 ") and "HTTP/1." in got[2], got
    assert c.service("probe")["state"] == "running"
    assert c.service("probe")["containment"] in ("userns", "full")
