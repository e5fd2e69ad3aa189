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


def _nspids(host_pid):
    with open(f"/proc/{host_pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return []


def _ppid(host_pid):
    with open(f"/proc/{host_pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def host_pid(ns_pid_wanted, in_ns_of):
    """The host pid of the process that is ns_pid_wanted in the pid
    namespace of in_ns_of, or None. Services live in pid namespaces of
    their own below hearth's, and hearth names them by its own pids: a
    process there is found by its pid at hearth's level, checked to
    descend from a process of hearth's namespace (another namespace as
    deep may use the same number)."""
    ns = os.readlink(f"/proc/{in_ns_of}/ns/pid")
    level = len(_nspids(in_ns_of)) - 1
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            ids = _nspids(int(p))
            if len(ids) <= level or ids[level] != ns_pid_wanted:
                continue
            q = int(p)
            for _ in range(64):
                if os.readlink(f"/proc/{q}/ns/pid") == ns:
                    return int(p)
                q = _ppid(q)
                if q <= 1:
                    break
        except (OSError, ValueError, IndexError):
            continue
    return None
