"""What the integrations (traceml_ai/integrations/) may use of the package:
one private interface instead of reaching into its module's names, so the
package can change its insides without breaking a framework's callback.

    from .. import _glue
    if _glue.active(): _glue.engine.step_begin()
"""
import os

import traceml_ai as _t

engine = _t._c                  # the C engine (python/_traceml.c), None when missing
warn = _t._warn                 # one TraceMLWarning line (naming the script's line)
version_tuple = _t._version_tuple
env = _t._env                   # a TRACEML_* variable, read as the engine reads it
env_disabled = _t._env_disabled
stop = _t._stop                 # ends TraceML in this process (status, exit code)
on_stop = _t._on_stop           # fn(status) once it ended
patch_with = _t._patch_with     # a recorded patch (taken back with the run)
sync_identity = _t._sync_identity
start_detected = _t._start_detected
note_loader = _t._note_loader
install_forward = _t._install_forward
command = os.path.join(os.path.dirname(os.path.abspath(_t.__file__)), "bin", "traceml")


def active():
    """TraceML runs in this process."""
    return _t._active


def config():
    """The InitConfig of the running (or last) init(), or None."""
    return _t._config
