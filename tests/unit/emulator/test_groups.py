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

"""Group directories: mkdir limits, rmdir, rename, remount, layout."""

import errno
import stat

from tests.unit.emulator import fakes


class LayoutTest(fakes.ModelTestCase):

    def test_root_and_group_layout(self):
        self.assertEqual(['cpus', 'cpus_list', 'mode', 'schemata', 'size',
                          'tasks', 'mon_data', 'mon_groups', 'info'],
                         self.tree.readdir('/'))
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        self.assertEqual(['cpus', 'cpus_list', 'mode', 'schemata', 'size',
                          'tasks', 'mon_data', 'mon_groups'],
                         self.tree.readdir('/g1'))
        self.assertEqual(['cpus', 'cpus_list', 'tasks', 'mon_data'],
                         self.tree.readdir('/g1/mon_groups/m1'))
        self.assertEqual(['mon_L3_00', 'mon_L3_01'],
                         self.tree.readdir('/g1/mon_groups/m1/mon_data'))
        self.assertEqual(['llc_occupancy', 'mbm_total_bytes',
                          'mbm_local_bytes'],
                         self.tree.readdir('/mon_data/mon_L3_01'))
        self.assertIn('g1', self.tree.readdir('/'))

    def test_entry_types(self):
        self.tree.mkdir('/g1')
        modes = dict(self.tree.readdir_modes('/'))
        self.assertEqual(self.tree.readdir('/'), list(modes))
        self.assertEqual(
            {'info', 'mon_data', 'mon_groups', 'g1'},
            {n for n, m in modes.items() if m == stat.S_IFDIR})
        self.assertEqual(stat.S_IFREG, modes['schemata'])
        self.assertEqual([('llc_occupancy', stat.S_IFREG),
                          ('mbm_total_bytes', stat.S_IFREG),
                          ('mbm_local_bytes', stat.S_IFREG)],
                         self.tree.readdir_modes('/mon_data/mon_L3_00'))

    def test_modes_and_owners(self):
        self.tree.mkdir('/g1', 0o750, ctx=fakes.tree.Context(1000, 100, 5))
        # kernfs: the root is 0555 and info inherits it.
        cases = [('/', 0o40555), ('/info', 0o40555), ('/info/L3', 0o40555),
                 ('/mon_data', 0o40555), ('/mon_groups', 0o40555),
                 ('/info/last_cmd_status', 0o100444),
                 ('/info/L3_MON/max_threshold_occupancy', 0o100644),
                 ('/info/MB/min_bandwidth', 0o100444),
                 ('/tasks', 0o100644), ('/size', 0o100444),
                 ('/g1', 0o40750), ('/g1/mon_data/mon_L3_00', 0o40750),
                 ('/g1/schemata', 0o100644),
                 ('/g1/mon_data/mon_L3_00/llc_occupancy', 0o100444)]
        for path, mode in cases:
            attrs = self.tree.getattr(path)
            self.assertEqual(oct(mode), oct(attrs['st_mode']), path)
            self.assertEqual(0, attrs['st_size'])
        self.assertEqual((1000, 100), (self.tree.getattr('/g1/tasks')[
            'st_uid'], self.tree.getattr('/g1/tasks')['st_gid']))
        self.assertEqual(0, self.tree.getattr('/tasks')['st_uid'])
        # Read-only files cannot be opened for writing, even by root.
        self.assertFails(errno.EACCES, self.tree.check_open, '/size', True)
        self.tree.check_open('/schemata', True)
        self.assertFails(errno.ENOENT, self.tree.getattr, '/nope')
        self.assertFails(errno.ENOTDIR, self.tree.getattr, '/tasks/x')

    def test_info_files(self):
        expected = {
            '/info/L3/num_closids': '16\n', '/info/L3/cbm_mask': '7ff\n',
            '/info/L3/min_cbm_bits': '1\n', '/info/L3/shareable_bits': '600\n',
            '/info/L3/sparse_masks': '0\n', '/info/MB/num_closids': '8\n',
            '/info/MB/min_bandwidth': '10\n',
            '/info/MB/bandwidth_gran': '10\n', '/info/MB/delay_linear': '1\n',
            '/info/MB/thread_throttle_mode': 'max\n',
            '/info/L3_MON/num_rmids': '192\n',
            '/info/L3_MON/mon_features':
                'llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n',
            '/info/L3_MON/max_threshold_occupancy': '131072\n',
            '/info/last_cmd_status': 'ok\n',
        }
        for path, text in expected.items():
            self.assertEqual(text, self.read(path), path)

    def test_max_threshold_occupancy(self):
        path = '/info/L3_MON/max_threshold_occupancy'
        self.write(path, '0x30000\n')
        self.assertEqual('196608\n', self.read(path))
        self.write(path, '100000\n')   # rounded down to the 64 KiB unit
        self.assertEqual('65536\n', self.read(path))
        # Above the L3 size; above 32 bits.
        self.assertFails(errno.EINVAL, self.write, path, '40000000\n')
        self.assertFails(errno.ERANGE, self.write, path, '99999999999\n')
        self.assertFails(errno.EINVAL, self.write, path, 'x\n')


class MkdirTest(fakes.ModelTestCase):

    def test_closid_limit(self):
        # Reference: MB has 8 CLOSIDs, so 7 groups besides the root.
        for i in range(7):
            self.tree.mkdir('/g%d' % i)
        self.assertEqual('Out of CLOSIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g7'))
        self.tree.rmdir('/g3')
        self.tree.mkdir('/g7')
        # Neither rmdir nor mkdir clears the status: the old text lingers.
        self.assertEqual('Out of CLOSIDs\n', self.status())
        # The freed CLOSID is reused (lowest first).
        self.assertEqual(4, self.model.find('g7').closid)

    def test_closid_limits_per_profile(self):
        for profile, limit in (('cdp', 7), ('amd', 15), ('l3-cat', 15)):
            self.model.remount(profile)
            for i in range(limit):
                self.tree.mkdir('/g%d' % i)
            self.assertEqual('Out of CLOSIDs\n', self.assertFails(
                errno.ENOSPC, self.tree.mkdir, '/x'), profile)

    def test_rmid_limit_and_limbo(self):
        model = self.make_model('reference', limbo_delay=2.0)
        self.model, self.tree = model, fakes.tree.ResctrlTree(model)
        self.tree.mkdir('/g1')
        for i in range(190):    # 192 RMIDs: root and g1 hold two
            self.tree.mkdir('/g1/mon_groups/m%d' % i)
        self.assertEqual('Out of RMIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g1/mon_groups/x'))
        # A control group needs an RMID too; its CLOSID goes back. mkdir
        # does not clear the status, each failure appends to it.
        self.assertEqual('Out of RMIDs\n' * 2, self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g2'))
        self.tree.rmdir('/g1/mon_groups/m0')
        # Freed, but in limbo until its occupancy drains.
        self.assertEqual('Out of RMIDs\n' * 3, self.assertFails(
            errno.EBUSY, self.tree.mkdir, '/g1/mon_groups/x'))
        self.clock.advance(2.0)
        self.tree.mkdir('/g1/mon_groups/x')
        self.tree.rmdir('/g1')   # frees 191 RMIDs into limbo
        self.assertFails(errno.EBUSY, self.tree.mkdir, '/g2')
        self.clock.advance(2.0)
        self.tree.mkdir('/g2')

    def test_no_limbo_without_cmt(self):
        import dataclasses

        from rdt_virt.emulator import profiles

        mbm_only = dataclasses.replace(
            profiles.REFERENCE, name='mbm', mon=dataclasses.replace(
                profiles.REFERENCE.mon, num_rmids=3,
                events=('mbm_total_bytes',)))
        self.model.remount(mbm_only)
        self.tree.mkdir('/mon_groups/a')
        self.tree.mkdir('/mon_groups/b')
        self.assertFails(errno.ENOSPC, self.tree.mkdir, '/mon_groups/c')
        self.tree.rmdir('/mon_groups/a')
        self.tree.mkdir('/mon_groups/c')
        self.assertEqual(['mbm_total_bytes'],
                         self.tree.readdir('/mon_data/mon_L3_00'))

    def test_refusals(self):
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        cases = [
            # (path, errno); none of them touches the status
            ('/g1', errno.EEXIST),
            ('/tasks', errno.EEXIST),
            ('/info', errno.EEXIST),
            ('/info/x', errno.EPERM),
            ('/info/L3/x', errno.EPERM),
            ('/bad\nname', errno.EINVAL),
            ('/g1/x', errno.EPERM),
            ('/g1/mon_data/x', errno.EPERM),
            ('/g1/mon_data/mon_L3_00/x', errno.EPERM),
            ('/g1/mon_groups/m1/x', errno.EPERM),
            ('/g1/mon_groups/mon_groups', errno.EPERM),
            ('/tasks/x', errno.ENOTDIR),
            ('/nope/x', errno.ENOENT),
        ]
        for path, err in cases:
            self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                                  '/g1/schemata', 'L3:0=f0f\n')
            status = self.assertFails(err, self.tree.mkdir, path)
            self.assertEqual('Mask out of range\n', status, path)

    def test_monitoring_only_profile(self):
        self.model.remount('monitoring')
        self.assertFails(errno.EPERM, self.tree.mkdir, '/g1')
        self.tree.mkdir('/mon_groups/m1')
        self.assertEqual(['cpus', 'cpus_list', 'mode', 'schemata', 'size',
                          'tasks', 'mon_data', 'mon_groups', 'info'],
                         self.tree.readdir('/'))

    def test_no_monitoring_profile(self):
        self.model.remount('l3-cat')
        self.tree.mkdir('/g1')
        self.assertEqual(['cpus', 'cpus_list', 'mode', 'schemata', 'size',
                          'tasks'], self.tree.readdir('/g1'))
        self.assertEqual(['last_cmd_status', 'L3'],
                         self.tree.readdir('/info'))


class RmdirRenameTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        self.tree.mkdir('/g2')

    def test_rmdir_refusals_leave_status(self):
        self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                              '/g1/schemata', 'L3:0=f0f\n')
        for path, err in [('/info', errno.EPERM), ('/info/L3', errno.EPERM),
                          ('/mon_groups', errno.EPERM),
                          ('/g1/mon_groups', errno.EPERM),
                          ('/g1/mon_data', errno.EPERM),
                          ('/g1/mon_data/mon_L3_00', errno.EPERM),
                          ('/g1/tasks', errno.ENOTDIR),
                          ('/nope', errno.ENOENT)]:
            self.assertEqual('Mask out of range\n',
                             self.assertFails(err, self.tree.rmdir, path),
                             path)
        # A successful rmdir does not clear the status either.
        self.tree.rmdir('/g2')
        self.assertEqual('Mask out of range\n', self.status())

    def test_rmdir_returns_tasks_and_cpus(self):
        self.write('/g1/tasks', '100')
        self.write('/g1/tasks', '101')
        self.write('/g1/mon_groups/m1/tasks', '101')
        self.write('/g1/cpus_list', '1\n')
        self.write('/g1/mon_groups/m1/cpus_list', '1\n')
        self.tree.rmdir('/g1/mon_groups/m1')
        self.assertEqual('100\n101\n', self.read('/g1/tasks'))
        self.assertEqual('1\n', self.read('/g1/cpus_list'))
        self.tree.rmdir('/g1')
        self.assertEqual('0-1\n', self.read('/cpus_list'))
        self.assertIn('101\n', self.read('/tasks'))
        self.assertNotIn('g1', self.tree.readdir('/'))
        self.assertFails(errno.ENOENT, self.tree.getattr, '/g1/tasks')

    def test_rename_mon_group(self):
        self.write('/g1/tasks', '100')
        self.write('/g1/mon_groups/m1/tasks', '100')
        self.model.counters.inject_value(self.model.find('g1/mon_groups/m1'),
                                         4096, 0, 'mbm_total_bytes')
        self.tree.rename('/g1/mon_groups/m1', '/g2/mon_groups/moved')
        self.assertEqual('100\n', self.read('/g2/mon_groups/moved/tasks'))
        self.assertEqual('100\n', self.read('/g2/tasks'))
        self.assertEqual('', self.read('/g1/tasks'))
        self.assertEqual('4096\n', self.read(
            '/g2/mon_groups/moved/mon_data/mon_L3_00/mbm_total_bytes'))
        # Into the root's mon_groups, and a plain rename.
        self.tree.rename('/g2/mon_groups/moved', '/mon_groups/moved')
        self.tree.rename('/mon_groups/moved', '/mon_groups/m2')
        self.assertEqual(['m2'], self.tree.readdir('/mon_groups'))
        self.assertIn('100\n', self.read('/tasks'))

    def test_rename_refusals(self):
        self.tree.mkdir('/g2/mon_groups/m1')
        cases = [
            ('/g1', '/g3', errno.EPERM, 'Source must be a MON group\n'),
            ('/g1/mon_data', '/g2/mon_groups/x', errno.EPERM,
             'Source must be a MON group\n'),
            ('/g1/mon_groups/m1', '/g3', errno.EPERM,
             'Destination must be a mon_groups subdirectory\n'),
            ('/g1/mon_groups/m1', '/g2/mon_groups/mon_groups', errno.EPERM,
             'Destination must be a mon_groups subdirectory\n'),
            ('/g1/tasks', '/g2/mon_groups/t', errno.EPERM,
             'Source and destination must be directories'),
            ('/g1/mon_groups/m1', '/g2/mon_groups/m1', errno.EEXIST, 'ok\n'),
            ('/info/L3', '/g2/mon_groups/x', errno.ENOENT, 'KEEP'),
            ('/g1/mon_groups/m1', '/info/x', errno.ENOENT, 'KEEP'),
        ]
        for old, new, err, status in cases:
            self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                                  '/g1/schemata', 'L3:0=f0f\n')
            got = self.assertFails(err, self.tree.rename, old, new)
            self.assertEqual('Mask out of range\n' if status == 'KEEP'
                             else status, got, (old, new))
        self.write('/g1/mon_groups/m1/cpus_list', '')
        self.write('/g1/cpus_list', '1')
        self.write('/g1/mon_groups/m1/cpus_list', '1')
        self.assertEqual('Cannot move a MON group that monitors CPUs\n',
                         self.assertFails(errno.EPERM, self.tree.rename,
                                          '/g1/mon_groups/m1',
                                          '/g2/mon_groups/x'))
        # Within the same parent it is only a rename: allowed.
        self.tree.rename('/g1/mon_groups/m1', '/g1/mon_groups/x')

    def test_remount(self):
        self.write('/g1/tasks', '100')
        self.write('/schemata', 'L3:0=3\n')
        self.write('/cpus_list', '0-1')
        self.write('/g1/cpus_list', '1')
        self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                              '/schemata', 'L3:0=f0f\n')
        self.model.remount()
        self.assertEqual(['cpus', 'cpus_list', 'mode', 'schemata', 'size',
                          'tasks', 'mon_data', 'mon_groups', 'info'],
                         self.tree.readdir('/'))
        self.assertEqual('    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n',
                         self.read('/schemata'))
        self.assertEqual('0-1\n', self.read('/cpus_list'))
        self.assertIn('100\n', self.read('/tasks'))
        self.assertEqual('ok\n', self.status())
        # Switching profile is a remount with other options.
        self.model.remount('cdp')
        self.assertEqual('    MB:0=100;1=100\nL3DATA:0=7ff;1=7ff\n'
                         'L3CODE:0=7ff;1=7ff\n', self.read('/schemata'))
        self.assertEqual('cdp', self.model.profile.name)


class MutationLogTest(fakes.ModelTestCase):

    def test_log(self):
        self.tree.mkdir('/g1')
        self.assertFails(errno.EINVAL, self.write, '/g1/schemata',
                         'MB:0=1\n')
        self.tree.rmdir('/g1')
        entries = self.model.log.since(0)
        self.assertEqual(
            [('mkdir', '/g1', None, 'ok', 0, 'ok\n'),
             ('write', '/g1/schemata', 'MB:0=1\n', 'EINVAL', errno.EINVAL,
              'MB value 1 out of range [10,100]\n'),
             ('rmdir', '/g1', None, 'ok', 0,
              'MB value 1 out of range [10,100]\n')],
            [(e['op'], e['path'], e['data'], e['result'], e['errno'],
              e['status']) for e in entries])
        self.assertEqual([1, 2, 3], [e['seq'] for e in entries])
        self.assertEqual([3], [e['seq'] for e in self.model.log.since(2)])
