"""torchrun 1.13 as Debian ships it, made to start on Python 3.11.

Python 3.11's IntFlag iterates over its single-bit members only, so 1.13's Std.from_str (which
looks a value up by iterating Std) turns "0" and "3" into None and every launch fails in
to_map ("'NoneType' object has no attribute 'get'"). This replaces that lookup with Std(int)
and runs torch.distributed.run unchanged:

    /usr/bin/python3 bench/torchrun_shim.py [torchrun's arguments]
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = classmethod(_from_str)

if __name__ == "__main__":
    from torch.distributed.run import main

    sys.exit(main())
