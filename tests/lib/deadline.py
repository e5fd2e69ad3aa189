"""A per-test deadline for the pytest layers (integration, valgrind, vm,
runtime), so a test that hangs fails with its name and the layer goes on,
instead of the whole run waiting for whoever kills it.

Each phase of a test (setup, call, teardown) gets `seconds`
(HEARTH_TEST_TIMEOUT overrides). Past it, every thread's stack goes to
stderr and PhaseTimeout is raised where the test waits (a blocking call
returns EINTR to Python for the signal), so pytest reports that test as
failed and runs its teardown. PhaseTimeout is a BaseException, so the
`except Exception` of a retry loop does not swallow it. If the test is
stuck where Python never runs again (a C call that retries EINTR itself),
a watchdog thread names the test, dumps the stacks and ends the run a
minute later: a run that ends is better than one that hangs.

Not pytest-timeout: it is not a dependency, and this is all it would do.
Registered by each layer's conftest in pytest_configure:
    deadline.register(config, 300)"""
import faulthandler
import os
import signal
import sys
import threading

import pytest

GRACE = 60.0  # seconds after the deadline before the watchdog ends the run


class PhaseTimeout(BaseException):
    """A test phase ran past its deadline."""


class Deadline:
    def __init__(self, seconds):
        self.seconds = float(os.environ.get("HEARTH_TEST_TIMEOUT") or seconds)

    def _phase(self, item, when):
        what = f"{item.nodeid}: {when} ran over its {self.seconds:g} s deadline"

        def on_alarm(signum, frame):
            sys.stderr.write(f"\n{what}; stacks:\n")
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            raise PhaseTimeout(what)

        def watchdog():
            sys.stderr.write(f"\n{what} and did not stop {GRACE:g} s later; "
                             "ending the run. Stacks:\n")
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
            os._exit(1)

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        dog = threading.Timer(self.seconds + GRACE, watchdog)
        dog.daemon = True
        dog.start()
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            dog.cancel()
            signal.signal(signal.SIGALRM, old)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self._phase(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._phase(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        yield from self._phase(item, "teardown")


def register(config, seconds):
    """Installs the deadline once per run (the first layer's conftest wins
    when one run collects several layers)."""
    if not config.pluginmanager.has_plugin("deadline"):
        config.pluginmanager.register(Deadline(seconds), "deadline")
