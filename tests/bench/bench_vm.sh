#!/bin/sh
# Boot figures from inside a QEMU guest (hearth as the real PID 1): kernel
# start to hearth, hearth to its first service exec and to phase running,
# hearth's RSS in the guest, and the host's wait from QEMU start to the
# first answer on the control channel. Under TCG the figures are relative.
# One row puts hearth's share of the boot beside the kernel's own, both
# from the same run on the guest's monotonic clock: hearth -> first
# service exec with the config's module loading taken out (the modules'
# init is kernel work hearth only asks for), over kernel start -> hearth.
set -eu
if ! command -v qemu-system-x86_64 >/dev/null; then
    printf 'vm_boot\tboot figures inside a QEMU guest\tfailed: qemu-system-x86_64 not installed\t-\t-\n'
    exit 1
fi
/usr/bin/python3 - "$ROOT" <<'PY'
import os, sys, tempfile, time, shutil
root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "tests", "vm"))
import conftest
# An image of its own: the VM tests' (conftest.IMAGE) carries their extra
# files and is rebuilt by their fixture when older than its inputs, which
# one built here without them would not be.
conftest.IMAGE = os.path.join(root, "build", "image", "bench")
initrd = os.path.join(conftest.IMAGE, "initramfs.cpio.gz")
if not os.path.exists(initrd) or os.path.getmtime(initrd) < os.path.getmtime(conftest.HEARTH):
    import subprocess
    subprocess.run([os.path.join(root, "rootfs", "build-image.sh"), "--no-ext4", "--out",
                    conftest.IMAGE], check=True, stdout=subprocess.DEVNULL)
d = tempfile.mkdtemp(prefix="hearth-bvm-")
for k in ("home", "workspace", "skills"):
    os.makedirs(os.path.join(d, k))
vm = conftest.VM(os.path.join(d, "state"), ["--home", f"{d}/home", "--workspace", f"{d}/workspace",
                                           "--skills", f"{d}/skills"], conftest.free_port())
t0 = time.monotonic()
try:
    vm.start()
    answer = time.monotonic() - t0
    vm.wait_for(lambda: vm.result("status").get("boot", {}).get("first_exec_us"), 60, "exec")
    st = vm.result("status")
    b = st["boot"]
    accel = "kvm" if "accel kvm" in " ".join(vm.args) else os.environ.get("HEARTH_ACCEL", "tcg")
    rows = [
        ("vm_kernel_to_hearth_ms", f"VM ({accel}): kernel start -> hearth (ms)", f"{b['hearth_start_us']/1000:.0f}"),
        ("vm_hearth_to_exec_ms", f"VM ({accel}): hearth -> first service exec (ms)", f"{b['first_exec_us']/1000:.1f}"),
        ("vm_modules_ms", f"VM ({accel}): loading the config's modules (ms)", f"{b['modules_us']/1000:.1f}"),
        ("vm_hearth_to_running_ms", f"VM ({accel}): hearth -> phase running (ms)", f"{b['running_us']/1000:.1f}"),
        ("vm_rss_kib", "VM: hearth RSS in the guest, one service (KiB)", str(st.get("rss_kib"))),
        ("vm_host_wait_s", f"VM ({accel}): QEMU start -> control answers (s)", f"{answer:.1f}"),
    ]
    for k, f, v in rows:
        print(f"{k}\t{f}\t{v}\t-\t-")
    own = (b["first_exec_us"] - b["modules_us"]) / 1000
    print(f"vm_boot_vs_kernel\tVM ({accel}): hearth -> first service exec, module loading "
          f"excluded (ms; peer: the kernel's own boot, start -> hearth, same run)\t{own:.1f}\t"
          f"kernel boot\t{b['hearth_start_us']/1000:.1f}")
    vm.result("system.shutdown", {})
    vm.wait_exit(60)
finally:
    vm.kill()
    shutil.rmtree(d, ignore_errors=True)
PY
