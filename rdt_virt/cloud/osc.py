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

"""openstackclient run in the flow's own process, for the flow's own reads.

Each ``openstack`` command the flow runs as a new process spends most of
its time (about 3 s of this 2-core machine's, loaded by the guests) in
Python's start and openstackclient's imports. The reads the flow does for
its checks, which it does not show, run the same command line through
openstackclient's own entry (``OpenStackShell().run``) in this process
instead: the same code, arguments, environment and output, imported once.
The commands the flow shows run as typed, each its own process.

One set of credentials per process: openstackclient 10.5 (openstacksdk
4.22) run in-process with a second user's environment sent that user's
compute requests with the first user's token (``server list`` of a tenant
returned the admin project's servers). The flow runs only the admin's
commands here; other users' run as processes.
"""

import contextlib
import importlib.util
import io
import logging
import os
import sys
from unittest import mock


def runs_here(tool):
    """Whether ``tool`` is the ``openstack`` of this process's environment."""
    return (os.path.basename(tool) == 'openstack' and
            os.path.realpath(os.path.dirname(tool)) ==
            os.path.realpath(os.path.dirname(sys.executable)) and
            importlib.util.find_spec('openstackclient') is not None)


def run(argv, env):
    """``argv`` (``openstack`` and its arguments) with ``env``.

    Returns (exit code, stdout, stderr), as the command's own process
    would. The root logger, which openstackclient configures for its
    process, this process's environment and ``sys.argv`` (whose first item
    names the program in openstackclient's messages) are left as they
    were.
    """
    from cliff import app as cliff_app
    from openstackclient import shell
    # cliff names the program once, from the sys.argv of the process that
    # imported it.
    name = os.path.splitext(os.path.basename(argv[0]))[0]
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.object(sys, 'argv', list(argv)), \
                mock.patch.object(cliff_app.App, 'NAME', name), \
                contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            app = shell.OpenStackShell()
            app.stdin, app.stdout, app.stderr = io.StringIO(), out, err
            try:
                code = app.run(list(argv[1:]))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else int(
                    e.code is not None)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return code, out.getvalue(), err.getvalue()
