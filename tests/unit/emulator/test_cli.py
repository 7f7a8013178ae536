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

"""``rdt-virt-emulator`` without mounting anything."""

import io
import json
import os
import tempfile

import fixtures

from rdt_virt.cmd import emulator as cli
from rdt_virt.emulator import control
from rdt_virt.emulator import launcher
from tests import base
from tests.unit.emulator import fakes


class CliTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(cli, '_setup_logging'))
        self.stdout = self.useFixture(fixtures.MockPatch(
            'sys.stdout', io.StringIO())).mock
        self.stderr = self.useFixture(fixtures.MockPatch(
            'sys.stderr', io.StringIO())).mock

    def run_cli(self, *argv):
        return cli.main(list(argv))

    def test_profiles(self):
        self.assertEqual(0, self.run_cli('profiles'))
        lines = self.stdout.getvalue().splitlines()
        self.assertEqual(['aet', 'amd', 'amd-mb4096', 'amd-zen5', 'cdp',
                          'l3-cat', 'mba-mbps', 'monitoring', 'mpam',
                          'reference',
                          'reference-no-mba', 'reference-stock', 'snc2',
                          'wide'],
                         [line.split()[0] for line in lines])
        self.assertIn('Xeon Gold 6252', lines[-5])

    def test_topology(self):
        self.assertEqual(0, self.run_cli('topology', '--profile', 'amd',
                                         '--cpus', '0-3'))
        files = json.loads(self.stdout.getvalue())
        self.assertEqual('32768K\n', files['cpu3/cache/index3/size'])
        self.assertEqual('2-3\n', files['cpu3/cache/index3/shared_cpu_list'])

    def test_mount_errors(self):
        empty = tempfile.mkdtemp()
        full = tempfile.mkdtemp()
        open(os.path.join(full, 'x'), 'w').close()
        self.useFixture(fixtures.MockPatch(
            'ctypes.util.find_library', return_value='libfuse3.so.3'))
        self.useFixture(fixtures.MockPatchObject(launcher, 'DEV_FUSE', '/'))
        cases = [
            (('--profile', 'skylake', empty), "unknown profile 'skylake'"),
            (('/nonexistent/dir',),
             'mount point /nonexistent/dir does not exist'),
            ((full,), 'mount point %s is not empty' % full),
        ]
        for args, text in cases:
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertEqual(1, self.run_cli('mount', *args))
            self.assertIn('rdt-virt-emulator: error: ' + text,
                          self.stderr.getvalue())
        self.useFixture(fixtures.MockPatchObject(
            launcher, 'DEV_FUSE', '/nonexistent/fuse'))
        self.assertEqual(1, self.run_cli('mount', empty))
        self.assertIn('/nonexistent/fuse is missing',
                      self.stderr.getvalue())

    def test_mount_from_tree_says_what_it_assumed(self):
        capture = os.path.join(base.FIXTURES_DIR, 'captures',
                               'spr-4410y-mba-mbps')
        # The mount itself fails here (no mount point); what the emulator
        # assumed is printed before it tries.
        self.assertEqual(1, self.run_cli('mount', '--from-tree', capture,
                                         '--mon-scale', '106496',
                                         '/nonexistent/dir'))
        err = self.stderr.getvalue()
        for text in ('assumed kernel 6.8 (the capture\'s kernel release '
                     '6.8.0-49-generic; --kernel to change)',
                     'assumed RMID limbo checked every 1s',
                     'assumed counter unit 106496 bytes (given;',
                     'assumed vendor intel, mount options: mba_MBps',
                     'assumed domains: L3 0,1; L2 0,1,2,3,4,5,6,7,8,9,10,'
                     '11,64,65,'):
            self.assertIn('rdt-virt-emulator: ' + text, err)
        self.assertEqual('', self.stdout.getvalue())

    def test_missing_libfuse(self):
        self.useFixture(fixtures.MockPatch('ctypes.util.find_library',
                                           return_value=None))
        self.useFixture(fixtures.EnvironmentVariable('FUSE_LIBRARY_PATH'))
        self.useFixture(fixtures.MockPatchObject(launcher, 'DEV_FUSE', '/'))
        self.assertEqual(1, self.run_cli('mount', tempfile.mkdtemp()))
        self.assertIn('libfuse3 is not installed: apt-get install fuse3',
                      self.stderr.getvalue())

    def test_ctl(self):
        path = os.path.join(tempfile.mkdtemp(), 'control')
        server = control.ControlServer(path, self.model)
        server.start()
        self.addCleanup(server.stop)
        self.tree.mkdir('/g1')
        self.assertEqual(0, self.run_cli(
            'ctl', '--control', path, 'set-counter', '--group', 'g1',
            '--domain', '1', '--event', 'mbm_local_bytes', '--value', '42'))
        self.assertEqual('42\n', self.read(
            '/g1/mon_data/mon_L3_01/mbm_local_bytes'))
        self.assertEqual(0, self.run_cli(
            'ctl', '--control', path, 'set-sentinel', '--group', 'g1',
            '--sentinel', 'Error'))
        self.assertEqual('Error\n', self.read(
            '/g1/mon_data/mon_L3_00/llc_occupancy'))
        self.stdout.seek(0)
        self.stdout.truncate()
        self.assertEqual(0, self.run_cli('ctl', '--control', path, 'status'))
        self.assertEqual(['/', 'g1'],
                         json.loads(self.stdout.getvalue())['groups'])
        self.assertEqual(1, self.run_cli('ctl', '--control', path + 'x',
                                         'ping'))
        self.assertIn('cannot reach the emulator', self.stderr.getvalue())
