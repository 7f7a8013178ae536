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

"""openstackclient in the flow's process answers as its own process does.

Needs the cloud's environment (openstackclient), not a cloud: the
commands here fail before any request, or need none.
"""

import logging
import os
import subprocess
import sys

from rdt_virt.cloud import osc
from tests import base

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
# No cloud to authenticate against: openstackclient says what is missing.
NO_CLOUD = {'PATH': os.environ.get('PATH', ''), 'OS_CLOUD': '',
            'HOME': os.environ.get('HOME', '/root')}


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
            got = osc.run([OPENSTACK] + args, NO_CLOUD)
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

    def test_only_this_environments_openstack(self):
        self.assertFalse(osc.runs_here('/usr/bin/openstack'))
        self.assertFalse(osc.runs_here(os.path.join(
            os.path.dirname(sys.executable), 'gnocchi')))
