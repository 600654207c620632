"""Stand-in for the `expecttest` package, which Debian 12 lacks and PyTorch 1.13's test helpers
(torch.testing._internal.common_utils) import: only what DistributedTest touches. Test-only;
on sys.path through distributed_suite.py alone."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (expecttest's name)
        self.assertEqual(str(actual).strip(), str(expect).strip())
