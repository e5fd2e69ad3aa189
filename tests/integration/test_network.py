"""Guest network setup over rtnetlink: hearth as PID 1 in a netns made
here configures a veth found by name or by MAC, waits for a hot-plugged
one, writes resolv.conf, and diagnoses with network.check."""
import json
import os
import subprocess
import time
import uuid

import pytest


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


class Pair:
    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.tag = tag
        self.guest, self.peer = "egG" + tag, "egP" + tag
        sh("ip", "netns", "add", self.guest)
        sh("ip", "netns", "add", self.peer)

    def veth(self, guest_name, mac=None):
        """A veth pair: guest_name in the guest netns, peer end up with
        172.31.9.2/24 in the peer netns."""
        peer = "eq" + self.tag
        extra = ["address", mac] if mac else []
        sh("ip", "link", "add", guest_name, *extra, "netns", self.guest, "type", "veth",
           "peer", "name", peer, "netns", self.peer)
        sh("ip", "-n", self.peer, "addr", "add", "172.31.9.2/24", "dev", peer)
        sh("ip", "-n", self.peer, "link", "set", peer, "up")

    def link(self, name):
        return json.loads(sh("ip", "-n", self.guest, "-j", "addr", "show", "dev", name))[0]

    def default_route(self):
        return json.loads(sh("ip", "-n", self.guest, "-j", "route", "show", "default"))

    def close(self):
        for ns in (self.guest, self.peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def pair():
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    p = Pair()
    yield p
    p.close()


def net_cfg(tmp_path, **iface):
    base = {"address": "172.31.9.1/24", "gateway": "172.31.9.2", "mtu": 1400}
    base.update(iface)
    return {"interfaces": [base], "dns": ["192.0.2.53", "2001:db8::53"],
            "resolv_conf": str(tmp_path / "resolv.conf")}


def test_interface_by_name(hearth, pair, tmp_path):
    pair.veth("egn" + pair.tag)
    name = "egn" + pair.tag
    hearth.start(hearth.config(network=net_cfg(tmp_path, name=name)), netns=pair.guest)
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "up",
                    what="interface up")
    link = pair.link(name)
    assert link["mtu"] == 1400 and "UP" in link["flags"]
    assert any(a["local"] == "172.31.9.1" and a["prefixlen"] == 24 for a in link["addr_info"])
    routes = pair.default_route()
    assert routes and routes[0]["gateway"] == "172.31.9.2" and routes[0]["dev"] == name
    assert (tmp_path / "resolv.conf").read_text() == \
        "nameserver 192.0.2.53\nnameserver 2001:db8::53\n"
    assert hearth.rpc("status")["phases"]["network"] is True
    # The first check sends the probe; the peer answers ARP soon after.
    chk = hearth.rpc("network.check")["interfaces"][0]
    assert chk["link_up"] and chk["carrier"] and chk["address_present"] and chk["default_route"]
    assert chk["mtu_now"] == 1400
    hearth.wait_for(lambda: hearth.rpc("network.check")["interfaces"][0]["gateway_neighbour"]
                    in ("reachable", "stale", "delay"), what="gateway neighbour")


def test_hearthctl_network_check(hearth, pair, tmp_path):
    from conftest import HEARTHCTL
    name = "egc" + pair.tag
    pair.veth(name)
    hearth.start(hearth.config(network=net_cfg(tmp_path, name=name)), netns=pair.guest)
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "up",
                    what="interface up")
    r = subprocess.run([HEARTHCTL, "--connect", "unix:" + hearth.sock, "--json", "network",
                        "check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    i = json.loads(r.stdout)["interfaces"][0]
    assert i["name"] == name and i["carrier"] is True and i["default_route"] is True


def test_interface_by_mac_is_renamed(hearth, pair, tmp_path):
    mac = "02:00:5e:10:20:30"
    pair.veth("egm" + pair.tag, mac=mac)
    hearth.start(hearth.config(network=net_cfg(tmp_path, name="eth7", mac=mac)),
                 netns=pair.guest)
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "up",
                    what="interface up")
    link = pair.link("eth7")
    assert link["address"] == mac and link["mtu"] == 1400
    assert any(a["local"] == "172.31.9.1" for a in link["addr_info"])


def switches(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_hotplug_waits_and_holds_services(hearth, pair, tmp_path):
    name = "egh" + pair.tag
    svc = {"name": "web", "argv": ["sleep", "1000"], "after": ["network"]}
    hearth.start(hearth.config(services=[svc], network=net_cfg(tmp_path, name=name,
                                                               timeout_ms=20000)),
                 netns=pair.guest)
    assert hearth.rpc("network.get")["interfaces"][0]["state"] == "waiting"
    assert hearth.rpc("status")["phases"]["network"] is False
    assert hearth.service("web")["state"] != "running"
    # Waiting is driven by the kernel's link notifications, not a poll:
    # with nothing plugged in and no requests, hearth stays asleep.
    before = switches(hearth.pid)
    time.sleep(1.0)
    assert switches(hearth.pid) - before <= 3
    pair.veth(name)   # plugged in after boot
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "up",
                    what="hot-plugged interface up")
    hearth.wait_for(lambda: hearth.service("web")["state"] == "running", what="web started")


def test_missing_required_interface_fails_after_timeout(hearth, pair, tmp_path):
    svc = {"name": "web", "argv": ["sleep", "1000"], "after": ["network"]}
    hearth.start(hearth.config(services=[svc], network=net_cfg(tmp_path, name="nosuch0",
                                                               timeout_ms=300)),
                 netns=pair.guest)
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "failed",
                    what="interface failed")
    i = hearth.rpc("network.get")["interfaces"][0]
    assert "not found" in i["error"]
    assert hearth.rpc("status")["phases"]["network"] is False
    assert hearth.service("web")["state"] != "running"
    assert hearth.rpc("network.check")["interfaces"][0]["present"] is False
