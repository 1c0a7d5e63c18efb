"""What the stub trackers record: one JSON line per call, appended to the
file named by $STUB_TRACKER_LOG."""
import json
import os


def record(lib, call, *args, **kwargs):
    path = os.environ.get("STUB_TRACKER_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"lib": lib, "call": call, "args": args, "kwargs": kwargs},
                           default=repr) + "\n")
