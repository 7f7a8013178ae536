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

"""Injected refusals: matching, counts, last_cmd_status and the log."""

import errno
import os
import tempfile

from rdt_virt.emulator import control
from rdt_virt.emulator import faults
from rdt_virt.emulator import kparse
from tests.unit.emulator import fakes


class FaultsTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        self.faults = faults.Faults()
        self.tree.mkdir('/g1')

    def call(self, op, path, data=None, func=None, *args):
        """What the FUSE layer does: check the rules, then the tree."""
        self.faults.check(self.model, op, path, data)
        if func is not None:
            return func(*args)

    def test_write_refused_clears_then_sets_status(self):
        # An older failure's text must not survive a refused write.
        self.faults.add('mkdir', '/g2', 'ENOSPC', status='older\n')
        self.assertRaises(kparse.KernelError, self.call, 'mkdir', '/g2')
        self.assertEqual('older\n', self.status())
        self.faults.add('write', '/g1/schemata', 'EIO',
                        status='Failed to update schemata\n')
        e = self.assertRaises(kparse.KernelError, self.call, 'write',
                              '/g1/schemata', 'MB:0=10\n')
        self.assertEqual(errno.EIO, e.errno)
        self.assertEqual('Failed to update schemata\n', self.status())
        # The write never reached the model.
        self.assertIn('MB:0=100;1=100', self.read('/g1/schemata'))
        last = self.model.log.entries[-1]
        self.assertEqual(('write', '/g1/schemata', 'MB:0=10\n', 'EIO'),
                         (last['op'], last['path'], last['data'],
                          last['result']))

    def test_mkdir_appends_without_clearing(self):
        self.faults.add('write', '/g1/tasks', 'EIO', status='older\n')
        self.assertRaises(kparse.KernelError, self.call, 'write',
                          '/g1/tasks', '1\n')
        self.faults.add('mkdir', '/rdtvirt-*', 'ENOSPC',
                        status='Kernel out of memory\n')
        self.assertRaises(kparse.KernelError, self.call, 'mkdir',
                          '/rdtvirt-mb10')
        self.assertEqual('older\nKernel out of memory\n', self.status())

    def test_rmdir_and_read_leave_status_alone(self):
        self.faults.add('rmdir', '/g1', 'EBUSY', status='ignored\n')
        self.faults.add('read', '/g1/tasks', 'EIO', status='ignored\n')
        self.assertRaises(kparse.KernelError, self.call, 'rmdir', '/g1')
        self.assertRaises(kparse.KernelError, self.call, 'read',
                          '/g1/tasks')
        self.assertEqual('ok\n', self.status())
        self.assertEqual(['rmdir'], [e['op'] for e in self.model.log.entries
                                     if e['errno'] == errno.EBUSY])

    def test_count_skip_and_glob(self):
        self.faults.add('write', '*/tasks', 'ESRCH', count=2, skip=1)
        hits = []
        for path in ('/tasks', '/g1/tasks', '/g1/mon_groups/m/tasks',
                     '/g1/tasks', '/g1/schemata'):
            try:
                self.call('write', path, '1\n')
                hits.append(None)
            except kparse.KernelError as e:
                hits.append(e.errno)
        # The pattern is rooted ('/*/tasks': not the root's tasks) and '*'
        # spans '/'; the first match passes, two are refused, then the
        # spent rule is gone.
        self.assertEqual([None, None, errno.ESRCH, errno.ESRCH, None], hits)
        self.assertEqual([], self.faults.describe())

    def test_count_zero_refuses_until_cleared(self):
        rule = self.faults.add('rename', '/g1/mon_groups/*', 'EIO',
                               count=0)
        for _ in range(3):
            self.assertRaises(kparse.KernelError, self.call, 'rename',
                              '/g1/mon_groups/m', '/mon_groups/m')
        self.assertEqual(3, self.faults.describe()[0]['hits'])
        self.assertEqual(1, self.faults.clear(rule['id']))
        self.call('rename', '/g1/mon_groups/m', '/mon_groups/m')

    def test_other_ops_and_paths_pass(self):
        self.faults.add('mkdir', '/g2', 'ENOSPC')
        self.call('rmdir', '/g2')
        self.call('mkdir', '/g3')
        self.call('mkdir', '/g2/mon_groups/m', None, self.tree.mkdir,
                  '/g1/mon_groups/m')
        self.assertEqual(1, len(self.faults.describe()))

    def test_bad_rules(self):
        for args in (('unlink', '/x', 'EIO'), ('write', '', 'EIO'),
                     ('write', '/x', 'NOPE'), ('write', '/x', 'EIO', -1)):
            self.assertRaises(ValueError, self.faults.add, *args)
        self.assertEqual(errno.EIO, faults.errno_of(errno.EIO))


class ControlFaultsTest(fakes.ModelTestCase):

    def test_fail_faults_clear_over_the_socket(self):
        path = os.path.join(tempfile.mkdtemp(), 'control')
        server = control.ControlServer(path, self.model)
        server.start()
        self.addCleanup(server.stop)
        client = control.ControlClient(path, timeout=5)
        rule = client.fail('mkdir', 'rdtvirt-*', 'EBUSY', count=2,
                           status='Out of RMIDs\n')
        self.assertEqual({'id': 1, 'op': 'mkdir', 'pattern': '/rdtvirt-*',
                          'errno': 'EBUSY', 'count': 2, 'skip': 0,
                          'status': 'Out of RMIDs\n', 'hits': 0,
                          'seen': 0}, rule)
        self.assertRaises(kparse.KernelError, server.faults.check,
                          self.model, 'mkdir', '/rdtvirt-mb10')
        self.assertEqual(1, client.faults()[0]['hits'])
        self.assertEqual('Out of RMIDs\n',
                         client.status()['last_cmd_status'])
        e = self.assertRaises(control.ControlError, client.fail, 'mkdir',
                              '/x', 'EWHAT')
        self.assertIn('unknown errno', str(e))
        self.assertEqual(1, client.clear_faults())
        self.assertEqual([], client.faults())


class FuseHookTest(fakes.ModelTestCase):
    """The FUSE operations ask the rules before the tree."""

    def setUp(self):
        super().setUp()
        try:
            from rdt_virt.emulator import fusefs
        except (ImportError, OSError) as e:
            self.skipTest('mfusepy/libfuse3 unavailable: %s' % e)
        import mfusepy
        self.fuse_error = mfusepy.FuseOSError
        self.faults = faults.Faults()
        self.ops = fusefs.ResctrlOperations(self.tree, self.faults)

    def test_each_operation_is_checked(self):
        self.ops.mkdir('/g1', 0o755)
        self.faults.add('write', '/g1/schemata', 'EBUSY')
        self.faults.add('read', '/g1/tasks', 'EIO')
        self.faults.add('mkdir', '/g2', 'ENOSPC')
        self.faults.add('rmdir', '/g1', 'EBUSY')
        self.faults.add('rename', '/g1/mon_groups/*', 'EIO')
        calls = [(self.ops.write, '/g1/schemata', b'MB:0=10\n', 0, 1),
                 (self.ops.read, '/g1/tasks', 4096, 0, 2),
                 (self.ops.mkdir, '/g2', 0o755),
                 (self.ops.rmdir, '/g1'),
                 (self.ops.rename, '/g1/mon_groups/m', '/mon_groups/m')]
        found = []
        for func, *args in calls:
            e = self.assertRaises(self.fuse_error, func, *args)
            found.append(e.errno)
        self.assertEqual([errno.EBUSY, errno.EIO, errno.ENOSPC,
                          errno.EBUSY, errno.EIO], found)
        # Spent rules let the same calls through.
        self.assertEqual(8, self.ops.write('/g1/schemata', b'MB:0=10\n',
                                           0, 1))
        self.ops.rmdir('/g1')
