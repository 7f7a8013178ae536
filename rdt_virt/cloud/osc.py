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

"""openstackclient and gnocchiclient run in a long-lived Python process.

Each ``openstack`` command the flow ran as a new process spent most of
its time (about 3 s of this 2-core machine's, loaded by the guests) in
Python's start and openstackclient's imports. The flow's ``openstack``
and ``gnocchi`` commands, those it shows as typed and the reads it does
for its checks, run the same command line through the client's own entry
(cliff's ``App.run``) in a process that imported it once instead: the
same code, arguments, environment and output. A tool of the flow's own
environment runs in the flow's process (:func:`run`); a tool of another
environment (the metric client's ``openstack``, which must not see
gnocchiclient, or Gnocchi's own during an upgrade) in one :class:`Worker`
process of that environment, which runs one command at a time.

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

This module imports only the standard library until a command runs: a
worker runs it as a script with its environment's Python.
"""

import contextlib
import functools
import importlib.util
import io
import json
import logging
import os
import subprocess
import sys
import traceback
from unittest import mock


#: Seconds between a ``--wait``'s reads of its resource.
POLL = 1
#: The console scripts run in a Python process, and the module each needs.
TOOLS = {'openstack': 'openstackclient', 'gnocchi': 'gnocchiclient'}


def runs_here(tool):
    """Whether ``tool`` is a client of this process's environment."""
    name = os.path.basename(tool)
    return (name in TOOLS and
            os.path.realpath(os.path.dirname(tool)) ==
            os.path.realpath(os.path.dirname(sys.executable)) and
            importlib.util.find_spec(TOOLS[name]) is not None)


def runs_in_worker(tool):
    """Whether ``tool`` is a client of another environment with a Python."""
    return (os.path.basename(tool) in TOOLS and not runs_here(tool) and
            os.access(os.path.join(os.path.dirname(tool), 'python'),
                      os.X_OK))


def _app(name):
    if name == 'gnocchi':
        from gnocchiclient import shell
        return shell.GnocchiShell()
    from openstackclient import shell
    return shell.OpenStackShell()


def run(argv, env):
    """``argv`` (``openstack`` or ``gnocchi`` and its arguments) with ``env``.

    Returns (exit code, stdout, stderr), as the command's own process
    would. The root logger, which the clients configure for their
    process, this process's environment and ``sys.argv`` (whose first item
    names the program in the clients' messages) are left as they were.
    """
    from cliff import app as cliff_app
    # cliff names the program once, from the sys.argv of the process that
    # imported it.
    name = os.path.splitext(os.path.basename(argv[0]))[0]
    osc = name != 'gnocchi'
    if osc:
        _forget_clients()
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with contextlib.ExitStack() as stack:
            if osc:
                from osc_lib import utils as osc_utils
                stack.enter_context(_versions())
                stack.enter_context(_polls(osc_utils, 'wait_for_status'))
            stack.enter_context(mock.patch.dict(os.environ, env,
                                                clear=True))
            stack.enter_context(mock.patch.object(sys, 'argv', list(argv)))
            stack.enter_context(mock.patch.object(cliff_app.App, 'NAME',
                                                  name))
            stack.enter_context(contextlib.redirect_stdout(out))
            stack.enter_context(contextlib.redirect_stderr(err))
            app = _app(name)
            app.stdin, app.stdout, app.stderr = io.StringIO(), out, err
            try:
                code = app.run(list(argv[1:]))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else int(
                    e.code is not None)
    finally:
        if osc:
            _forget_clients()
        root.handlers[:] = handlers
        root.setLevel(level)
    return code, out.getvalue(), err.getvalue()


class Worker(object):
    """A Python process of another environment that runs its clients.

    Started at the first command, it runs this module as a script
    (:func:`serve`) and takes one command at a time: ``{"argv", "env"}``
    as a line of JSON in, ``{"code", "out", "err"}`` out. It ends when
    its input does, so at the latest with the process that started it.

    :param bin_dir: the environment's ``bin`` directory.
    :param log: a file for what the process writes outside any command
        (its own failure, if it fails); None: discarded.
    """

    def __init__(self, bin_dir, log=None):
        self.bin_dir = bin_dir
        self.log = log
        self.proc = None

    def _start(self):
        err = open(self.log, 'a') if self.log else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                [os.path.join(self.bin_dir, 'python'), _script()],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                text=True)
        finally:
            if self.log:
                err.close()

    def run(self, argv, env):
        """As :func:`run`, in the worker; a dead worker starts again."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps({'argv': list(argv),
                                              'env': dict(env)}) + '\n')
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ''
        if not line:
            code = self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:     # what was left unsent to the dead one
                    pass
            self.proc = None
            return 1, '', ('the client process of %s ended (exit %s) '
                           'before it answered%s\n' % (
                               self.bin_dir, code, '; see ' + self.log
                               if self.log else ''))
        reply = json.loads(line)
        return reply['code'], reply['out'], reply['err']

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc = None


def _script():
    path = os.path.abspath(__file__)
    return path[:-1] if path.endswith('.pyc') else path


def serve(requests, replies):
    """A :class:`Worker`'s loop: a command per line, until the input ends."""
    for line in requests:
        request = json.loads(line)
        try:
            code, out, err = run(request['argv'], request['env'])
        except Exception:   # noqa: the command's failure, not the worker's
            code, out, err = 1, '', traceback.format_exc()
        replies.write(json.dumps({'code': code, 'out': out, 'err': err}) +
                      '\n')
        replies.flush()


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


if __name__ == '__main__':
    # The replies go on a copy of stdout; what a library prints outside a
    # command's redirection goes to stderr instead of into them.
    _replies = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    serve(sys.stdin, _replies)
