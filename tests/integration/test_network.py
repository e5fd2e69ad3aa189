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


def routes(pair, *args):
    return json.loads(sh("ip", "-n", pair.guest, "-j", "route", "show", *args))


def neighbours(pair, dev):
    return json.loads(sh("ip", "-n", pair.guest, "-j", "neigh", "show", "dev", dev))


def addresses(pair, dev):
    return [(a["local"], a["prefixlen"]) for a in pair.link(dev)["addr_info"]
            if a["family"] == "inet"]


def up(hearth):
    hearth.wait_for(lambda: all(i["state"] == "up"
                                for i in hearth.rpc("network.get")["interfaces"]),
                    what="interfaces up")


def step(report, name):
    return next(s for s in report["steps"] if s["name"] == name)


def routed_cfg(tmp_path, name, **iface):
    net = net_cfg(tmp_path, name=name, **iface)
    net["routes"] = [{"to": "198.51.100.0/24", "via": "172.31.9.2", "dev": name, "metric": 50},
                     {"to": "203.0.113.0/25", "dev": name, "mtu": 1300}]
    net["neighbours"] = [{"ip": "172.31.9.77", "mac": "02:00:00:00:00:77", "dev": name}]
    return net


def test_routes_and_neighbours_applied(hearth, pair, tmp_path):
    name = "egr" + pair.tag
    pair.veth(name)
    hearth.start(hearth.config(network=routed_cfg(tmp_path, name)), netns=pair.guest)
    up(hearth)
    via = routes(pair, "198.51.100.0/24")
    assert via and via[0]["gateway"] == "172.31.9.2" and via[0]["dev"] == name
    assert via[0]["metric"] == 50
    onlink = routes(pair, "203.0.113.0/25")
    assert onlink and onlink[0]["dev"] == name and "gateway" not in onlink[0]
    assert onlink[0]["scope"] == "link"
    detail = json.loads(sh("ip", "-n", pair.guest, "-j", "-d", "route", "show",
                           "203.0.113.0/25"))[0]
    assert detail.get("metrics", [{}])[0].get("mtu") == 1300
    n = [x for x in neighbours(pair, name) if x["dst"] == "172.31.9.77"]
    assert n and n[0]["lladdr"] == "02:00:00:00:00:77" and "PERMANENT" in n[0]["state"]
    got = hearth.rpc("network.get")
    assert got["routes"][0] == {"to": "198.51.100.0/24", "via": "172.31.9.2", "dev": name,
                                "metric": 50}
    assert got["neighbours"] == [{"ip": "172.31.9.77", "mac": "02:00:00:00:00:77", "dev": name}]


def test_resume_with_nothing_wrong_is_ok(hearth, pair, tmp_path):
    name = "egk" + pair.tag
    pair.veth(name)
    hearth.start(hearth.config(network=routed_cfg(tmp_path, name)), netns=pair.guest)
    up(hearth)
    s = step(hearth.rpc("sandbox.resume"), "network")
    assert s["result"] == "ok", s
    assert s["detail"] == "1 interface in order"
    assert s["interfaces"] == [{"name": name, "ifindex": s["interfaces"][0]["ifindex"],
                                "found": "by name", "result": "ok"}]
    assert s["resolv_conf"] == "ok"


@pytest.mark.valgrind
def test_resume_repairs_what_was_undone(hearth, pair, tmp_path):
    name = "egu" + pair.tag
    pair.veth(name)
    resolv = tmp_path / "resolv.conf"
    hearth.start(hearth.config(network=routed_cfg(tmp_path, name)), netns=pair.guest)
    up(hearth)

    # An address deleted (the kernel takes the routes through it along).
    sh("ip", "-n", pair.guest, "addr", "del", "172.31.9.1/24", "dev", name)
    resolv.write_text("nameserver 203.0.113.66\n")
    r = hearth.rpc("sandbox.resume")
    s = step(r, "network")
    assert s["result"] == "repaired" and r["ok"] is True, s
    assert f"{name}: address 172.31.9.1/24 was missing; added" in s["detail"]
    assert "route default via 172.31.9.2 was missing; added" in s["detail"]
    assert "resolv.conf: differed; rewritten" in s["detail"]
    assert s["resolv_conf"] == "rewritten"
    entry = s["interfaces"][0]
    assert entry["result"] == "repaired"
    assert "address 172.31.9.1/24 was missing; added" in entry["repairs"]
    assert ("172.31.9.1", 24) in addresses(pair, name)
    assert pair.default_route()[0]["gateway"] == "172.31.9.2"
    assert routes(pair, "198.51.100.0/24")[0]["gateway"] == "172.31.9.2"
    assert resolv.read_text() == "nameserver 192.0.2.53\nnameserver 2001:db8::53\n"

    # One route and the neighbour entry deleted.
    sh("ip", "-n", pair.guest, "route", "del", "198.51.100.0/24")
    sh("ip", "-n", pair.guest, "neigh", "del", "172.31.9.77", "dev", name)
    s = step(hearth.rpc("sandbox.resume"), "network")
    assert s["interfaces"][0]["repairs"] == [
        "route 198.51.100.0/24 via 172.31.9.2 was missing; added",
        "neighbour 172.31.9.77 was missing or not permanent; set"], s
    assert "address" not in s["detail"]
    assert routes(pair, "198.51.100.0/24")[0]["metric"] == 50
    assert any(n["dst"] == "172.31.9.77" for n in neighbours(pair, name))

    # The link downed and its MTU changed.
    sh("ip", "-n", pair.guest, "link", "set", name, "down", "mtu", "1280")
    s = step(hearth.rpc("sandbox.resume"), "network")
    reps = s["interfaces"][0]["repairs"]
    assert reps[:2] == ["link was down; brought up", "MTU was 1280; set to 1400"], s
    link = pair.link(name)
    assert "UP" in link["flags"] and link["mtu"] == 1400
    assert pair.default_route()[0]["gateway"] == "172.31.9.2"
    assert any(n["dst"] == "172.31.9.77" for n in neighbours(pair, name))
    assert step(hearth.rpc("status")["last_resume"], "network")["result"] == "repaired"


def test_resume_reports_a_missing_interface(hearth, pair, tmp_path):
    name = "egv" + pair.tag
    pair.veth(name)
    hearth.start(hearth.config(network=net_cfg(tmp_path, name=name)), netns=pair.guest)
    up(hearth)
    sh("ip", "-n", pair.guest, "link", "del", name)
    r = hearth.rpc("sandbox.resume")
    s = step(r, "network")
    assert s["result"] == "failed" and r["ok"] is False
    assert s["detail"] == f"{name}: not found"
    assert hearth.rpc("network.get")["interfaces"][0]["state"] == "failed"
    assert hearth.rpc("status")["phases"]["network"] is False


def new_net(tmp_path, name, mac=None):
    iface = {"name": name, "address": "172.31.10.1/24", "gateway": "172.31.10.2", "mtu": 1450}
    if mac:
        iface["mac"] = mac
    return {"interfaces": [iface],
            "routes": [{"to": "192.0.2.128/25", "via": "172.31.10.2", "dev": name}],
            "dns": ["192.0.2.54"], "resolv_conf": str(tmp_path / "resolv.conf")}


@pytest.mark.valgrind
def test_sandbox_init_replaces_the_network(hearth, pair, tmp_path):
    name = "egi" + pair.tag
    pair.veth(name)
    sh("ip", "-n", pair.peer, "addr", "add", "172.31.10.2/24", "dev", "eq" + pair.tag)
    policy = {"allowPublicTraffic": False, "allowOut": []}
    hearth.start(hearth.config(network=routed_cfg(tmp_path, name), egress=policy),
                 netns=pair.guest)
    up(hearth)
    assert "172.31.9.2/32" in hearth.rpc("egress.get")["alwaysAllowed"]
    r = hearth.rpc("sandbox.init", {"network": new_net(tmp_path, name)})
    assert r["ok"] is True, r
    net = r["network"]
    assert net["removed"] == [
        f"{name}: neighbour 172.31.9.77", f"{name}: route default via 172.31.9.2",
        f"{name}: route 198.51.100.0/24 via 172.31.9.2", f"{name}: route 203.0.113.0/25",
        f"{name}: address 172.31.9.1/24"], net
    entry = net["interfaces"][0]
    assert entry["name"] == name and entry["result"] == "repaired"
    assert "address 172.31.10.1/24 was missing; added" in entry["repairs"]
    assert "MTU was 1400; set to 1450" in entry["repairs"]
    assert net["resolv_conf"] == "rewritten"
    assert addresses(pair, name) == [("172.31.10.1", 24)]
    assert pair.default_route()[0]["gateway"] == "172.31.10.2"
    assert routes(pair, "198.51.100.0/24") == [] and routes(pair, "203.0.113.0/25") == []
    assert routes(pair, "192.0.2.128/25")[0]["gateway"] == "172.31.10.2"
    assert not any(n["dst"] == "172.31.9.77" for n in neighbours(pair, name))
    assert (tmp_path / "resolv.conf").read_text() == "nameserver 192.0.2.54\n"
    got = hearth.rpc("network.get")
    assert got["interfaces"][0]["address"] == "172.31.10.1/24" and got["dns"] == ["192.0.2.54"]
    always = hearth.rpc("egress.get")["alwaysAllowed"]
    assert "172.31.10.2/32" in always and "192.0.2.54/32" in always
    assert "172.31.9.2/32" not in always and "192.0.2.53/32" not in always
    assert hearth.rpc("status")["phases"]["network"] is True
    # The policy in force was applied again with the new list.
    out = sh("ip", "netns", "exec", pair.guest, "nft", "-j", "list", "set", "inet", "hearth",
             "always4")
    assert "172.31.10.2" in out and "172.31.9.2" not in out


@pytest.mark.valgrind
def test_sandbox_init_bad_network_changes_nothing(hearth, pair, tmp_path):
    name = "egb" + pair.tag
    pair.veth(name)
    hearth.start(hearth.config(network=net_cfg(tmp_path, name=name)), netns=pair.guest)
    up(hearth)
    bad = new_net(tmp_path, name)
    bad["interfaces"].append({"name": "eth9", "mac": "02:00:00:00:00"})
    c = hearth.client()
    reply = c.call("sandbox.init", {"env": {"NEW_VAR": "x"}, "network": bad})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("network.interfaces[1].mac: bad MAC address")
    bad = new_net(tmp_path, name)
    bad["routes"][0]["dev"] = "eth9"
    reply = c.call("sandbox.init", {"network": bad})
    assert reply["error"]["message"] == \
        'network.routes[0].dev: "eth9" is not the name of one of network.interfaces', reply
    bad = new_net(tmp_path, name)
    bad["routes"][0]["via"] = "2001:db8::1"
    reply = c.call("sandbox.resume", {"network": bad})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("network.routes[0].via:"), reply
    reply = c.call("sandbox.resume", {"network": {"interfaces": [{"name": name}] * 2}})
    assert reply["error"]["message"].startswith("network.interfaces[1].name:"), reply
    c.close()
    assert addresses(pair, name) == [("172.31.9.1", 24)]
    assert pair.default_route()[0]["gateway"] == "172.31.9.2"
    assert hearth.rpc("network.get")["interfaces"][0]["address"] == "172.31.9.1/24"
    st = hearth.rpc("status")
    assert st["last_resume"] is None
    assert "NEW_VAR" not in json.dumps(st)


def test_resume_onto_a_new_nic(hearth, pair, tmp_path):
    """A restore onto a new NIC: the old one is gone, a new one with
    another MAC (and a kernel-chosen name) is there, and sandbox.resume
    hands over the new network."""
    old_mac, new_mac = "02:00:5e:10:20:31", "02:00:5e:10:20:32"
    pair.veth("ego" + pair.tag, mac=old_mac)
    sh("ip", "-n", pair.peer, "addr", "add", "172.31.10.2/24", "dev", "eq" + pair.tag)
    hearth.start(hearth.config(network=net_cfg(tmp_path, name="eth5", mac=old_mac)),
                 netns=pair.guest)
    up(hearth)
    assert pair.link("eth5")["address"] == old_mac
    sh("ip", "-n", pair.guest, "link", "del", "eth5")
    pair.veth("egn" + pair.tag, mac=new_mac)
    sh("ip", "-n", pair.peer, "addr", "add", "172.31.10.2/24", "dev", "eq" + pair.tag)
    r = hearth.rpc("sandbox.resume", {"network": new_net(tmp_path, "eth5", mac=new_mac)})
    s = step(r, "network")
    assert s["result"] == "repaired" and r["ok"] is True, s
    entry = s["interfaces"][0]
    assert entry["found"] == "by MAC"
    assert entry["repairs"][0] == "was named egn" + pair.tag + "; renamed"
    assert f"eth5: address 172.31.10.1/24 was missing; added" in s["detail"]
    link = pair.link("eth5")
    assert link["address"] == new_mac and link["mtu"] == 1450 and "UP" in link["flags"]
    assert addresses(pair, "eth5") == [("172.31.10.1", 24)]
    assert pair.default_route()[0]["gateway"] == "172.31.10.2"
    got = hearth.rpc("network.get")["interfaces"][0]
    assert got["address"] == "172.31.10.1/24" and got["mac"] == new_mac and got["state"] == "up"
    chk = hearth.rpc("network.check")["interfaces"][0]
    assert chk["carrier"] and chk["address_present"] and chk["default_route"]


def test_hearthctl_resume_with_a_network_file(hearth, pair, tmp_path):
    from conftest import HEARTHCTL
    name = "egf" + pair.tag
    pair.veth(name)
    sh("ip", "-n", pair.peer, "addr", "add", "172.31.10.2/24", "dev", "eq" + pair.tag)
    hearth.start(hearth.config(network=net_cfg(tmp_path, name=name)), netns=pair.guest)
    up(hearth)
    f = tmp_path / "net.json"
    f.write_text(json.dumps(new_net(tmp_path, name)))
    ctl = [HEARTHCTL, "--connect", "unix:" + hearth.sock]
    r = subprocess.run(ctl + ["resume", "--network", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("network"))
    assert line.split()[1] == "repaired" and "address 172.31.10.1/24 was missing; added" in line
    assert addresses(pair, name) == [("172.31.10.1", 24)]
    f.write_text("[]")
    r = subprocess.run(ctl + ["resume", "--network", str(f)], capture_output=True, text=True)
    assert r.returncode != 0 and "does not hold a JSON object" in r.stderr
    f.write_text('{"interfaces":[{"name":"' + name + '","mtu":1}]}')
    r = subprocess.run(ctl + ["init", "--network", str(f)], capture_output=True, text=True)
    assert r.returncode != 0 and "network.interfaces[0].mtu" in r.stderr, r
    assert addresses(pair, name) == [("172.31.10.1", 24)]


def test_sandbox_init_waits_for_the_nic_it_names(hearth, pair, tmp_path):
    """A MAC handed over names the NIC to wait for: the link that has the
    name now (another MAC) is left alone, the phase is not reached until
    the NIC is plugged in, then it is configured."""
    new_mac = "02:00:5e:10:20:41"
    pair.veth("eth6")
    svc = {"name": "web", "argv": ["sleep", "1000"], "after": ["network"]}
    hearth.start(hearth.config(services=[svc], network=net_cfg(tmp_path, name="eth6")),
                 netns=pair.guest)
    up(hearth)
    hearth.wait_for(lambda: hearth.service("web")["state"] == "running", what="web started")
    net = new_net(tmp_path, "eth6", mac=new_mac)
    net["interfaces"][0]["timeout_ms"] = 20000
    r = hearth.rpc("sandbox.init", {"network": net})
    entry = r["network"]["interfaces"][0]
    assert entry == {"name": "eth6", "result": "waiting"}, r
    assert "eth6: not found yet (waiting up to" in r["network"]["detail"]
    assert r["network"]["removed"] == ["eth6: route default via 172.31.9.2",
                                       "eth6: address 172.31.9.1/24"]
    assert addresses(pair, "eth6") == []
    assert hearth.rpc("status")["phases"]["network"] is False
    assert hearth.rpc("network.get")["interfaces"][0]["state"] == "waiting"
    sh("ip", "-n", pair.guest, "link", "del", "eth6")
    pair.veth("egw" + pair.tag, mac=new_mac)
    sh("ip", "-n", pair.peer, "addr", "add", "172.31.10.2/24", "dev", "eq" + pair.tag)
    up(hearth)
    link = pair.link("eth6")
    assert link["address"] == new_mac and addresses(pair, "eth6") == [("172.31.10.1", 24)]
    assert hearth.rpc("status")["phases"]["network"] is True
    # The NIC was found by its MAC once: a later resume may find it by name.
    s = step(hearth.rpc("sandbox.resume"), "network")
    assert s["result"] == "ok" and s["interfaces"][0]["found"] == "by MAC", s


def test_ipv6_address_and_routes_are_stable_across_resumes(hearth, pair, tmp_path):
    name = "eg6" + pair.tag
    pair.veth(name)
    sh("ip", "-n", pair.peer, "addr", "add", "fd00:31:9::2/64", "dev", "eq" + pair.tag,
       "nodad")
    net = {"interfaces": [{"name": name, "address": "fd00:31:9::1/64", "gateway": "fd00:31:9::2"}],
           "routes": [{"to": "2001:db8:77::/48", "via": "fd00:31:9::2", "dev": name},
                      {"to": "2001:db8:78::/48", "via": "fd00:31:9::2", "dev": name,
                       "metric": 5}],
           "resolv_conf": str(tmp_path / "resolv.conf")}
    hearth.start(hearth.config(network=net), netns=pair.guest)
    up(hearth)
    r6 = json.loads(sh("ip", "-n", pair.guest, "-6", "-j", "route", "show", "2001:db8:77::/48"))
    assert r6 and r6[0]["gateway"] == "fd00:31:9::2" and r6[0]["metric"] == 1024
    r6 = json.loads(sh("ip", "-n", pair.guest, "-6", "-j", "route", "show", "2001:db8:78::/48"))
    assert r6 and r6[0]["metric"] == 5
    for _ in range(2):
        s = step(hearth.rpc("sandbox.resume"), "network")
        assert s["result"] == "ok", s
    sh("ip", "-n", pair.guest, "-6", "route", "del", "2001:db8:77::/48")
    s = step(hearth.rpc("sandbox.resume"), "network")
    assert s["interfaces"][0]["repairs"] == [
        "route 2001:db8:77::/48 via fd00:31:9::2 was missing; added"], s


def test_an_empty_network_reaches_the_phase(hearth, pair, tmp_path):
    svc = {"name": "web", "argv": ["sleep", "1000"], "after": ["network"]}
    hearth.start(hearth.config(services=[svc], network=net_cfg(tmp_path, name="nosuch1",
                                                               timeout_ms=200)),
                 netns=pair.guest)
    hearth.wait_for(lambda: hearth.rpc("network.get")["interfaces"][0]["state"] == "failed",
                    what="interface failed")
    assert hearth.rpc("status")["phases"]["network"] is False
    s = step(hearth.rpc("sandbox.resume", {"network": {}}), "network")
    assert s["result"] == "skipped" and s["detail"] == "no network configured", s
    assert hearth.rpc("network.get")["interfaces"] == []
    assert hearth.rpc("status")["phases"]["network"] is True
    hearth.wait_for(lambda: hearth.service("web")["state"] == "running", what="web started")


def test_same_address_on_a_new_nic_leaves_the_old_one(hearth, pair, tmp_path):
    pair.veth("eth7")
    hearth.start(hearth.config(network=net_cfg(tmp_path, name="eth7")), netns=pair.guest)
    up(hearth)
    net = net_cfg(tmp_path, name="eth7", mac="02:00:5e:10:20:51", timeout_ms=20000)
    r = hearth.rpc("sandbox.init", {"network": net})
    # The new NIC keeps the address: the old link named so gives it up.
    assert "eth7: address 172.31.9.1/24" in r["network"]["removed"], r
    assert addresses(pair, "eth7") == []
    assert r["network"]["interfaces"][0]["result"] == "waiting"
