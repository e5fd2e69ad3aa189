"""Answers to connections from outside: a peer the egress policy forbids
(a private address not in allowOut, a denied range, a public address
with public traffic off) connects in to a service and to hearth's envd
and gets its answers, while nothing inside can send that peer anything
else: not a connection of its own, not a datagram, not a forged answer
(a service keeping NET_RAW: raw IP sockets and packet sockets with
hearth's mark bit, and connections it fakes by writing a packet "from"
the peer into lo or sending one to its own address).

hearth is PID 1 in a guest netns wired by veth to a peer netns holding
10.20.0.2 (private), 203.0.113.10 (public), 198.51.100.10 (denied) and
2001:db8:20::2 (denied). A sniffer in the peer netns counts what reaches
those addresses. Traffic only flows between the namespaces made here."""
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

GUEST4, GUEST6 = "172.31.0.1", "2001:db8:1::1"
LAN = "10.10.0.2"   # the LAN service allowOut lists
PRIVATE, PUBLIC, DENIED, DENIED6 = "10.20.0.2", "203.0.113.10", "198.51.100.10", "2001:db8:20::2"
ENVD = 49983

# The agent: a root service with the default settings. Listens on TCP
# 8080 (both families; each connection gets "hi" and is held until the
# peer closes) and echoes UDP on 9090; once the go file appears, tries
# its own connection and datagram to every address given and writes the
# outcomes ("ok" or the errno's name) to OUT.
AGENT = r"""
import errno, json, os, socket, sys, threading, time
out, go, ready = sys.argv[1], sys.argv[2], sys.argv[3]
targets = sys.argv[4:]
def hold(c):
    try:
        c.sendall(b"hi\n")
        while c.recv(100):
            pass
    except OSError:
        pass
    c.close()
def tcp():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", 8080)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=hold, args=(c,), daemon=True).start()
def udp(fam, addr):
    u = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    u.bind((addr, 9090))
    while True:
        d, a = u.recvfrom(100); u.sendto(b"echo:" + d, a)
threading.Thread(target=tcp, daemon=True).start()
threading.Thread(target=udp, args=(socket.AF_INET, "0.0.0.0"), daemon=True).start()
threading.Thread(target=udp, args=(socket.AF_INET6, "::"), daemon=True).start()
time.sleep(0.2)
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
res = {}
for t in targets:
    fam = socket.AF_INET6 if ":" in t else socket.AF_INET
    for proto, port in (("tcp", 7070), ("udp", 7071)):
        s = socket.socket(fam, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
        s.settimeout(5)
        try:
            s.connect((t, port))
            if proto == "udp":
                s.send(b"x")
            res[proto + " " + t] = "ok" if s.recv(10) else "empty"
        except socket.timeout:
            res[proto + " " + t] = "timeout"
        except OSError as e:
            res[proto + " " + t] = errno.errorcode.get(e.errno, str(e.errno))
        s.close()
with open(out + ".tmp", "w") as f:
    json.dump(res, f)
os.rename(out + ".tmp", out)
threading.Event().wait()
"""

# A service keeping NET_RAW (and nothing else). It listens on TCP 8081
# and UDP 9091 itself, and once the go file appears, for each target T
# (ports 30000 + 10 * i + k name the attempt k on the wire):
#   1 a SYN-ACK and an ACK carrying data, 8080 -> T, through a raw IP
#     socket carrying hearth's mark bit (SO_MARK);
#   2 a SYN-ACK in an Ethernet frame through a packet socket on the
#     guest's link, carrying the mark bit;
#   3 a SYN from T to its own listener, written into lo (a packet socket
#     on lo: the kernel takes it as received) - its listener's SYN-ACK
#     would go to T; and a UDP datagram the same way, which its socket
#     answers;
#   5 a SYN from T to the machine's own address through a raw IP socket
#     (it loops back through lo), to the same listener.
# OUT gets each send's outcome and what the UDP socket received.
FORGE = r"""
import errno, json, os, socket, struct, sys, time
out, go, ready, ifname, gmac, pmac, own = sys.argv[1:8]
targets = sys.argv[8:]
BIT = 0x10000000
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s >> 16) + (s & 0xffff)
    return ~s & 0xffff
def l4(src, dst, proto, body):
    ph = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, proto, len(body))
    c = csum(ph + body)
    at = 16 if proto == 6 else 6
    return body[:at] + struct.pack("!H", c) + body[at + 2:]
def tcp(src, dst, sport, dport, flags, payload=b""):
    h = struct.pack("!HHIIBBHHH", sport, dport, 1000, 1 if flags & 0x10 else 0, 5 << 4, flags,
                    65535, 0, 0) + payload
    return l4(src, dst, 6, h)
def udp(src, dst, sport, dport, payload):
    return l4(src, dst, 17, struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload)
def ip(src, dst, proto, body):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 7, 0, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + body
mac = lambda s: bytes(int(x, 16) for x in s.split(":"))
lst = socket.socket(); lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("0.0.0.0", 8081)); lst.listen(64)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 9091))
u.setblocking(False)
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
link = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); link.bind((ifname, 0))
lo = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); lo.bind(("lo", 0))
res = {}
for s, name in ((raw, "raw"), (link, "link")):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, BIT); res["mark " + name] = "set"
    except OSError as e:
        res["mark " + name] = errno.errorcode.get(e.errno, str(e.errno))
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
def attempt(name, fn):
    try:
        fn(); res[name] = "sent"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
for i, t in enumerate(targets):
    base = 30000 + 10 * i
    attempt(t + " raw syn-ack", lambda: raw.sendto(ip(own, t, 6, tcp(own, t, 8080, base + 1, 0x12)), (t, 0)))
    attempt(t + " raw ack", lambda: raw.sendto(
        ip(own, t, 6, tcp(own, t, 8080, base + 1, 0x18, b"secret")), (t, 0)))
    frame = mac(pmac) + mac(gmac) + b"\x08\x00" + ip(own, t, 6, tcp(own, t, 8080, base + 2, 0x12))
    attempt(t + " link syn-ack", lambda: link.send(frame))
    into_lo = lambda pkt: lo.send(bytes(12) + b"\x08\x00" + pkt)
    attempt(t + " lo syn", lambda: into_lo(ip(t, own, 6, tcp(t, own, base + 3, 8081, 0x02))))
    attempt(t + " lo udp", lambda: into_lo(ip(t, own, 17, udp(t, own, base + 4, 9091, b"q"))))
    attempt(t + " raw spoofed syn", lambda: raw.sendto(
        ip(t, own, 6, tcp(t, own, base + 5, 8081, 0x02)), (own, 0)))
time.sleep(0.5)
got = []
while True:
    try:
        d, a = u.recvfrom(100)
    except BlockingIOError:
        break
    try:
        u.sendto(b"answer", a); got.append([a[0], a[1], "sent"])
    except OSError as e:
        got.append([a[0], a[1], errno.errorcode.get(e.errno, str(e.errno))])
res["udp received"] = got
with open(out + ".tmp", "w") as f:
    json.dump(res, f)
os.rename(out + ".tmp", out)
time.sleep(1000)
"""

# A service keeping NET_RAW that puts hearth's bit on its own packets.
# At go1: a TCP connection to LAN:7072 from a socket marked with the bit
# (SO_MARK), which reads the peer's greeting. At go2 (the test has taken
# LAN out of the policy meanwhile): more data on that connection, and a
# UDP datagram from 172.31.0.77 to the private peer written into lo by a
# packet socket marked with the bit: with forwarding on, the machine
# routes it out. OUT gets what happened.
MARKED = r"""
import errno, json, os, socket, struct, sys, time
out, go1, go2, lan, peer = sys.argv[1:6]
BIT = 0x10000000
def wait(p):
    while not os.path.exists(p):
        time.sleep(0.05)
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s >> 16) + (s & 0xffff)
    return ~s & 0xffff
res = {}
wait(go1)
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, BIT); c.settimeout(5)
c.connect((lan, 7072)); res["greeting"] = c.recv(10).decode()
open(out + ".connected", "w").close()
wait(go2)
for _ in range(3):
    try:
        c.send(b"after"); res["send"] = "sent"
    except OSError as e:
        res["send"] = errno.errorcode.get(e.errno, str(e.errno))
    time.sleep(0.2)
src, dst = "172.31.0.77", peer
body = struct.pack("!HHHH", 7000, 30051, 9, 0) + b"x"
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 29, 9, 0, 64, 17, 0, socket.inet_aton(src),
                 socket.inet_aton(dst))
ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
lo = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
lo.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, BIT); lo.bind(("lo", 0))
for _ in range(3):
    lo.send(bytes(12) + b"\x08\x00" + ip + body)
res["forwarded"] = "written"
with open(out + ".tmp", "w") as f:
    json.dump(res, f)
os.rename(out + ".tmp", out)
time.sleep(1000)
"""

# The peer's side. serve: TCP 7070 ("hi") and UDP 7071 (echo) on every
# address, TCP 7072 ("hi", then held until the other side closes). connect/health/udp SRC DST PORT: one exchange from SRC, prints
# what came back or the errno's name. hold SRC DST PORT: a connection
# kept open until stdin closes. sniff IF STOP: counts, until STOP exists,
# the TCP and UDP packets arriving for the watched addresses whose
# destination port is a forger's (30000-30099) and, as the sniffer's own
# check, the agent's answers (source port 8080 or 9090, or envd's).
PEER = r"""
import errno, json, os, socket, sys, threading, time
mode = sys.argv[1]
WATCH = {socket.inet_aton(a) for a in ("10.20.0.2", "203.0.113.10", "198.51.100.10")}
def fam(a): return socket.AF_INET6 if ":" in a else socket.AF_INET
def err(e): return errno.errorcode.get(e.errno, str(e.errno))
if mode == "serve":
    def hold(c):
        c.sendall(b"hi\n")
        while c.recv(100):
            pass
        c.close()
    def tcp(port=7070):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::", port)); s.listen(64)
        while True:
            c, _ = s.accept()
            if port == 7070:
                c.sendall(b"hi\n"); c.close()
            else:
                threading.Thread(target=hold, args=(c,), daemon=True).start()
    threading.Thread(target=tcp, args=(7072,), daemon=True).start()
    def udp(a):
        u = socket.socket(fam(a), socket.SOCK_DGRAM); u.bind((a, 7071))
        while True:
            d, p = u.recvfrom(100); u.sendto(d, p)
    for a in ("10.20.0.2", "203.0.113.10", "198.51.100.10", "2001:db8:20::2"):
        threading.Thread(target=udp, args=(a,), daemon=True).start()
    print("ready", flush=True)
    tcp()
elif mode in ("connect", "health", "udp", "hold"):
    src, dst, port = sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(fam(dst), socket.SOCK_DGRAM if mode == "udp" else socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.bind((src, 0)); s.connect((dst, port))
        if mode == "health":
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        elif mode == "udp":
            s.send(b"ping")
        print(s.recv(100).decode(errors="replace").splitlines()[0], flush=True)
        if mode == "hold":
            sys.stdin.read()
    except socket.timeout:
        print("timeout")
    except OSError as e:
        print(err(e))
elif mode == "sniff":
    ifname, stop = sys.argv[2], sys.argv[3]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((ifname, 0)); s.settimeout(0.1)
    forged, answers = [], 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        try:
            f, a = s.recvfrom(4096)
        except socket.timeout:
            continue
        if a[2] == socket.PACKET_OUTGOING or f[12:14] != b"\x08\x00":
            continue
        ihl = (f[14] & 15) * 4
        proto, dst = f[14 + 9], f[14 + 16:14 + 20]
        if proto not in (6, 17) or dst not in WATCH:
            continue
        sport = int.from_bytes(f[14 + ihl:16 + ihl], "big")
        dport = int.from_bytes(f[16 + ihl:18 + ihl], "big")
        if 30000 <= dport < 30100:
            forged.append([socket.inet_ntoa(dst), proto, sport, dport])
        elif sport in (8080, 9090, 49983):
            answers += 1
    print(json.dumps({"forged": forged, "answers": answers}), flush=True)
"""


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class Net:
    def __init__(self, tmp_path):
        tag = uuid.uuid4().hex[:6]
        self.tmp = tmp_path
        self.guest, self.peer = "rpG" + tag, "rpP" + tag
        self.procs = []
        sh("ip", "netns", "add", self.guest)
        sh("ip", "netns", "add", self.peer)
        a, b = "rp" + tag + "a", "rp" + tag + "b"
        self.guest_if, self.peer_if = a, b
        sh("ip", "link", "add", a, "netns", self.guest, "type", "veth", "peer", "name", b,
           "netns", self.peer)
        g, p = ["ip", "-n", self.guest], ["ip", "-n", self.peer]
        sh(*g, "addr", "add", GUEST4 + "/24", "dev", a)
        sh(*g, "addr", "add", GUEST6 + "/64", "dev", a, "nodad")
        sh(*p, "addr", "add", "172.31.0.2/24", "dev", b)
        sh(*p, "addr", "add", "2001:db8:1::2/64", "dev", b, "nodad")
        for addr in (LAN, PRIVATE, PUBLIC, DENIED):
            sh(*p, "addr", "add", addr + "/32", "dev", b)
        sh(*p, "addr", "add", DENIED6 + "/128", "dev", b, "nodad")
        for ns, dev in ((g, a), (p, b)):
            sh(*ns, "link", "set", "lo", "up")
            sh(*ns, "link", "set", dev, "up")
        sh(*g, "route", "add", "default", "via", "172.31.0.2")
        sh(*g, "-6", "route", "add", "default", "via", "2001:db8:1::2")
        self.guest_mac = self.mac(g, a)
        self.peer_mac = self.mac(p, b)
        self.script = tmp_path / "peer.py"
        self.script.write_text(PEER)
        server = self.spawn("serve")
        assert server.stdout.readline().strip() == "ready"

    @staticmethod
    def mac(ns, dev):
        out = subprocess.run([*ns, "-j", "link", "show", dev], check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)[0]["address"]

    def spawn(self, *args):
        p = subprocess.Popen(["ip", "netns", "exec", self.peer, sys.executable, str(self.script),
                              *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        self.procs.append(p)
        return p

    def peer_says(self, mode, src, dst, port):
        out = subprocess.run(["ip", "netns", "exec", self.peer, sys.executable, str(self.script),
                              mode, src, dst, str(port)], capture_output=True, text=True,
                             timeout=30)
        return out.stdout.strip()

    def sniff(self):
        stop = self.tmp / ("stop-" + uuid.uuid4().hex[:6])
        p = self.spawn("sniff", self.peer_if, str(stop))
        assert p.stdout.readline().strip() == "ready"

        def done():
            stop.touch()
            return json.loads(p.stdout.readline())
        return done

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        for ns in (self.guest, self.peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def net(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    n = Net(tmp_path)
    yield n
    n.close()


def agent(tmp_path, targets):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    files = {k: tmp_path / k for k in ("agent.out", "agent.go", "agent.ready")}
    svc = {"name": "agent", "argv": [sys.executable, str(script), str(files["agent.out"]),
                                     str(files["agent.go"]), str(files["agent.ready"]), *targets],
           "after": ["egress"]}
    return svc, files


def results(hearth, path):
    return hearth.wait_for(lambda: path.exists() and json.loads(path.read_text()), timeout=30,
                           what=path.name)


@pytest.mark.parametrize("public", [True, False], ids=["public-on", "public-off"])
def test_a_forbidden_peer_connecting_in_gets_its_answers_and_nothing_else(hearth, net, tmp_path,
                                                                         public):
    """(a) connections and datagrams from forbidden addresses to a service
    and to hearth's envd are answered, with the shipped kind of policy (a
    LAN range allowed, the peer not in it); (b) the same service still
    cannot reach any of those addresses itself, even while the peer's
    own connection to it is open; (d) UDP both ways."""
    forbidden = [PRIVATE, DENIED, DENIED6] + ([] if public else [PUBLIC])
    policy = {"allowPublicTraffic": public, "allowOut": ["10.10.0.0/16"],
              "denyOut": ["198.51.100.0/24", "2001:db8:20::/48"]}
    svc, files = agent(tmp_path, forbidden)
    hearth.start(hearth.config([svc], egress=policy, envd={"listen": f"tcp:0.0.0.0:{ENVD}"}),
                 netns=net.guest)
    eg = hearth.rpc("egress.get")
    assert eg["applied"] is True and eg["layers"]["replies"] is True, eg["layers"]
    assert eg["layers"]["netdev"] == [net.guest_if] and "replies_error" not in eg["layers"]
    hearth.wait_for(lambda: files["agent.ready"].exists(), what="the agent listening")
    hearth.wait_for(lambda: hearth.rpc("status").get("envd", {}).get("state") == "running",
                    what="envd running")
    sniff = net.sniff()

    for src in forbidden:
        dst = GUEST6 if ":" in src else GUEST4
        assert net.peer_says("connect", src, dst, 8080) == "hi", src
        assert net.peer_says("udp", src, dst, 9090) == "echo:ping", src
        if ":" not in src:
            assert net.peer_says("health", src, dst, ENVD).startswith("HTTP/1.1 204"), src

    # (b) the agent's own connections and datagrams to the same peers,
    # while one of theirs to it stays open.
    held = net.spawn("hold", PRIVATE, GUEST4, "8080")
    assert held.stdout.readline().strip() == "hi"
    files["agent.go"].touch()
    out = results(hearth, files["agent.out"])
    for t in forbidden:
        assert out["tcp " + t] == "ECONNREFUSED", out
        assert out["udp " + t] == "EPERM", out
    held.stdin.close()

    seen = sniff()
    assert seen["forged"] == [], seen
    assert seen["answers"] >= 4, seen
    c = hearth.rpc("egress.get")["counters"]
    # Answers passed both layers by the replies rules, and each
    # connection from outside was marked once as it came in.
    assert c["replies"]["packets"] >= 8, c
    assert c["netdev"]["replies"]["packets"] >= 8, c
    assert c["inbound"]["connections"]["packets"] >= 3 * len(forbidden), c
    refused = c["deny4-tcp"]["packets"] + c.get("public-tcp", {"packets": 0})["packets"]
    assert refused >= 2, c
    # Nothing the policy forbids left through the netdev layer by a
    # rule that lets traffic out.
    assert c["netdev"]["deny4"]["packets"] == 0 and c["netdev"]["deny6"]["packets"] == 0, c


def test_forged_answers_from_a_service_with_net_raw_are_dropped(hearth, net, tmp_path):
    """(c) a service keeping NET_RAW forges the answers of connections
    that do not exist, marked with hearth's own bit, and fakes
    connections "from" the peer inside the machine; the peer sees none of
    it, while a real connection of the peer's is answered."""
    forbidden = [PRIVATE, PUBLIC]
    policy = {"allowPublicTraffic": False, "allowOut": ["10.10.0.0/16"]}
    script = tmp_path / "forge.py"
    script.write_text(FORGE)
    out, go, ready = tmp_path / "forge.out", tmp_path / "forge.go", tmp_path / "forge.ready"
    forger = {"name": "forger", "caps_keep": ["NET_RAW"], "after": ["egress"],
              "argv": [sys.executable, str(script), str(out), str(go), str(ready), net.guest_if,
                       net.guest_mac, net.peer_mac, GUEST4, *forbidden]}
    svc, files = agent(tmp_path, [])
    hearth.start(hearth.config([svc, forger], egress=policy), netns=net.guest)
    assert hearth.rpc("egress.get")["layers"]["replies"] is True
    assert hearth.service("forger")["privileged"] is True
    hearth.wait_for(lambda: ready.exists() and files["agent.ready"].exists(),
                    what="the services listening")
    sniff = net.sniff()
    # The sniffer's own check: a real connection in is answered.
    assert net.peer_says("connect", PRIVATE, GUEST4, 8080) == "hi"
    before = hearth.rpc("egress.get")["counters"]
    go.touch()
    res = results(hearth, out)
    time.sleep(1.5)  # the listener's SYN-ACK retries, if any got out
    seen = sniff()
    assert seen["forged"] == [], (seen, res)
    assert seen["answers"] >= 1, seen
    # NET_RAW is enough to set a socket's mark: the frames carried the bit.
    assert res["mark raw"] == "set" and res["mark link"] == "set", res
    for t in forbidden:
        # The inet chain rejects what a raw IP socket sends (its
        # conntrack entry is new, or an answer to nothing from outside);
        # the netdev chain drops the frame: the bit without a route.
        assert res[t + " raw syn-ack"] == "EPERM", res
        assert res[t + " raw ack"] == "EPERM", res
        assert res[t + " link syn-ack"] == "ENOBUFS", res
        # The packets written into lo were taken, and answered: the
        # answers go nowhere.
        assert res[t + " lo syn"] == "sent" and res[t + " lo udp"] == "sent", res
    got = {(a, p): r for a, p, r in res["udp received"]}
    for i, t in enumerate(forbidden):
        assert got.get((t, 30000 + 10 * i + 4)) == "EPERM", res
    after = hearth.rpc("egress.get")["counters"]
    nd_drop = (after["netdev"]["deny4"]["packets"] + after["netdev"]["public"]["packets"]) - \
        (before["netdev"]["deny4"]["packets"] + before["netdev"]["public"]["packets"])
    assert nd_drop >= 2, (before["netdev"], after["netdev"])
    # None of the fakes counted as a connection from outside: only the
    # sniffer's check did.
    assert after["inbound"]["connections"]["packets"] == \
        before["inbound"]["connections"]["packets"], (before["inbound"], after["inbound"])
    assert after["netdev"]["replies"]["packets"] == before["netdev"]["replies"]["packets"]


def test_the_mark_bit_is_hearths_alone(hearth, net, tmp_path):
    """A service keeping NET_RAW sets hearth's bit on its own packets
    (SO_MARK). On a connection of its own that the policy allowed when it
    was opened, the bit does not let the connection's packets past the
    netdev layer once the policy forbids the address; on a packet it
    makes the machine forward (written into lo, forwarding on), the bit
    is gone before the netdev chain sees it."""
    sh("ip", "netns", "exec", net.guest, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    script = tmp_path / "marked.py"
    script.write_text(MARKED)
    out, go1, go2 = tmp_path / "marked.out", tmp_path / "go1", tmp_path / "go2"
    svc = {"name": "marked", "caps_keep": ["NET_RAW"], "after": ["egress"],
           "argv": [sys.executable, str(script), str(out), str(go1), str(go2), LAN, PRIVATE]}
    hearth.start(hearth.config([svc], egress={"allowOut": ["10.10.0.0/16"]}), netns=net.guest)
    go1.touch()
    hearth.wait_for(lambda: os.path.exists(str(out) + ".connected"), what="the marked connection")
    hearth.rpc("egress.set", {"allowOut": []})
    before = hearth.rpc("egress.get")["counters"]["netdev"]
    sniff = net.sniff()
    go2.touch()
    res = results(hearth, out)
    time.sleep(1)
    seen = sniff()
    after = hearth.rpc("egress.get")["counters"]["netdev"]
    assert res["greeting"] == "hi\n" and res["send"] == "sent", res
    # The forwarded datagrams reached the netdev chain and were dropped
    # there, as was the connection's data: nothing passed as an answer.
    assert seen["forged"] == [], seen
    assert after["deny4"]["packets"] - before["deny4"]["packets"] >= 4, (before, after)
    assert after["replies"]["packets"] == before["replies"]["packets"], (before, after)
