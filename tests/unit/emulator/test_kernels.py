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

"""Kernel releases: specs, feature sets and the behaviour of each."""

import dataclasses
import errno

from rdt_virt.emulator import kernels
from rdt_virt.emulator import profiles
from tests import base
from tests.unit.emulator import fakes


class SpecTest(base.TestCase):

    def test_osrelease_names_the_base_release(self):
        # The agent reads limits no resctrl file shows from it.
        self.assertEqual('6.1.0-rdt-virt-emulated',
                         kernels.get_kernel('6.1+bw_validate').osrelease)
        self.assertTrue(kernels.get_kernel('newest').osrelease.startswith(
            kernels.NEWEST + '.'))

    def test_releases(self):
        self.assertEqual(frozenset(), kernels.get_kernel('5.14').features)
        self.assertEqual(frozenset(), kernels.get_kernel('6.1').features)
        self.assertEqual({'bmec', 'mon_rename', 'multi_tasks',
                          'sparse_masks'},
                         kernels.get_kernel('6.8').features)
        newest = kernels.get_kernel()
        self.assertEqual('7.1', newest.spec)
        self.assertTrue(newest.has('mpam'))
        self.assertTrue(kernels.get_kernel('7.0').has('perf_pkg'))
        self.assertFalse(kernels.get_kernel('7.0').has('mpam'))
        self.assertEqual(newest, kernels.get_kernel('newest'))
        self.assertTrue(newest.has('closid_bitmap'))
        self.assertFalse(newest.has('mkdir_clear_status'))
        self.assertTrue(kernels.get_kernel('6.18').has('no_padding'))

    def test_mixing(self):
        debian = kernels.get_kernel('6.1+bw_validate')
        self.assertEqual('6.1+bw_validate', debian.spec)
        self.assertEqual({'bw_validate'}, debian.features)
        k = kernels.get_kernel('newest-mon_rename-multi_tasks')
        self.assertFalse(k.has('mon_rename'))
        self.assertTrue(k.has('bw_validate'))
        self.assertIs(debian, kernels.get_kernel(debian))

    def test_bad_specs(self):
        for spec in ('6.2', 'linux', '6.1+nope', '6.1 bw_validate', '6'):
            self.assertRaises(kernels.UnknownKernel, kernels.get_kernel,
                              spec)
        self.assertRaises(KeyError, kernels.get_kernel('6.1').has, 'nope')

    def test_legacy_is_6_1(self):
        model = fakes.model.ResctrlModel('reference', fakes.FakeThreads(),
                                         online_cpus=(0, 1), legacy=True)
        self.assertEqual('6.1', model.kernel.spec)


class RenameTest(fakes.ModelTestCase):

    kernel = '6.1'

    def test_rename_refused_before_6_5(self):
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g2')
        self.tree.mkdir('/g1/mon_groups/m1')
        self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                              '/g1/schemata', 'L3:0=f0f\n')
        # kernfs has no rename operation to call: EPERM, status untouched,
        # also for a rename within the same parent.
        for new in ('/g2/mon_groups/m1', '/g1/mon_groups/x'):
            self.assertEqual('Mask out of range\n', self.assertFails(
                errno.EPERM, self.tree.rename, '/g1/mon_groups/m1', new))
        self.assertEqual(['m1'], self.tree.readdir('/g1/mon_groups'))
        # The source must still exist (the VFS looks it up first).
        self.assertFails(errno.ENOENT, self.tree.rename,
                         '/g1/mon_groups/nope', '/g2/mon_groups/x')

    def test_backported_rename(self):
        self.model = self.make_model('reference', kernel='6.1+mon_rename')
        self.tree = fakes.tree.ResctrlTree(self.model)
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        self.tree.rename('/g1/mon_groups/m1', '/mon_groups/m1')
        self.assertEqual(['m1'], self.tree.readdir('/mon_groups'))


class TasksTest(fakes.ModelTestCase):

    kernel = '6.8-multi_tasks'

    def test_one_id_per_write(self):
        self.tree.mkdir('/g1')
        self.write('/g1/tasks', '100\n')
        self.assertEqual('100\n', self.read('/g1/tasks'))
        self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                              '/g1/schemata', 'L3:0=f0f\n')
        # A list is not an integer: EINVAL before the status is cleared.
        for data in ('101,102\n', '101 102\n', '', 'x\n', '-1\n'):
            self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                                  '/g1/tasks', data)
        self.assertEqual('100\n', self.read('/g1/tasks'))
        # Errors of the move itself explain themselves, without the
        # "Error while processing task" line of newer kernels.
        self.assertWriteFails(errno.ESRCH, 'No task 999\n', '/g1/tasks',
                              '999\n')
        self.write('/g1/tasks', ' 101 \n')
        self.assertEqual('ok\n', self.status())
        self.assertEqual('100\n101\n', self.read('/g1/tasks'))

    def test_lists_on_newer_kernels(self):
        self.model = self.make_model('reference', kernel='6.8')
        self.tree = fakes.tree.ResctrlTree(self.model)
        self.tree.mkdir('/g1')
        self.write('/g1/tasks', '100,101\n')
        self.assertEqual('100\n101\n', self.read('/g1/tasks'))


class MbpsRoundingTest(fakes.ModelTestCase):

    profile = 'mba-mbps'
    kernel = '6.1'

    def test_rounded_before_bw_validate(self):
        self.tree.mkdir('/g1')
        self.write('/g1/schemata', 'MB:0=1234\n')
        self.assertIn('MB:0=1240;', self.read('/g1/schemata'))

    def test_exact_with_bw_validate(self):
        for spec in ('6.1+bw_validate', 'newest'):
            model = self.make_model('mba-mbps', kernel=spec)
            tree = fakes.tree.ResctrlTree(model)
            tree.mkdir('/g1')
            tree.write('/g1/schemata', b'MB:0=1234\n')
            self.assertIn('MB:0=1234;', tree.read('/g1/schemata'), spec)


def _few_rmids(num_rmids):
    return dataclasses.replace(
        profiles.REFERENCE, name='few-rmids', mon=dataclasses.replace(
            profiles.REFERENCE.mon, num_rmids=num_rmids))


class AllocationOrderTest(fakes.ModelTestCase):

    def fill(self, kernel, num_rmids):
        self.model = self.make_model(_few_rmids(num_rmids), kernel=kernel,
                                     limbo_delay=1.0)
        self.tree = fakes.tree.ResctrlTree(self.model)
        for i in range(7):          # MB's 8 CLOSIDs: root and 7 groups
            self.tree.mkdir('/g%d' % i)

    def test_rmid_first_before_6_9(self):
        # Root and 7 groups hold 8 RMIDs, one is left.
        self.fill('6.8', 9)
        self.assertEqual('Out of CLOSIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g7'))
        # The RMID taken for the failed mkdir went to limbo.
        self.assertEqual('Out of CLOSIDs\nOut of RMIDs\n', self.assertFails(
            errno.EBUSY, self.tree.mkdir, '/mon_groups/m1'))
        self.clock.advance(1.0)
        self.tree.mkdir('/mon_groups/m1')
        # Out of both: the RMID is found missing first.
        self.assertEqual('Out of CLOSIDs\nOut of RMIDs\nOut of RMIDs\n',
                         self.assertFails(errno.ENOSPC, self.tree.mkdir,
                                          '/g7'))

    def test_closid_first_since_6_9(self):
        self.fill('newest', 9)
        self.assertEqual('Out of CLOSIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g7'))
        self.tree.mkdir('/mon_groups/m1')
        self.assertEqual('Out of CLOSIDs\nOut of CLOSIDs\n',
                         self.assertFails(errno.ENOSPC, self.tree.mkdir,
                                          '/g7'))


class ClosidCapTest(fakes.ModelTestCase):

    def many_closids(self, kernel):
        wide = dataclasses.replace(
            profiles.L3_CAT, name='wide',
            l3=dataclasses.replace(profiles.L3_CAT.l3, num_closids=64))
        self.model = self.make_model(wide, kernel=kernel)
        self.tree = fakes.tree.ResctrlTree(self.model)
        return self.read('/info/L3/num_closids')

    def count_groups(self):
        n = 0
        while True:
            try:
                self.tree.mkdir('/g%d' % n)
            except fakes.kparse.KernelError as e:
                self.assertEqual(errno.ENOSPC, e.errno)
                return n
            n += 1

    def test_capped_at_32_before_6_16(self):
        self.assertEqual('64\n', self.many_closids('6.8'))
        self.assertEqual(31, self.count_groups())

    def test_bitmap_since_6_16(self):
        self.assertEqual('64\n', self.many_closids('6.18'))
        self.assertEqual(63, self.count_groups())


class StatusClearTest(fakes.ModelTestCase):

    def test_mkdir_never_clears(self):
        self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                              '/schemata', 'L3:0=f0f\n')
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        self.tree.rmdir('/g1')
        self.assertEqual('Mask out of range\n', self.status())

    def test_old_mkdir_clears(self):
        self.model = self.make_model('reference',
                                     kernel='5.14+mkdir_clear_status')
        self.tree = fakes.tree.ResctrlTree(self.model)
        self.assertWriteFails(errno.EINVAL, 'Mask out of range\n',
                              '/schemata', 'L3:0=f0f\n')
        self.tree.mkdir('/g1')
        self.assertEqual('ok\n', self.status())


class ModeNewlineTest(fakes.ModelTestCase):

    def test_every_release_needs_the_newline(self):
        for spec in kernels.RELEASES:
            model = self.make_model('reference', kernel=spec)
            tree = fakes.tree.ResctrlTree(model)
            tree.mkdir('/g1')
            e = self.assertRaises(fakes.kparse.KernelError, tree.write,
                                  '/g1/mode', b'exclusive')
            self.assertEqual(errno.EINVAL, e.errno, spec)
            tree.write('/g1/mode', b'shareable\n')


class InfoFilesTest(fakes.ModelTestCase):

    def test_sparse_masks_since_6_7(self):
        for spec, present in (('6.1', False), ('6.8', True),
                              ('6.1+sparse_masks', True)):
            model = self.make_model('reference', kernel=spec)
            tree = fakes.tree.ResctrlTree(model)
            self.assertEqual(present,
                             'sparse_masks' in tree.readdir('/info/L3'),
                             spec)

    def test_padding_until_6_15(self):
        for spec, line in (('6.8', 'MB:0= 10;1=100'),
                           ('6.18', 'MB:0=10;1=100')):
            model = self.make_model('reference', kernel=spec)
            tree = fakes.tree.ResctrlTree(model)
            tree.mkdir('/g1')
            tree.write('/g1/schemata', b'MB:0=10\n')
            self.assertIn(line, tree.read('/g1/schemata'), spec)


class SecondRoundTest(fakes.ModelTestCase):
    """Behaviours checked against the kernel's source in the second round."""

    def test_6_12_is_a_release(self):
        self.assertEqual(
            kernels.release_features('6.8') | {
                'limbo_always', 'rmid_after_closid', 'snc', 'bw_validate'},
            kernels.get_kernel('6.12').features)
        self.assertIn('6.12', kernels.MATRIX_RELEASES)

    def test_bmec_files_in_mon_features(self):
        # rdt_mon_features_show(): a configurable event is followed by
        # its _config file (BMEC, 6.3).
        self.assertEqual('6.3', kernels.FEATURES['bmec'].release)
        tree = fakes.tree.ResctrlTree(self.make_model('amd',
                                                      kernel='6.1+bmec'))
        self.assertEqual('llc_occupancy\nmbm_total_bytes\n'
                         'mbm_total_bytes_config\nmbm_local_bytes\n'
                         'mbm_local_bytes_config\n',
                         tree.read('/info/L3_MON/mon_features'))
        self.assertIn('mbm_total_bytes_config',
                      tree.readdir('/info/L3_MON'))
        tree = fakes.tree.ResctrlTree(self.make_model('amd', kernel='6.1'))
        self.assertEqual('llc_occupancy\nmbm_total_bytes\n'
                         'mbm_local_bytes\n',
                         tree.read('/info/L3_MON/mon_features'))

    def test_bmec_files_hidden_in_mbm_event_mode(self):
        tree = fakes.tree.ResctrlTree(self.make_model('amd-zen5'))
        self.assertNotIn('_config', tree.read('/info/L3_MON/mon_features'))
        tree.write('/info/L3_MON/mbm_assign_mode', b'default\n')
        self.assertIn('mbm_total_bytes_config\n',
                      tree.read('/info/L3_MON/mon_features'))

    def test_status_cleared_at_group_file_access(self):
        missing = 'Missing \'=\' or non-numeric domain\n'
        for spec, after in (('newest', missing),
                            ('newest+status_on_access', 'ok\n')):
            tree = fakes.tree.ResctrlTree(self.make_model('reference',
                                                          kernel=spec))
            tree.mkdir('/g1')
            self.assertRaises(fakes.kparse.KernelError, tree.write,
                              '/g1/schemata', b'L3:x\n')
            tree.read('/tasks')
            self.assertEqual(after, tree.read('/info/last_cmd_status'), spec)

    def test_assign_mode_on_every_l3_mon_since_6_18(self):
        cmt_only = dataclasses.replace(
            profiles.REFERENCE, name='cmt-only', mon=dataclasses.replace(
                profiles.REFERENCE.mon, events=('llc_occupancy',)))
        tree = fakes.tree.ResctrlTree(self.make_model(cmt_only))
        self.assertEqual('[default]\n',
                         tree.read('/info/L3_MON/mbm_assign_mode'))
        tree = fakes.tree.ResctrlTree(self.make_model(cmt_only,
                                                      kernel='6.12'))
        self.assertNotIn('mbm_assign_mode', tree.readdir('/info/L3_MON'))
