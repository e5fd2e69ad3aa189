"""Egress allowlist: hearth as PID 1 in a guest netns wired by veth to a
peer netns that holds a LAN model service (10.10.0.2), another LAN host
(10.20.0.2) and a "public" host (203.0.113.10), plus IPv6 counterparts in
2001:db8::/32. Traffic only ever flows between the namespaces made here."""
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

PORT = 8080
UDP_PORT = 9090

SERVER = r"""
import socket, threading
def tcp():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", %d)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(b"hi\n"); c.close()
# One UDP socket per address, so each reply leaves from the address the
# client sent to (a wildcard socket would answer from the veth address).
def udp(addr):
    u = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((addr, %d))
    while True:
        d, a = u.recvfrom(100); u.sendto(d, a)
for addr in ("10.10.0.2", "10.20.0.2", "203.0.113.10",
             "2001:db8:10::2", "2001:db8:20::2", "2001:db8:ff::10"):
    threading.Thread(target=udp, args=(addr,), daemon=True).start()
print("ready", flush=True)
tcp()
""" % (PORT, UDP_PORT)

# Prints "ok" or the errno name of the failure; a timeout prints "timeout".
CLIENT = r"""
import errno, socket, sys
host, proto = sys.argv[1], sys.argv[2]
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
try:
    if proto == "tcp":
        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5)
        s.connect((host, %d)); print("ok" if s.recv(3) == b"hi\n" else "bad")
    else:
        s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(5)
        s.connect((host, %d)); s.send(b"x"); s.recv(10); print("ok")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
""" % (PORT, UDP_PORT)


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class Lan:
    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.guest, self.peer = "egG" + tag, "egP" + tag
        self.server = None
        sh("ip", "netns", "add", self.guest)
        sh("ip", "netns", "add", self.peer)
        a, b = "eg" + tag + "a", "eg" + tag + "b"
        self.guest_if = a
        sh("ip", "link", "add", a, "netns", self.guest, "type", "veth", "peer", "name", b,
           "netns", self.peer)
        g, p = ["ip", "-n", self.guest], ["ip", "-n", self.peer]
        sh(*g, "addr", "add", "172.31.0.1/24", "dev", a)
        sh(*g, "addr", "add", "2001:db8:1::1/64", "dev", a, "nodad")
        sh(*p, "addr", "add", "172.31.0.2/24", "dev", b)
        sh(*p, "addr", "add", "2001:db8:1::2/64", "dev", b, "nodad")
        for addr in ("10.10.0.2/32", "10.20.0.2/32", "203.0.113.10/32"):
            sh(*p, "addr", "add", addr, "dev", b)
        for addr in ("2001:db8:10::2/128", "2001:db8:20::2/128", "2001:db8:ff::10/128"):
            sh(*p, "addr", "add", addr, "dev", b, "nodad")
        for ns, dev in ((g, a), (p, b)):
            sh(*ns, "link", "set", "lo", "up")
            sh(*ns, "link", "set", dev, "up")
        self.guest_mac = self.mac(g, a)
        self.peer_mac = self.mac(p, b)
        sh(*g, "route", "add", "default", "via", "172.31.0.2")
        sh(*g, "-6", "route", "add", "default", "via", "2001:db8:1::2")
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.peer, sys.executable, "-c", SERVER],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.server.stdout.readline().strip() == b"ready"

    @staticmethod
    def mac(ns, dev):
        out = subprocess.run([*ns, "-j", "link", "show", dev], check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)[0]["address"]

    def reach(self, host, proto="tcp"):
        out = subprocess.run(["ip", "netns", "exec", self.guest, sys.executable, "-c", CLIENT,
                              host, proto], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()

    def nft(self, *args):
        return subprocess.run(["ip", "netns", "exec", self.guest, "nft", *args],
                              capture_output=True, text=True)

    def close(self):
        if self.server:
            self.server.kill()
            self.server.wait()
        for ns in (self.guest, self.peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def lan():
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    if not os.path.exists("/usr/sbin/nft") and not os.path.exists("/sbin/nft"):
        pytest.skip("nft (for reading the table from outside) is not installed")
    net = Lan()
    yield net
    net.close()


def boot(hearth, lan, policy, **extra):
    hearth.start(hearth.config(egress=policy, **extra), netns=lan.guest)


def test_allow_out_punches_through_private_deny(hearth, lan):
    boot(hearth, lan, {"allowPublicTraffic": True, "allowOut": ["10.10.0.0/16"], "denyOut": []})
    st = hearth.rpc("egress.get")
    assert st["applied"] is True
    assert hearth.rpc("status")["phases"]["egress"] is True
    assert lan.reach("10.10.0.2") == "ok"
    # Refused by a reset: an immediate error, not a timeout.
    assert lan.reach("10.20.0.2") == "ECONNREFUSED"
    assert lan.reach("203.0.113.10") == "ok"
    counters = hearth.rpc("egress.get")["counters"]
    assert counters["deny4-tcp"]["packets"] >= 1
    assert counters["allow4"]["packets"] >= 1


def test_public_off_rejects_public_tcp_and_udp(hearth, lan):
    boot(hearth, lan, {"allowPublicTraffic": True, "allowOut": ["10.10.0.0/16"]})
    assert lan.reach("203.0.113.10", "udp") == "ok"
    r = hearth.rpc("egress.set", {"allowPublicTraffic": False, "allowOut": ["10.10.0.0/16"]})
    assert r["policy"]["allowPublicTraffic"] is False
    assert lan.reach("203.0.113.10") == "ECONNREFUSED"
    # A rejected local datagram fails in send() itself: EPERM, at once.
    assert lan.reach("203.0.113.10", "udp") == "EPERM"
    assert lan.reach("10.10.0.2") == "ok"
    assert lan.reach("10.10.0.2", "udp") == "ok"


def test_ipv6_allow_deny_public(hearth, lan):
    boot(hearth, lan, {"allowOut": ["2001:db8:10::/48"], "denyOut": ["2001:db8:20::/48"]})
    assert lan.reach("2001:db8:10::2") == "ok"
    assert lan.reach("2001:db8:20::2") == "ECONNREFUSED"
    assert lan.reach("2001:db8:ff::10") == "ok"
    hearth.rpc("egress.set", {"allowPublicTraffic": False, "allowOut": ["2001:db8:10::/48"]})
    assert lan.reach("2001:db8:ff::10") == "ECONNREFUSED"
    assert lan.reach("2001:db8:20::2") == "ECONNREFUSED"
    assert lan.reach("2001:db8:10::2") == "ok"


@pytest.mark.parametrize("bad", ["10.10.0.0/33", "10.10.1.0/16", "not-an-ip", "2001:db8::/129"])
def test_bad_cidr_changes_nothing(hearth, lan, bad):
    policy = {"allowPublicTraffic": True, "allowOut": ["10.10.0.0/16"], "denyOut": []}
    boot(hearth, lan, policy)
    # Stateless listings (-s): the kernel's own IPv6 multicast (MLD, router
    # solicitations) may move the deny counters between the two reads.
    before = lan.nft("-s", "list", "table", "inet", "hearth").stdout
    assert "table inet hearth" in before
    c = hearth.client()
    reply = c.call("egress.set", {"allowPublicTraffic": False,
                                  "allowOut": ["10.20.0.0/16", bad]})
    c.close()
    assert reply["error"]["code"] == -32602
    assert bad in reply["error"]["message"]
    assert "allowOut[1]" in reply["error"]["message"]
    st = hearth.rpc("egress.get")
    assert st["policy"] == policy
    assert lan.nft("-s", "list", "table", "inet", "hearth").stdout == before
    assert lan.reach("10.20.0.2") == "ECONNREFUSED"
    assert lan.reach("203.0.113.10") == "ok"


def test_replace_is_whole_and_overlaps_merge(hearth, lan):
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]})
    # Overlapping and adjacent networks are one interval to the kernel.
    hearth.rpc("egress.set", {"allowOut": ["10.20.0.0/24", "10.20.0.0/16", "10.21.0.0/16"]})
    assert lan.reach("10.20.0.2") == "ok"
    assert lan.reach("10.10.0.2") == "ECONNREFUSED"
    listing = lan.nft("list", "set", "inet", "hearth", "allow4").stdout
    assert "10.20.0.0/15" in listing, listing


def test_tables_cannot_be_changed_by_others(hearth, lan):
    """hearth's tables are owned by its netlink socket: another process of
    its network namespace, root with CAP_NET_ADMIN, can neither delete nor
    edit them, and `nft flush ruleset` leaves them alone."""
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]})
    st = hearth.rpc("egress.get")
    assert st["layers"]["owner"] is True and st["layers"]["inet"] is True
    before = lan.nft("-s", "list", "ruleset").stdout
    assert "flags owner" in before
    attempts = [
        ("delete", "table", "inet", "hearth"),
        ("delete", "table", "netdev", "hearth"),
        ("add", "rule", "inet", "hearth", "output", "accept"),
        ("insert", "rule", "inet", "hearth", "output", "accept"),
        ("add", "element", "inet", "hearth", "allow4", "{ 10.20.0.0/16 }"),
        ("delete", "element", "inet", "hearth", "deny4", "{ 10.0.0.0/8 }"),
        ("flush", "chain", "netdev", "hearth", "allowlist"),
        ("delete", "chain", "netdev", "hearth", "egress-" + lan.guest_if),
    ]
    for cmd in attempts:
        r = lan.nft(*cmd)
        assert r.returncode != 0 and "Operation not permitted" in r.stderr, (cmd, r.stderr)
    # Flushing the whole ruleset succeeds for the tables it may touch and
    # skips the owned ones.
    lan.nft("flush", "ruleset")
    assert lan.nft("-s", "list", "ruleset").stdout == before
    assert lan.reach("10.20.0.2") == "ECONNREFUSED"
    assert lan.reach("10.10.0.2") == "ok"
    st = hearth.rpc("egress.get")
    assert st["applied"] is True and st["layers"]["owner"] is True
    r = hearth.rpc("egress.check")
    assert r["repaired"] is False and r["repairs"] == 0


def test_foreign_ruleset_changes_are_verified_as_they_happen(hearth, lan):
    """No polling: a change anywhere in the namespace's ruleset is a
    notification, after which hearth reads its tables back at once."""
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]})
    assert hearth.rpc("egress.get")["layers"]["watch"] is True
    time.sleep(0.3)
    assert hearth.rpc("egress.get")["verified_ms_ago"] >= 250
    assert lan.nft("add", "table", "inet", "other").returncode == 0
    hearth.wait_for(lambda: hearth.rpc("egress.get")["verified_ms_ago"] < 250,
                    what="read-back after a foreign change")
    st = hearth.rpc("egress.get")
    assert st["applied"] is True and st["repairs"] == 0


def test_interfaces_get_netdev_chains_as_they_come_and_go(hearth, lan):
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]})
    assert hearth.rpc("egress.get")["layers"]["netdev"] == [lan.guest_if]
    sh("ip", "-n", lan.guest, "link", "add", "egX0", "type", "veth", "peer", "name", "egX1")
    hearth.wait_for(lambda: sorted(hearth.rpc("egress.get")["layers"]["netdev"]) ==
                    sorted([lan.guest_if, "egX0", "egX1"]), what="new interfaces covered")
    assert lan.nft("list", "chain", "netdev", "hearth", "egress-egX0").returncode == 0
    sh("ip", "-n", lan.guest, "link", "del", "egX0")
    hearth.wait_for(lambda: hearth.rpc("egress.get")["layers"]["netdev"] == [lan.guest_if],
                    what="removed interfaces dropped")
    assert hearth.rpc("egress.get")["applied"] is True
    assert lan.reach("10.20.0.2") == "ECONNREFUSED"


# Sends one UDP datagram (IPv4 or IPv6) as a raw Ethernet frame on the
# guest's veth (AF_PACKET: below the IP stack, past the inet output hook)
# and waits for the echo on an ordinary socket. Prints "answer" or
# "silence".
RAW = r"""
import socket, struct, sys
ifname, src_mac, dst_mac, dst, port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
v6 = ":" in dst
src = "2001:db8:1::1" if v6 else "172.31.0.1"
def mac(s): return bytes(int(x, 16) for x in s.split(":"))
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s >> 16) + (s & 0xffff)
    return ~s & 0xffff
fam = socket.AF_INET6 if v6 else socket.AF_INET
rx = socket.socket(fam, socket.SOCK_DGRAM)
rx.bind((src, 0)); rx.settimeout(1.5)
sport = rx.getsockname()[1]
payload = b"raw-frame"
ulen = 8 + len(payload)
if v6:
    s6, d6 = socket.inet_pton(fam, src), socket.inet_pton(fam, dst)
    udp = struct.pack("!HHHH", sport, port, ulen, 0) + payload
    ck = csum(s6 + d6 + struct.pack("!IxxxB", ulen, 17) + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", ck) + udp[8:]
    ip = struct.pack("!IHBB16s16s", 6 << 28, ulen, 17, 64, s6, d6)
    etype = b"\x86\xdd"
else:
    udp = struct.pack("!HHHH", sport, port, ulen, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 1, 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    etype = b"\x08\x00"
frame = mac(dst_mac) + mac(src_mac) + etype + ip + udp
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
if len(sys.argv) > 6:
    tx.setsockopt(263, 20, 1)  # SOL_PACKET, PACKET_QDISC_BYPASS: straight to the driver
tx.bind((ifname, 0))
for _ in range(3):
    try:
        tx.send(frame)
    except OSError:
        pass  # ENOBUFS: a drop on the egress hook is reported to the sender
try:
    rx.recvfrom(100); print("answer")
except socket.timeout:
    print("silence")
"""


def test_raw_frames_from_a_packet_socket_obey_the_policy(hearth, lan):
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"],
                       "denyOut": ["203.0.113.0/24", "2001:db8:20::/48"]})
    st = hearth.rpc("egress.get")
    assert st["layers"]["netdev"] == [lan.guest_if]

    def raw(dst, *bypass):
        out = subprocess.run(["ip", "netns", "exec", lan.guest, sys.executable, "-c", RAW,
                              lan.guest_if, lan.guest_mac, lan.peer_mac, dst, str(UDP_PORT),
                              *bypass],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()
    assert raw("10.10.0.2") == "answer"        # allowed: the echo comes back
    assert raw("203.0.113.10") == "silence"    # denied: dropped on the egress hook
    assert raw("10.20.0.2") == "silence"       # private range, denied by default
    # Skipping the qdisc layer does not skip the egress hook.
    assert raw("10.10.0.2", "bypass") == "answer"
    assert raw("203.0.113.10", "bypass") == "silence"
    counters = hearth.rpc("egress.get")["counters"]["netdev"]
    assert counters["deny4"]["packets"] >= 9
    assert counters["allow4"]["packets"] >= 6
    # IPv6: the addresses sit 24 bytes into the header, not 16.
    assert raw("2001:db8:ff::10") == "answer"     # public, allowed
    assert raw("2001:db8:20::2") == "silence"     # denied
    assert counters["deny6"]["packets"] == 0
    assert hearth.rpc("egress.get")["counters"]["netdev"]["deny6"]["packets"] >= 3
    # Public traffic off: a public address is dropped too.
    hearth.rpc("egress.set", {"allowPublicTraffic": False,
                              "allowOut": ["10.10.0.0/16", "2001:db8:10::/48"]})
    assert raw("203.0.113.10") == "silence"
    assert raw("2001:db8:ff::10") == "silence"
    assert raw("10.10.0.2") == "answer"
    assert raw("2001:db8:10::2") == "answer"
    # Any other ether type (here 0x8864, PPPoE, which can carry IP to a
    # router) is dropped while public traffic is off; the allowed answers
    # above needed ARP, which passes.
    other = ("import socket, sys\n"
             "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind((sys.argv[1], 0))\n"
             "m = lambda x: bytes(int(h, 16) for h in x.split(':'))\n"
             "f = m(sys.argv[3]) + m(sys.argv[2]) + b'\\x88\\x64' + bytes(46)\n"
             "for _ in range(3):\n"
             "    try: s.send(f)\n"
             "    except OSError: pass\n")
    before = hearth.rpc("egress.get")["counters"]["netdev"]["public"]["packets"]
    out = subprocess.run(["ip", "netns", "exec", lan.guest, sys.executable, "-c", other,
                          lan.guest_if, lan.guest_mac, lan.peer_mac], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    after = hearth.rpc("egress.get")["counters"]["netdev"]["public"]["packets"]
    assert after - before == 3, (before, after)


@pytest.mark.parametrize("dst", ["100.100.100.200", "0.1.2.3", "198.18.0.10", "224.0.0.251",
                                 "240.0.0.1", "ff0e::1"])
def test_new_default_ranges_are_denied(hearth, lan, dst):
    boot(hearth, lan, {"allowPublicTraffic": True})
    assert lan.reach(dst, "udp") == "EPERM"
    if not dst.startswith(("224.", "ff")):
        assert lan.reach(dst) == "ECONNREFUSED"
    pol = hearth.rpc("egress.get")["policy"]
    assert pol["denyOut"] == []   # the defaults are implicit, not shown as configured


def test_service_without_net_admin_cannot_lift_policy(hearth, lan, tmp_path):
    out = tmp_path / "nft.out"
    svc = {"name": "agent", "after": ["egress"], "restart": "never",
           "caps_drop": ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"],
           "argv": ["/bin/sh", "-c", f"nft delete table inet hearth; echo rc=$? > {out}; exec sleep 1000"]}
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]}, services=[svc])
    hearth.wait_for(lambda: out.exists() and out.read_text().strip(), what="service ran")
    assert out.read_text().strip() != "rc=0"
    assert lan.nft("list", "table", "inet", "hearth").returncode == 0
    assert hearth.rpc("egress.check")["repaired"] is False


def test_hearthctl_egress_set_and_get(hearth, lan):
    from conftest import HEARTHCTL
    boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]})
    ctl = [HEARTHCTL, "--connect", "unix:" + hearth.sock]
    r = subprocess.run([*ctl, "egress", "set", "--allow-out", "10.20.0.0/16", "10.10.0.0/16",
                        "--deny-out", "203.0.113.0/24", "--public", "off"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "public    off" in r.stdout
    pol = hearth.rpc("egress.get")["policy"]
    assert pol == {"allowPublicTraffic": False, "allowOut": ["10.20.0.0/16", "10.10.0.0/16"],
                   "denyOut": ["203.0.113.0/24"]}
    assert lan.reach("10.20.0.2") == "ok"
    r = subprocess.run([*ctl, "egress", "set", "--allow-out", "10.0.0.0/33"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "10.0.0.0/33" in r.stderr
    r = subprocess.run([*ctl, "egress"], capture_output=True, text=True)
    assert r.returncode == 0 and "allowOut   10.20.0.0/16 10.10.0.0/16" in r.stdout, r.stdout
    assert "deny4-tcp" in r.stdout
    assert "layers    inet yes, owner yes, watch yes, replies yes, netdev " + lan.guest_if \
        in r.stdout, r.stdout
    r = subprocess.run([*ctl, "egress", "set", "--public", "maybe"], capture_output=True, text=True)
    assert r.returncode != 0 and "--public" in r.stderr


def test_fail_closed_until_the_policy_applies(hearth, lan):
    # Another socket owns a table of the same name (nft's "owner" flag), so
    # hearth's replace transaction is refused as a whole.
    holder = subprocess.Popen(["ip", "netns", "exec", lan.guest, "nft", "-i"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        holder.stdin.write("add table inet hearth { flags owner; }\n")
        holder.stdin.flush()
        for _ in range(100):
            if lan.nft("list", "table", "inet", "hearth").returncode == 0:
                break
            time.sleep(0.02)
        svc = {"name": "agent", "argv": ["sleep", "1000"], "after": ["egress"]}
        boot(hearth, lan, {"allowOut": ["10.10.0.0/16"]}, services=[svc])
        st = hearth.rpc("egress.get")
        assert st["applied"] is False and "not permitted" in st["error"]
        assert hearth.rpc("status")["phases"]["egress"] is False
        assert hearth.service("agent")["state"] != "running"
        c = hearth.client()
        assert "error" in c.call("egress.check")
        c.close()
    finally:
        holder.stdin.close()
        holder.wait()
    r = hearth.rpc("egress.check")
    assert r["applied"] is True
    hearth.wait_for(lambda: hearth.service("agent")["state"] == "running", what="agent started")
    assert lan.reach("10.20.0.2") == "ECONNREFUSED"


def test_dns_servers_are_always_allowed(hearth, lan, tmp_path):
    # 10.20.0.2 is private (denied by default) but is a configured name server.
    boot(hearth, lan, {"allowPublicTraffic": False, "allowOut": []},
         network={"dns": ["10.20.0.2"], "resolv_conf": str(tmp_path / "resolv.conf")})
    assert hearth.rpc("egress.get")["alwaysAllowed"] == ["10.20.0.2/32"]
    assert lan.reach("10.20.0.2") == "ok"
    assert lan.reach("10.10.0.2") == "ECONNREFUSED"
    assert lan.reach("203.0.113.10") == "ECONNREFUSED"


def test_every_gateway_and_name_server_is_always_allowed(hearth, lan, tmp_path):
    # 40 interfaces (none exists here: not required, no wait) with a
    # gateway each and 40 name servers: all 80 are allowed, none dropped.
    ifs = [{"name": f"gw{i}", "gateway": f"10.30.{i}.1", "required": False, "timeout_ms": 0}
           for i in range(40)]
    dns = [f"10.40.{i}.53" for i in range(40)]
    boot(hearth, lan, {"allowPublicTraffic": False, "allowOut": []},
         network={"interfaces": ifs, "dns": dns, "resolv_conf": str(tmp_path / "resolv.conf")})
    always = hearth.rpc("egress.get")["alwaysAllowed"]
    want = {f"10.30.{i}.1/32" for i in range(40)} | {f"10.40.{i}.53/32" for i in range(40)}
    assert set(always) == want, sorted(want - set(always))
