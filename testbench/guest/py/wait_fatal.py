#!/usr/bin/env python3
"""An application with mlx5_0 open while the device goes away (a PCI
unplug): ib_uverbs disassociates its context, sends it
IBV_EVENT_DEVICE_FATAL (uverbs_main.c ib_uverbs_free_hw_resources()), and
every verb after that fails with EIO.

Prints "ready" once the context is open, then "event N" (or "no event"
after SECONDS) and "next verb: errno E" (0: it worked).

Usage: wait_fatal.py SECONDS"""
import errno
import os
import signal
import sys
import time

from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError


def open_device(seconds):
    """mlx5_0's context; EAGAIN (mlx5_ib_alloc_ucontext() while the
    device's ib_active is off) is retried and reported."""
    end = time.monotonic() + seconds
    while True:
        try:
            return Context(name="mlx5_0")
        except PyverbsRDMAError as ex:
            print(f"# open mlx5_0: errno {ex.error_code}", flush=True)
            if ex.error_code != errno.EAGAIN or time.monotonic() > end:
                raise
            time.sleep(0.5)


def main():
    ctx = open_device(20)
    print("ready", flush=True)
    signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
    try:
        ev = ctx.get_async_event()
        ev.ack()
        print(f"event {ev.event_type}", flush=True)
    except PyverbsError:
        print("no event", flush=True)
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        PD(ctx)
        err = 0
    except PyverbsRDMAError as ex:
        err = ex.error_code
    print(f"next verb: errno {err}", flush=True)
    return 0


if __name__ == "__main__":
    os._exit(main())
