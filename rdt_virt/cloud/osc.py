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

"""openstackclient run in the flow's own process.

Each ``openstack`` command the flow ran as a new process spent most of
its time (about 3 s of this 2-core machine's, loaded by the guests) in
Python's start and openstackclient's imports. The flow's ``openstack``
commands, those it shows as typed and the reads it does for its checks,
run the same command line through openstackclient's own entry
(``OpenStackShell().run``) in this process instead: the same code,
arguments, environment and output, imported once.

osc-lib keeps each service's client (with the session, hence the token,
of the user who made it) on a descriptor of the ``ClientManager`` class,
not on the instance: one process, one command, one user. Left there, a
second user's command run in the same process would send the first
user's token (openstackclient 10.5 listed the admin project's servers for
a tenant). :func:`run` drops those clients before and after each command.
For the same reason it gives each command the API versions that each
service's client module starts with: openstackclient 7.5 and 9.0 (2025.1,
2026.1) delete the versions the installed cinderclient lacks from their
module's table the first time a volume client is made, so that a second
``server create`` in one process fails with ``KeyError: '1'``.

A command's ``--wait`` on a state (a boot, a migration, a resize, a
rebuild) polls its resource every :data:`POLL` seconds here, where
openstackclient's own polls every 5 (osc-lib's ``wait_for_status``): each
wait then ends within a second of the change rather than 2.5 s after it on
average. A delete's wait is openstacksdk's, every 2 s, and stays so.
"""

import contextlib
import functools
import importlib.util
import io
import logging
import os
import sys
from unittest import mock


#: Seconds between a ``--wait``'s reads of its resource.
POLL = 1


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
    from osc_lib import utils as osc_utils
    _forget_clients()
    # cliff names the program once, from the sys.argv of the process that
    # imported it.
    name = os.path.splitext(os.path.basename(argv[0]))[0]
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with _versions(), \
                mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.object(sys, 'argv', list(argv)), \
                mock.patch.object(cliff_app.App, 'NAME', name), \
                _polls(osc_utils, 'wait_for_status'), \
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
        _forget_clients()
        root.handlers[:] = handlers
        root.setLevel(level)
    return code, out.getvalue(), err.getvalue()


def _polls(module, name):
    """``module.name`` polling every POLL seconds, unless told otherwise.

    openstackclient looks the helper up on osc-lib's module at each call.
    """
    wait = getattr(module, name)
    return mock.patch.object(module, name, functools.partial(
        wait, sleep_time=POLL))


@contextlib.contextmanager
def _versions():
    """Each client module's API_VERSIONS, restored after the command."""
    from openstackclient.common import clientmanager as osc_manager
    with contextlib.ExitStack() as stack:
        for module in osc_manager.PLUGIN_MODULES:
            table = getattr(module, 'API_VERSIONS', None)
            if isinstance(table, dict):
                stack.enter_context(mock.patch.dict(table))
        yield


def _forget_clients():
    """Drop the service clients osc-lib cached for the last command."""
    from openstackclient.common import clientmanager as osc_manager
    from osc_lib import clientmanager
    for klass in osc_manager.ClientManager.__mro__:
        for attr in vars(klass).values():
            if isinstance(attr, clientmanager.ClientCache):
                attr._handle = None
