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

Only a closed standard output is quiet: a BrokenPipeError from anything
else (a socket, a pipe to a helper) is re-raised, so that a daemon's real
error is never hidden. Standard output counts as closed when polling its
descriptor reports an error or a hang-up, as Linux does for a pipe with no
reader left.
"""

import functools
import os
import select
import signal
import sys

# 128 + SIGPIPE, as a shell reports a command that SIGPIPE ended.
CLOSED = 128 + signal.SIGPIPE


def stdout_closed():
    """True if nobody reads ``sys.stdout`` any more."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP)
                   for _fd, events in poll.poll(0))
    except (AttributeError, OSError, ValueError):
        # No descriptor behind sys.stdout (a test's StringIO).
        return False


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
            if not stdout_closed():
                raise
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            return CLOSED

    return wrapper
