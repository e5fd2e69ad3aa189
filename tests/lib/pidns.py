"""Processes of a pid namespace, seen from the test's own namespace: one
scan of /proc for the integration fixture's host_pid and the tests that
count what hearth left behind (zombies)."""
import os


def pids_in_ns_of(pid):
    """Host pids of every process in the pid namespace of pid."""
    ns = os.readlink(f"/proc/{pid}/ns/pid")
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{p}/ns/pid") != ns:
                continue
        except OSError:
            continue
        yield int(p)


def ns_pid(host_pid):
    """The pid the process has in its own (innermost) namespace."""
    with open(f"/proc/{host_pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return None


def host_pid(ns_pid_wanted, in_ns_of):
    """The host pid of the process that is ns_pid_wanted in the pid
    namespace of in_ns_of, or None."""
    for p in pids_in_ns_of(in_ns_of):
        try:
            if ns_pid(p) == ns_pid_wanted:
                return p
        except OSError:
            continue
    return None
