"""A snapshot restored onto a new network: the platform unplugs the NIC
before saving (restoring with another `mac=` on the same virtio-net device
leaves the guest with the old MAC: on QEMU 7.2 here the device's property
then says the new one and the guest's link the old, which its driver read
at probe time; so a new MAC means a new device), restores onto a user
network of another range, plugs
a NIC with another MAC in over QMP and hands the new network to
sandbox.resume. hearth finds the NIC by its MAC, names it, addresses it,
routes through the new gateway, and the agent reaches the allowed peer at
its new address while a denied one is still refused. Every peer is a slirp
guestfwd command on the host."""
import json
import os
import subprocess
import time

from test_vm import fwd_script

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OLD_MAC, NEW_MAC = "52:54:00:aa:bb:01", "52:54:00:aa:bb:02"


def netmove_config():
    with open(os.path.join(ROOT, "rootfs", "qemu", "disk.json")) as f:
        cfg = json.load(f)
    cfg["network"] = {"interfaces": [{"name": "eth0", "mac": OLD_MAC, "address": "10.0.2.15/24",
                                      "gateway": "10.0.2.2", "mtu": 1500}],
                      "dns": ["10.0.2.3"]}
    # The model service at both its old and its new address; every other
    # host in 10/8 is denied (the policy's default denyOut).
    cfg["egress"] = {"allowPublicTraffic": False, "allowOut": ["10.0.2.100/32", "10.0.3.100/32"],
                     "denyOut": []}
    return cfg


def new_link_seen(vm):
    """network.check looks for the configured MAC, else the name eth0: the
    kernel gives a NIC plugged in after the old one left that free name."""
    return vm.result("network.check")["interfaces"][0].get("mac_now") == NEW_MAC


def peripherals(vm):
    return {p["name"] for p in vm.qmp.cmd("qom-list", path="/machine/peripheral")}


def test_restore_onto_a_new_nic_and_network(make_vm, hostdirs, tmp_path):
    model = fwd_script(hostdirs["root"], "model.sh", "model-service")
    other = fwd_script(hostdirs["root"], "other.sh", "other-lan-host")
    tree = tmp_path / "disk"
    for d in ("home", "workspace"):
        (tree / d).mkdir(parents=True)
    disk = str(tmp_path / "data.img")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), disk, "64M"], check=True,
                   stdout=subprocess.DEVNULL)
    configs = {"netmove": netmove_config()}
    base = ["--disk", disk, "--config", "netmove", "--nic-port"]
    vm = make_vm(extra=base + ["--mac", OLD_MAC,
                               "--guestfwd", f"tcp:10.0.2.100:80-cmd:{model}",
                               "--guestfwd", f"tcp:10.0.2.101:80-cmd:{other}"],
                 shares=False, configs=configs).start()
    vm.require("sandbox.resume", "network.get", "network.check")
    vm.wait_agent()
    assert vm.agent("connect 10.0.2.100 80").endswith("model-service")
    chk = vm.result("network.check")["interfaces"][0]
    assert chk["mac_now"] == OLD_MAC and chk["address_present"] and chk["default_route"], chk

    # The platform takes the NIC and its network away, then saves.
    vm.disconnect()
    vm.qmp.cmd("device_del", id="nic0")
    vm.wait_for(lambda: "nic0" not in peripherals(vm), timeout=60, what="NIC unplugged")
    vm.qmp.cmd("netdev_del", id="n0")
    snap = str(tmp_path / "snap")
    vm.qmp.cmd("stop")
    vm.qmp.cmd("migrate", uri=f"exec:cat > {snap}")
    vm.wait_for(lambda: vm.qmp.cmd("query-migrate").get("status") == "completed", timeout=120,
                what="migration")
    vm.qmp.cmd("quit")
    vm.wait_exit(30)

    vm2 = make_vm(extra=base + ["--no-nic"], shares=False, configs=configs,
                  state=str(tmp_path / "restored"))
    vm2.agent_port = vm.agent_port
    os.makedirs(vm2.state, exist_ok=True)
    vm2.start(incoming=snap)
    # Another range, another MAC: the restored guest's new NIC.
    vm2.qmp.cmd("netdev_add", type="user", id="n1", net="10.0.3.0/24", restrict=True,
                hostfwd=[{"str": f"tcp:127.0.0.1:{vm.agent_port}-:9119"}],
                guestfwd=[{"str": f"tcp:10.0.3.100:80-cmd:{model}"},
                          {"str": f"tcp:10.0.3.101:80-cmd:{other}"}])
    vm2.qmp.cmd("device_add", driver="virtio-net-pci", netdev="n1", id="nic1", bus="rp1",
                mac=NEW_MAC)
    # The guest's PCIe hotplug brings the NIC up as a new link, under a
    # name the kernel chose.
    vm2.wait_for(lambda: new_link_seen(vm2), timeout=60, what="the new NIC in the guest")
    net = {"interfaces": [{"name": "eth0", "mac": NEW_MAC, "address": "10.0.3.15/24",
                           "gateway": "10.0.3.2", "mtu": 1500}],
           "dns": ["10.0.3.3"]}
    now = time.time()
    r = vm2.result("sandbox.resume", {"time": {"sec": int(now), "nsec": int((now % 1) * 1e9)},
                                      "network": net})
    step = next(s for s in r["steps"] if s["name"] == "network")
    assert step["result"] == "repaired" and r["ok"] is True, r
    entry = step["interfaces"][0]
    assert entry["found"] == "by MAC" and entry["result"] == "repaired", step
    assert "address 10.0.3.15/24 was missing; added" in entry["repairs"], step
    assert "route default via 10.0.3.2 was missing; added" in entry["repairs"], step
    assert "eth0: address 10.0.3.15/24 was missing; added" in step["detail"]
    got = vm2.result("network.get")["interfaces"][0]
    assert got["address"] == "10.0.3.15/24" and got["mac"] == NEW_MAC and got["state"] == "up"
    chk = vm2.result("network.check")["interfaces"][0]
    assert chk["mac_now"] == NEW_MAC and chk["carrier"] and chk["address_present"], chk
    assert chk["default_route"], chk
    eg = vm2.result("egress.get")
    assert "10.0.3.2/32" in eg["alwaysAllowed"] and "10.0.2.2/32" not in eg["alwaysAllowed"], eg
    assert eg["applied"] is True

    # The agent, over the new NIC's forwarded port, reaches the model
    # service at its new address; another LAN host is still refused.
    vm2.wait_agent()
    ok = vm2.agent("connect 10.0.3.100 80")
    assert ok.startswith("ok ") and ok.endswith("model-service"), ok
    refused = vm2.agent("connect 10.0.3.101 80")
    assert refused.startswith("refused "), refused
