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

"""The clients in the flow's process answer as their own processes do.

Needs the cloud's environment (openstackclient), not a cloud: the
commands here fail before any request, or need none.
"""

from http import server as http_server
import json
import logging
import os
import subprocess
import sys
import threading
import types
import warnings

import fixtures

from rdt_virt.cloud import osc
from tests import base

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
GNOCCHI = os.path.join(os.path.dirname(sys.executable), 'gnocchi')
# No cloud to authenticate against: openstackclient says what is missing.
# Import warnings are printed once per process, by whichever command (or
# test) imported the module first: every process here ignores them, so
# that stderr holds the command's own answer only.
NO_CLOUD = {'PATH': os.environ.get('PATH', ''), 'OS_CLOUD': '',
            'HOME': os.environ.get('HOME', '/root'),
            'PYTHONWARNINGS': 'ignore'}


def run_here(argv, env):
    """osc.run, with this process's warnings ignored as NO_CLOUD's are."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return osc.run(argv, env)


class TestInProcess(base.TestCase):

    def setUp(self):
        super().setUp()
        self.require(osc.runs_here(OPENSTACK),
                     'openstackclient is not installed in this environment')

    def process(self, *args):
        proc = subprocess.run([OPENSTACK] + list(args), env=NO_CLOUD,
                              capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        return proc.returncode, proc.stdout, proc.stderr

    def test_the_same_answers_as_the_command(self):
        for args in (['--version'],
                     ['flavor', 'list', '-f', 'json'],
                     ['server', 'show', 'x', '--no-such-option'],
                     ['complete', '--name', 'openstack']):
            got = run_here([OPENSTACK] + args, NO_CLOUD)
            self.assertEqual(self.process(*args), got, args)
        # A failed command is a failure, with its reason.
        code, _, err = osc.run([OPENSTACK, 'flavor', 'list'], NO_CLOUD)
        self.assertNotEqual(0, code)
        self.assertIn('auth', err.lower())

    def test_leaves_logging_and_the_environment_as_they_were(self):
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        environ, argv = dict(os.environ), list(sys.argv)
        osc.run([OPENSTACK, '--debug', 'flavor', 'list'], NO_CLOUD)
        self.assertEqual(handlers, root.handlers)
        self.assertEqual(level, root.level)
        self.assertEqual(environ, dict(os.environ))
        self.assertEqual(argv, sys.argv)

    def test_a_wait_polls_every_second(self):
        from osc_lib import utils as osc_utils
        wait_for_status = osc_utils.wait_for_status
        states = iter(['BUILD', 'BUILD', 'ACTIVE'])
        slept = []

        def command(app, argv):
            # What a command's --wait does, with the helper it looks up.
            return int(not osc_utils.wait_for_status(
                lambda uuid: types.SimpleNamespace(status=next(states)),
                'x'))
        self.useFixture(fixtures.MonkeyPatch(
            'openstackclient.shell.OpenStackShell.run', command))
        self.useFixture(fixtures.MonkeyPatch('time.sleep', slept.append))
        self.assertEqual((0, '', ''), osc.run(
            [OPENSTACK, 'server', 'create', '--wait', 'x'], NO_CLOUD))
        self.assertEqual([osc.POLL, osc.POLL], slept)
        # Only in the flow's commands.
        self.assertIs(wait_for_status, osc_utils.wait_for_status)

    def test_each_command_starts_with_the_modules_api_versions(self):
        # openstackclient 7.5 and 9.0 delete from the volume client module's
        # table the versions cinderclient lacks, once per process: a
        # second volume client then fails with KeyError.
        from openstackclient.common import clientmanager
        tables = [m.API_VERSIONS for m in clientmanager.PLUGIN_MODULES
                  if isinstance(getattr(m, 'API_VERSIONS', None), dict)]
        self.assertTrue(tables)
        before = [dict(t) for t in tables]

        def command(app, argv):
            for table in tables:
                table.clear()
            return 0
        self.useFixture(fixtures.MonkeyPatch(
            'openstackclient.shell.OpenStackShell.run', command))
        for _ in range(2):
            self.assertEqual((0, '', ''), osc.run(
                [OPENSTACK, 'server', 'create', 'x'], NO_CLOUD))
            self.assertEqual(before, [dict(t) for t in tables])

    def test_only_this_environments_clients(self):
        self.assertFalse(osc.runs_here('/usr/bin/openstack'))
        self.assertFalse(osc.runs_here(os.path.join(
            os.path.dirname(sys.executable), 'rdt-virt')))
        self.assertFalse(osc.runs_in_worker(OPENSTACK))

    def test_another_environments_client_runs_in_its_python(self):
        other = self.useFixture(fixtures.TempDir()).path
        tool = os.path.join(other, 'openstack')
        self.assertFalse(osc.runs_in_worker(tool))
        os.symlink(sys.executable, os.path.join(other, 'python'))
        self.assertTrue(osc.runs_in_worker(tool))
        self.assertFalse(osc.runs_in_worker(os.path.join(other, 'nova')))


class TestGnocchiInProcess(base.TestCase):

    def setUp(self):
        super().setUp()
        self.require(osc.runs_here(GNOCCHI),
                     'gnocchiclient is not installed in this environment')

    def test_the_same_answers_as_the_command(self):
        for args in (['--version'],
                     ['resource', 'list', '-f', 'json'],
                     ['measures', 'show', '--no-such-option']):
            proc = subprocess.run([GNOCCHI] + args, env=NO_CLOUD,
                                  capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL)
            self.assertEqual(
                (proc.returncode, proc.stdout, proc.stderr),
                run_here([GNOCCHI] + args, NO_CLOUD), args)


class TestWorker(base.TestCase):
    """Another environment's clients, in one process of its Python."""

    def setUp(self):
        super().setUp()
        self.require(osc.runs_here(OPENSTACK),
                     'openstackclient is not installed in this environment')
        self.log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'worker.log')
        # The worker's own warnings filter, which it reads when it starts.
        self.useFixture(fixtures.EnvironmentVariable('PYTHONWARNINGS',
                                                     'ignore'))
        self.worker = osc.Worker(os.path.dirname(OPENSTACK), log=self.log)
        self.addCleanup(self.worker.close)

    def test_the_same_answers_as_in_this_process_in_one_process(self):
        commands = [[OPENSTACK, '--version'],
                    [OPENSTACK, 'server', 'show', 'x', '--no-such-option']]
        if osc.runs_here(GNOCCHI):
            commands.append([GNOCCHI, '--version'])
        pids = set()
        for argv in commands:
            self.assertEqual(run_here(argv, NO_CLOUD),
                             self.worker.run(argv, NO_CLOUD), argv)
            pids.add(self.worker.proc.pid)
        self.assertEqual(1, len(pids))
        self.worker.close()
        self.assertIsNone(self.worker.proc)

    def test_each_command_with_its_own_environment(self):
        # No OS_CLOUD in the first, a cloud that does not exist in the
        # second: each command sees only its own.
        _, _, first = self.worker.run([OPENSTACK, 'flavor', 'list'],
                                      NO_CLOUD)
        code, _, second = self.worker.run(
            [OPENSTACK, 'flavor', 'list'], dict(NO_CLOUD, OS_CLOUD='nowhere'))
        self.assertNotEqual(0, code)
        self.assertIn('nowhere', second)
        self.assertNotIn('nowhere', first)

    def test_a_worker_that_ended_starts_again(self):
        self.worker.run([OPENSTACK, '--version'], NO_CLOUD)
        first = self.worker.proc
        first.kill()
        first.wait()
        self.assertEqual(run_here([OPENSTACK, '--version'], NO_CLOUD),
                         self.worker.run([OPENSTACK, '--version'], NO_CLOUD))
        self.assertIsNot(first, self.worker.proc)

    def test_a_worker_that_ends_without_an_answer_fails_the_command(self):
        other = self.useFixture(fixtures.TempDir()).path
        python = os.path.join(other, 'python')
        with open(python, 'w') as f:
            f.write('#!/bin/sh\necho "no such module" >&2\nexit 3\n')
        os.chmod(python, 0o755)
        worker = osc.Worker(other, log=self.log)
        code, out, err = worker.run([os.path.join(other, 'openstack'),
                                     '--version'], NO_CLOUD)
        self.assertEqual((1, ''), (code, out))
        self.assertIn('ended (exit 3)', err)
        self.assertIn(self.log, err)
        self.assertIsNone(worker.proc)
        with open(self.log) as f:
            self.assertIn('no such module', f.read())


class _Cloud(http_server.BaseHTTPRequestHandler):
    """Keystone and Nova, as far as ``flavor list`` needs them.

    A token names its user; the flavor listed names the token that asked.
    """

    def log_message(self, *args):
        pass

    def _json(self, body, status=200, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers['Content-Length'])))
        user = body['auth']['identity']['password']['user']['name']
        url = 'http://%s:%d' % self.server.server_address
        token = {
            'methods': ['password'],
            'user': {'id': user, 'name': user,
                     'domain': {'id': 'default', 'name': 'Default'}},
            'project': {'id': 'p-' + user, 'name': 'p-' + user,
                        'domain': {'id': 'default', 'name': 'Default'}},
            'roles': [{'id': 'member', 'name': 'member'}],
            'issued_at': '2026-01-01T00:00:00.000000Z',
            'expires_at': '2099-01-01T00:00:00.000000Z',
            'catalog': [{'type': 'compute', 'name': 'nova', 'id': 'c',
                         'endpoints': [{
                             'id': 'e', 'interface': 'public',
                             'region': 'RegionOne',
                             'region_id': 'RegionOne',
                             'url': url + '/compute/v2.1'}]}]}
        self._json({'token': token}, status=201,
                   headers=[('X-Subject-Token', 'token-of-' + user)])

    def do_GET(self):
        url = 'http://%s:%d/compute/v2.1' % self.server.server_address
        if self.path.rstrip('/') == '/compute/v2.1':
            self._json({'version': {
                'id': 'v2.1', 'status': 'CURRENT', 'version': '2.96',
                'min_version': '2.1', 'updated': '2013-07-23T11:33:21Z',
                'links': [{'rel': 'self', 'href': url + '/'}]}})
        elif self.path.startswith('/compute/v2.1/flavors/detail'):
            self._json({'flavors': [{
                'id': '1', 'name': self.headers.get('X-Auth-Token'),
                'ram': 1, 'disk': 1, 'vcpus': 1,
                'OS-FLV-EXT-DATA:ephemeral': 0, 'swap': 0,
                'os-flavor-access:is_public': True,
                'rxtx_factor': 1.0, 'description': None,
                'extra_specs': {}, 'links': []}]})
        else:
            self._json({'error': self.path}, status=404)


class TestUsersInTurn(base.TestCase):
    """Each command in this process goes with its own user's token."""

    def setUp(self):
        super().setUp()
        self.require(osc.runs_here(OPENSTACK),
                     'openstackclient is not installed in this environment')
        server = http_server.ThreadingHTTPServer(('127.0.0.1', 0), _Cloud)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.auth_url = 'http://127.0.0.1:%d/identity/v3' % (
            server.server_address[1])

    def env(self, user):
        return dict(NO_CLOUD, OS_AUTH_TYPE='v3password',
                    OS_AUTH_URL=self.auth_url, OS_USERNAME=user,
                    OS_PASSWORD='secret', OS_PROJECT_NAME='p-' + user,
                    OS_USER_DOMAIN_NAME='Default',
                    OS_PROJECT_DOMAIN_NAME='Default',
                    OS_IDENTITY_API_VERSION='3',
                    OS_REGION_NAME='RegionOne', OS_INTERFACE='public')

    def test_each_user_with_their_own_token(self):
        argv = [OPENSTACK, 'flavor', 'list', '-f', 'value', '-c', 'Name']
        for user in ('admin', 'alice', 'admin', 'bob'):
            code, out, err = osc.run(argv, self.env(user))
            self.assertEqual((0, 'token-of-%s\n' % user), (code, out), err)
