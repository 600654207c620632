#!/usr/bin/env python3
"""PyTorch's own distributed suite (DistributedTest, shipped by python3-torch 1.13) on one
backend at one world size, one line per test: PASS, FAIL (the error's last line) or SKIP (the
suite's reason), then the counts.

  distributed_suite.py --backend ddp --world 2 [--only REGEX] [--log FILE]
      [--expect LIST]   ddp: exit 1 when a test LIST has passing on gloo does not pass here;
                        gloo: exit 1 when any outcome differs from LIST
      [--record LIST]   write this world's outcomes into LIST (run with gloo)

The control is the checked-in LIST (distributed_suite_gloo.txt): gloo's outcome of every test
here, at worlds 2 and 3, with the torch and Python it was recorded on (--expect fails on
others: record again). It changes only with python3-torch, so CI runs ddp alone against it;
`make torch-suite-control` runs gloo against it.

The ranks are forked from this process, not spawned (as PyTorch's own runner does): a spawned
rank imports torch afresh, 7 s a test here against 0.5 s; the suite runs either way.

For ddp, before the suite is imported: the name joins DistTestCases.backend_feature "plugin",
"ddp" and "subgroup", and the skips the suite decides by backend name for what our backend does
(LIFTED below) are not applied. PyTorch's installed files are not edited.

Exit: 0 ok; 1 as above, or without --expect any test failed; 77 PyTorch's suite is not
installed. ddp_torch must import (PYTHONPATH).
"""
import argparse
import ast
import os
import re
import sys
import time
import unittest

import torch.multiprocessing

HERE = os.path.dirname(os.path.abspath(__file__))
SKIPPED = 77

# Skips the suite applies by backend name, lifted for ddp: sandcastle_skip_if's reasons, as the
# suite words them, and require_backend's ("Test requires backend to be one of {...}") where the
# set holds gloo. The --expect run holds every lifted test that passes on gloo to pass on ddp.
LIFTED = {
    "Only gloo backend supports timeouts",
    "Only Gloo backend support sparse all reduce",
    "get_future is only supported on mpi, nccl and gloo",
    "GLOO Batch Send Recv CPU",
}
REQUIRES = re.compile(r"Test requires backend to be one of (\{.*\})")


def lift_name_gates():
    """sandcastle_skip_if and sandcastle_skip, as distributed_test imports them, without the
    skips above."""
    import torch.testing._internal.common_utils as common_utils
    skip_if, skip = common_utils.sandcastle_skip_if, common_utils.sandcastle_skip

    def lifted_skip_if(condition, reason):
        return skip_if(condition and reason not in LIFTED, reason)

    def lifted_skip(reason):
        m = REQUIRES.fullmatch(reason)
        if m and "gloo" in ast.literal_eval(m.group(1)):
            return lambda func: func
        return skip(reason)

    common_utils.sandcastle_skip_if = lifted_skip_if
    common_utils.sandcastle_skip = lifted_skip


def load_suite(backend):
    """The suite's test class for `backend` (BACKEND and WORLD_SIZE already in the environment)."""
    sys.path.insert(0, os.path.join(HERE, "suite"))  # expecttest
    from torch.testing._internal.common_distributed import DistTestCases
    if backend == "ddp":
        import ddp_torch  # noqa: F401  registers the backend
        for feature in ("plugin", "ddp", "subgroup"):
            DistTestCases.backend_feature[feature].add("ddp")
        lift_name_gates()
    from torch.testing._internal.distributed import distributed_test as dt

    class TestDistBackendWithSpawn(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._start_processes(torch.multiprocessing.get_context("fork").Process)

    TestDistBackendWithSpawn.__qualname__ = "TestDistBackendWithSpawn"  # pickled by name for the ranks
    globals()["TestDistBackendWithSpawn"] = TestDistBackendWithSpawn
    return TestDistBackendWithSpawn


class LineResult(unittest.TestResult):
    """Records each test's outcome and prints one line per test on `out`."""

    def __init__(self, out):
        super().__init__()
        self.out = out
        self.outcomes = {}
        self.whys = {}
        self.started = 0.0

    def startTest(self, test):  # noqa: N802 (unittest's names)
        super().startTest(test)
        self.started = time.monotonic()

    def note(self, test, outcome, why=""):
        name = test.id().rsplit(".", 1)[-1]
        self.outcomes[name] = outcome
        self.whys[name] = why
        took = time.monotonic() - self.started
        self.out.write(f"{outcome.upper():4} {name} ({took:.1f} s){': ' + why if why else ''}\n")
        self.out.flush()

    def addSuccess(self, test):  # noqa: N802
        self.note(test, "pass")

    def addFailure(self, test, err):  # noqa: N802
        self.note(test, "fail", last_line(err))

    def addError(self, test, err):  # noqa: N802
        self.note(test, "fail", last_line(err))

    def addSkip(self, test, reason):  # noqa: N802
        self.note(test, "skip", reason.splitlines()[0] if reason else "")

    def addExpectedFailure(self, test, err):  # noqa: N802
        self.note(test, "pass")

    def addUnexpectedSuccess(self, test):  # noqa: N802
        self.note(test, "fail", "unexpected success")


def last_line(err):
    text = str(err[1]).strip().splitlines()
    lines = [line.strip() for line in text if line.strip() and not line.startswith(" ")]
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line)]
    return (errors or lines or ["?"])[-1][:300]


def platform():
    import platform as p
    import torch
    return f"torch {torch.__version__}, Python {p.python_version()}"


def read_list(path):
    """(platform it was recorded on, {world: {test: (outcome, why)}}) from a control list."""
    table, recorded = {}, ""
    with open(path) as f:
        for line in f:
            if line.startswith("# recorded on "):
                recorded = line[len("# recorded on "):].strip()
            if line.startswith("#") or not line.strip():
                continue
            world, name, outcome, *why = line.split(None, 3)
            table.setdefault(int(world), {})[name] = (outcome, why[0].strip() if why else "")
    return recorded, table


def write_list(path, world, outcomes, whys):
    table = read_list(path)[1] if os.path.exists(path) else {}
    table[world] = {n: (o, whys.get(n, "")) for n, o in outcomes.items()}
    with open(path, "w") as f:
        f.write("# gloo's outcome of each DistributedTest test here: world, test, pass|fail|skip, why it fails.\n"
                "# Written by distributed_suite.py --backend gloo --world N --record (this file); read by\n"
                "# --expect. A test that fails on gloo fails for reasons not ours (the Python 3.11 dataclass\n"
                "# error inside torch.distributed._shard, say): it is listed so, never skipped silently.\n"
                f"# recorded on {platform()}\n")
        for w in sorted(table):
            for name in sorted(table[w]):
                outcome, why = table[w][name]
                f.write(f"{w} {name} {outcome}{' ' + why if why and outcome == 'fail' else ''}\n")


def compare(backend, world, outcomes, path, out):
    """Prints what the control list says against this run; returns how many tests broke it: for
    ddp, tests gloo passes that did not pass; for gloo itself, any outcome that changed."""
    recorded, table = read_list(path)
    if recorded != platform():
        out.write(f"{path} was recorded on {recorded or '?'}, this is {platform()}: record it again "
                  "(distributed_suite.py --backend gloo --world N --record)\n")
        return 1
    gloo = table.get(world)
    if not gloo:
        out.write(f"no gloo outcomes for world {world} in {path}\n")
        return 1
    for n, (o, why) in sorted(gloo.items()):
        if o == "fail":
            out.write(f"GLOO-FAILS {n} ({outcomes.get(n, 'not run')} here), not ours: {why}\n")
    if backend == "gloo":
        bad = [n for n in sorted(set(gloo) | set(outcomes)) if gloo.get(n, ("none",))[0] != outcomes.get(n)]
        for n in bad:
            out.write(f"DRIFT {n}: {gloo.get(n, ('not listed',))[0]} in the list, {outcomes.get(n, 'not run')} now\n")
        return len(bad)
    bad = [n for n, (o, _) in sorted(gloo.items()) if o == "pass" and outcomes.get(n) != "pass"]
    for n in bad:
        out.write(f"REGRESSION {n}: passes on gloo, {outcomes.get(n, 'not run')} on {backend}\n")
    return len(bad)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--only", help="run only tests whose name matches this regex")
    parser.add_argument("--log", help="the ranks' own output (default: a file in the temp dir)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--expect", help="the control list to hold this run to")
    group.add_argument("--record", help="the control list to write this world's outcomes into")
    args = parser.parse_args()
    try:
        import torch.testing._internal.distributed  # noqa: F401
    except ImportError as e:
        print(f"PyTorch's distributed test suite is not installed: {e}")
        return SKIPPED
    os.environ["BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world)
    sys.argv = sys.argv[:1]  # common_utils parses sys.argv on import, and the ranks inherit it
    cls = load_suite(args.backend)
    names = unittest.TestLoader().getTestCaseNames(cls)
    if args.only:
        names = [n for n in names if re.search(args.only, n)]
    suite = unittest.TestSuite(cls(n) for n in names)

    # The ranks write to fds 1 and 2 (tracebacks, warnings): to the log; our lines to stdout.
    out = os.fdopen(os.dup(1), "w")
    log = args.log or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"distributed_suite_{args.backend}_{args.world}.log")
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    out.write(f"DistributedTest on {args.backend} at world {args.world}: {len(names)} tests (ranks' output: {log})\n")
    out.flush()
    result = LineResult(out)
    start = time.monotonic()
    suite.run(result)
    counts = {k: sum(1 for v in result.outcomes.values() if v == k) for k in ("pass", "fail", "skip")}
    out.write(f"{args.backend} world {args.world}: {counts['pass']} passed, {counts['fail']} failed, "
              f"{counts['skip']} skipped of {len(result.outcomes)} in {time.monotonic() - start:.0f} s\n")
    if args.record:
        write_list(args.record, args.world, result.outcomes, result.whys)
        out.write(f"recorded in {args.record}\n")
        return 0
    if args.expect:
        bad = compare(args.backend, args.world, result.outcomes, args.expect, out)
        out.write(f"{bad} test(s) broke the control list\n" if bad else "the control list holds\n")
        return 1 if bad else 0
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
elif __name__ == "__mp_main__" and os.environ.get("BACKEND"):
    load_suite(os.environ["BACKEND"])  # a rank the suite spawned: the same class, the same gates
