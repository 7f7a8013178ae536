# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Console scripts whose output is closed (``rdt-virt groups | head``).

Python ignores SIGPIPE, so a write to a pipe whose reader has gone raises
BrokenPipeError: a traceback, or, when the error comes only from the
interpreter's last flush of ``sys.stdout``, an "Exception ignored" message
and status 120. A Unix tool stops quietly instead. :func:`quiet` gives
every console script that behaviour: it flushes ``sys.stdout`` before
returning (so a closed pipe shows up here, also after ``--help``), and on
BrokenPipeError points ``sys.stdout``'s descriptor at ``/dev/null`` (so the
interpreter's own flush at exit cannot fail again) and returns 141, the
status of a process that SIGPIPE ended, which tells a script (``set -o
pipefail``) that the output was cut short.

Long-running services keep Python's default for their sockets: this only
concerns what a command prints.
"""

import functools
import os
import signal
import sys

# 128 + SIGPIPE, as a shell reports a command that SIGPIPE ended.
CLOSED = 128 + signal.SIGPIPE


def quiet(main):
    """Make ``main`` (a console script's) stop quietly on a closed pipe."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            try:
                return main(*args, **kwargs)
            finally:
                # Also after SystemExit (argparse's --help and errors).
                if sys.stdout is not None:
                    sys.stdout.flush()
        except BrokenPipeError:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                # No descriptor behind sys.stdout (a test's StringIO).
                pass
            return CLOSED

    return wrapper
