"""A free TCP port for a rendezvous endpoint the workers bind later: at random outside the
kernel's ephemeral range, as ddp-launch picks MASTER_PORT (common/free_port.h). A port from
bind(0) is ephemeral, and any outgoing connection or bind(0) beside this test can take it
before the workers bind it. Run as a script, it prints one."""
import random
import socket


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    lo, hi = ephemeral_range()
    below, above = lo - 10000, 65535 - hi
    first, span = (10000, below) if below >= above else (hi + 1, above)
    for _ in range(200):
        port = random.randrange(first, first + span) if span >= 1000 else 0
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free TCP port found")


if __name__ == "__main__":
    print(free_port())
