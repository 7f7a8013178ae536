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

"""The installed console scripts, run as a shell runs them.

Each is started with its standard output a pipe whose reader has already
gone (``rdt-virt groups | head`` once ``head`` has exited): it must stop
quietly, with no traceback and no "Exception ignored" message, and with
status 141, as a process that SIGPIPE ended.
"""

import configparser
import os
import shutil
import subprocess
import sys
import time

import fixtures

from rdt_virt.agent import state
from rdt_virt.cmd import output
from tests import base
from tests.unit.telemetry import test_pollsters

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def console_scripts():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(TOP, 'setup.cfg'))
    lines = parser['entry_points']['console_scripts'].strip().splitlines()
    return sorted(line.split('=')[0].strip() for line in lines)


class TestClosedOutput(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def run_script(self, name, *args):
        """Run console script ``name`` with its stdout closed at the far end.

        :returns: (exit status, stderr).
        """
        path = os.path.join(os.path.dirname(sys.executable), name)
        self.require(os.path.exists(path), '%s is not installed next to %s'
                     % (name, sys.executable))
        read, write = os.pipe()
        os.close(read)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [TOP] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
        try:
            proc = subprocess.run([path] + list(args), stdout=write,
                                  stderr=subprocess.PIPE, env=env,
                                  cwd=self.tmp, timeout=120)
        finally:
            os.close(write)
        return proc.returncode, proc.stderr.decode('utf-8', 'replace')

    def assertQuiet(self, name, *args, **kw):
        code, err = self.run_script(name, *args)
        self.assertNotIn('Traceback', err)
        self.assertNotIn('BrokenPipeError', err)
        self.assertNotIn('Exception ignored', err)
        self.assertIn(code, kw.get('codes', (output.CLOSED,)), err)

    def test_help_of_every_console_script(self):
        # argparse ignores errors writing its help (the text is lost in
        # the buffer, status 0); what matters is that nothing is printed.
        names = console_scripts()
        self.assertIn('rdt-virt', names)
        for name in names:
            self.assertQuiet(name, '--help', codes=(0, output.CLOSED))

    def test_rdt_virt_commands(self):
        root = os.path.join(self.tmp, 'resctrl')
        shutil.copytree(os.path.join(base.FIXTURES_DIR, 'resctrl',
                                     'reference'), root)
        path = os.path.join(self.tmp, 'state.json')
        state.write(path, test_pollsters.document(time.time()))
        common = ['--resctrl-root', root, '--state-file', path]
        for command in (['groups'], ['groups', '--json'], ['capabilities'],
                        ['top', '--once'],
                        ['top', '--count', '2', '--interval', '0']):
            self.assertQuiet('rdt-virt', *(common + command))

    def test_other_console_scripts(self):
        self.assertQuiet('rdt-virt-emulator', 'profiles')
        self.assertQuiet('rdt-virt-emulator', 'kernels')
        self.assertQuiet('rdt-virt-sandbox', 'status', '--dir',
                         os.path.join(self.tmp, 'no-sandbox'))


class TestQuiet(base.TestCase):

    def test_other_broken_pipes_are_not_hidden(self):
        # Standard output is fine: a broken pipe elsewhere is an error.
        @output.quiet
        def main():
            raise BrokenPipeError(32, 'Broken pipe')

        read, write = os.pipe()
        out = os.fdopen(write, 'w')
        self.addCleanup(out.close)
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        try:
            self.assertRaises(BrokenPipeError, main)
        finally:
            os.close(read)
        # Its reader gone, the same error is the closed output.
        self.assertEqual(output.CLOSED, main())
