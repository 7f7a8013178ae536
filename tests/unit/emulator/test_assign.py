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

"""MBM counter assignment (mbm_event mode, Linux 6.18, AMD ABMC)."""

import dataclasses
import errno

from rdt_virt.emulator import assign
from rdt_virt.emulator import profiles
from tests.unit.emulator import fakes

GIB = 1024 ** 3
BOTH = ('mbm_total_bytes:0=e;1=e\n'
        'mbm_local_bytes:0=e;1=e\n')


def _zen5(num_mbm_cntrs):
    return dataclasses.replace(
        profiles.AMD_ZEN5, name='zen5-%d' % num_mbm_cntrs,
        mon=dataclasses.replace(profiles.AMD_ZEN5.mon,
                                num_mbm_cntrs=num_mbm_cntrs))


class AssignTest(fakes.ModelTestCase):

    profile = 'amd-zen5'

    def use(self, profile, kernel=None):
        self.model = self.make_model(profile, kernel=kernel)
        self.tree = fakes.tree.ResctrlTree(self.model)

    def counter(self, group, dom, event='mbm_total_bytes'):
        prefix = '/' + group + '/' if group else '/'
        return self.read('%smon_data/mon_L3_%02d/%s' % (
            prefix, dom, event)).strip()

    def test_info_files(self):
        self.assertEqual('[mbm_event]\ndefault\n',
                         self.read('/info/L3_MON/mbm_assign_mode'))
        self.assertEqual('0=32;1=32\n',
                         self.read('/info/L3_MON/num_mbm_cntrs'))
        # The default group took one counter per event and domain.
        self.assertEqual('0=30;1=30\n',
                         self.read('/info/L3_MON/available_mbm_cntrs'))
        self.assertEqual('1\n', self.read('/info/L3_MON/mbm_assign_on_mkdir'))
        self.assertEqual(BOTH, self.read('/mbm_L3_assignments'))
        self.tree.mkdir('/g1')
        self.assertIn('mbm_L3_assignments', self.tree.readdir('/g1'))
        self.assertEqual(0o100644,
                         self.tree.getattr('/g1/mbm_L3_assignments')[
                             'st_mode'])

    def test_older_kernels_and_other_hardware(self):
        self.use('amd-zen5', kernel='6.8')
        self.assertNotIn('mbm_assign_mode', self.tree.readdir('/info/L3_MON'))
        self.assertNotIn('mbm_L3_assignments', self.tree.readdir('/'))
        self.use('reference', kernel='newest')
        self.assertEqual('[default]\n',
                         self.read('/info/L3_MON/mbm_assign_mode'))
        self.assertNotIn('num_mbm_cntrs', self.tree.readdir('/info/L3_MON'))
        self.assertFails(errno.EINVAL, self.write,
                         '/info/L3_MON/mbm_assign_mode', 'mbm_event\n')

    def test_groups_without_counters_read_unassigned(self):
        # Two counters per domain: the default group holds both.
        self.use(_zen5(2))
        self.tree.mkdir('/g1')
        # Each event stops at its first domain without a counter.
        self.assertEqual(
            'Failed to allocate counter for mbm_total_bytes in domain 0\n'
            'Failed to allocate counter for mbm_local_bytes in domain 0\n',
            self.status())
        self.assertEqual('mbm_total_bytes:0=_;1=_\n'
                         'mbm_local_bytes:0=_;1=_\n',
                         self.read('/g1/mbm_L3_assignments'))
        self.write('/g1/tasks', '100')
        self.threads.run(100, 1.0, cpu=0)
        self.clock.advance(1.0)
        self.assertEqual('Unassigned', self.counter('g1', 0))
        self.assertEqual('Unassigned', self.counter('g1', 0,
                                                    'mbm_local_bytes'))
        # Occupancy is not an assignable event.
        self.assertNotEqual('Unassigned', self.counter('g1', 0,
                                                       'llc_occupancy'))
        # Move the root's counter on domain 0 to g1: counts from zero.
        self.assertWriteFails(
            errno.ENOSPC,
            'Failed to allocate counter for mbm_total_bytes in domain 0\n'
            "Assign operation 'mbm_total_bytes:0=e' failed\n",
            '/g1/mbm_L3_assignments', 'mbm_total_bytes:0=e\n')
        self.write('/mbm_L3_assignments', 'mbm_total_bytes:0=_\n')
        self.assertEqual('Unassigned', self.counter('', 0))
        self.write('/g1/mbm_L3_assignments', 'mbm_total_bytes:0=e\n')
        self.assertEqual('0', self.counter('g1', 0))
        self.threads.run(100, 1.0, cpu=0)
        self.clock.advance(1.0)
        self.assertEqual(str(2 * GIB), self.counter('g1', 0))
        self.assertEqual('Unassigned', self.counter('g1', 1))
        self.assertEqual('0=0;1=0\n',
                         self.read('/info/L3_MON/available_mbm_cntrs'))
        # rmdir gives the counter back.
        self.tree.rmdir('/g1')
        self.assertEqual('0=1;1=0\n',
                         self.read('/info/L3_MON/available_mbm_cntrs'))

    def test_write_syntax(self):
        self.tree.mkdir('/g1')
        self.write('/g1/mbm_L3_assignments', 'mbm_local_bytes:*=_\n')
        self.assertEqual('mbm_total_bytes:0=e;1=e\n'
                         'mbm_local_bytes:0=_;1=_\n',
                         self.read('/g1/mbm_L3_assignments'))
        self.write('/g1/mbm_L3_assignments',
                   'mbm_local_bytes:1=e\nmbm_total_bytes:0=_;1=_\n')
        self.assertEqual('mbm_total_bytes:0=_;1=_\n'
                         'mbm_local_bytes:0=_;1=e\n',
                         self.read('/g1/mbm_L3_assignments'))
        cases = [
            ('llc_occupancy:0=e\n', errno.ENOENT,
             'Invalid event llc_occupancy\n'),
            ('mbm_total_bytes:7=e\n', errno.EINVAL, 'Invalid domain id 7\n'),
            ('mbm_total_bytes:x=e\n', errno.EINVAL, 'Missing domain id\n'),
            ('mbm_total_bytes:0=x\n', errno.EINVAL,
             "Assign operation 'mbm_total_bytes:0=x' failed\n"),
        ]
        for data, err, status in cases:
            self.assertWriteFails(err, status, '/g1/mbm_L3_assignments',
                                  data)
        self.assertFails(errno.EINVAL, self.write, '/g1/mbm_L3_assignments',
                         'mbm_total_bytes:0=e')

    def test_default_mode_and_on_mkdir(self):
        self.write('/info/L3_MON/mbm_assign_on_mkdir', '0\n')
        self.tree.mkdir('/g1')
        self.assertEqual('Unassigned', self.counter('g1', 0))
        self.write('/info/L3_MON/mbm_assign_mode', 'default\n')
        self.assertEqual('[default]\nmbm_event\n',
                         self.read('/info/L3_MON/mbm_assign_mode'))
        # No counter is needed any more; the RMID has not run yet.
        self.assertEqual('Unavailable', self.counter('g1', 0))
        self.assertWriteFails(errno.EINVAL, 'mbm_event mode is not enabled\n',
                              '/g1/mbm_L3_assignments',
                              'mbm_total_bytes:0=e\n')
        # mbm_L3_assignments_show(): EINVAL with a text, not ENOENT.
        not_enabled = 'mbm_event counter assignment mode is not enabled\n'
        self.assertEqual(not_enabled, self.assertFails(
            errno.EINVAL, self.read, '/g1/mbm_L3_assignments'))
        self.assertEqual(not_enabled, self.assertFails(
            errno.EINVAL, self.read, '/info/L3_MON/mbm_assign_on_mkdir'))
        self.assertWriteFails(errno.EINVAL, not_enabled,
                              '/info/L3_MON/mbm_assign_on_mkdir', '1\n')
        self.assertWriteFails(errno.EINVAL, 'Unsupported assign mode\n',
                              '/info/L3_MON/mbm_assign_mode', 'abmc\n')
        # Back to mbm_event: every counter was freed, and assignment at
        # mkdir is on again (resctrl_mbm_assign_mode_write()).
        self.write('/info/L3_MON/mbm_assign_mode', 'mbm_event\n')
        self.assertEqual('0=32;1=32\n',
                         self.read('/info/L3_MON/available_mbm_cntrs'))
        self.assertEqual('Unassigned', self.counter('', 0))
        self.assertEqual('1\n', self.read('/info/L3_MON/mbm_assign_on_mkdir'))

    def test_assign_on_mkdir_is_kstrtobool(self):
        for text, value in (('0\n', '0'), ('yes\n', '1'), ('no\n', '0'),
                            ('True\n', '1'), ('off\n', '0'), ('on\n', '1'),
                            ('1xyz\n', '1'), ('N', '0')):
            self.write('/info/L3_MON/mbm_assign_on_mkdir', text)
            self.assertEqual(value + '\n',
                             self.read('/info/L3_MON/mbm_assign_on_mkdir'),
                             text)
        for text in ('2\n', 'maybe\n', 'o\n', '\n'):
            self.assertFails(errno.EINVAL, self.write,
                             '/info/L3_MON/mbm_assign_on_mkdir', text)


class AllDomainsTest(fakes.ModelTestCase):
    """An event assigned to every domain with domain 0 out of counters."""

    def make(self, carry_on):
        a = assign.Assignments((0, 1), 1, ('mbm_total_bytes',),
                               carry_on=carry_on)
        a.assign('other', 'mbm_total_bytes', 0)
        return a

    def test_mkdir_stops_at_the_first_failing_domain(self):
        # rdtgroup_assign_cntr_event() (6.18): the event goes no further.
        a = self.make(False)
        self.assertEqual(['Failed to allocate counter for mbm_total_bytes '
                          'in domain 0\n'], a.assign_all('g'))
        self.assertFalse(a.assigned('g', 'mbm_total_bytes', 1))
        a = self.make(True)
        a.assign_all('g')
        self.assertTrue(a.assigned('g', 'mbm_total_bytes', 1))

    def test_star_stops_at_the_first_failing_domain(self):
        a = self.make(False)
        e = self.assertRaises(fakes.kparse.KernelError, a.write_group, 'g',
                              'mbm_total_bytes:*=e')
        self.assertEqual(errno.ENOSPC, e.errno)
        self.assertFalse(a.assigned('g', 'mbm_total_bytes', 1))
        a = self.make(True)
        self.assertRaises(fakes.kparse.KernelError, a.write_group, 'g',
                          'mbm_total_bytes:*=e')
        self.assertTrue(a.assigned('g', 'mbm_total_bytes', 1))

    def test_kernel_feature(self):
        self.assertFalse(self.make_model('amd-zen5').assign.carry_on)
        self.assertTrue(self.make_model(
            'amd-zen5', kernel='newest+assign_continue').assign.carry_on)


class BmecTest(fakes.ModelTestCase):

    profile = 'amd'

    def test_event_configuration(self):
        self.assertEqual('0=0x7f;1=0x7f\n',
                         self.read('/info/L3_MON/mbm_total_bytes_config'))
        self.assertEqual('0=0x15;1=0x15\n',
                         self.read('/info/L3_MON/mbm_local_bytes_config'))
        self.tree.mkdir('/g1')
        self.write('/g1/tasks', '100')
        self.threads.run(100, 1.0, cpu=0)
        self.clock.advance(1.0)
        path = '/g1/mon_data/mon_L3_00/mbm_total_bytes'
        self.assertEqual('%d\n' % (2 * GIB), self.read(path))
        # A new configuration resets the domain's counters.
        self.write('/info/L3_MON/mbm_total_bytes_config', '0=0x33\n')
        self.assertEqual('0=0x33;1=0x7f\n',
                         self.read('/info/L3_MON/mbm_total_bytes_config'))
        self.assertEqual('0\n', self.read(path))
        self.assertWriteFails(
            errno.EINVAL, 'Invalid event configuration: max valid mask is '
            '0x7f\n', '/info/L3_MON/mbm_total_bytes_config', '1=0x80\n')
        self.assertWriteFails(
            errno.EINVAL, "Missing '=' or non-numeric domain id\n",
            '/info/L3_MON/mbm_local_bytes_config', 'x=0x1\n')
        self.assertEqual(0o100644, self.tree.getattr(
            '/info/L3_MON/mbm_local_bytes_config')['st_mode'])

    def test_hidden_in_mbm_event_mode(self):
        model = self.make_model('amd-zen5')
        files = fakes.tree.ResctrlTree(model).readdir('/info/L3_MON')
        self.assertNotIn('mbm_total_bytes_config', files)
        model.assign_enabled = False
        files = fakes.tree.ResctrlTree(model).readdir('/info/L3_MON')
        self.assertIn('mbm_total_bytes_config', files)
        model = self.make_model('amd', kernel='6.1-bmec')
        files = fakes.tree.ResctrlTree(model).readdir('/info/L3_MON')
        self.assertNotIn('mbm_total_bytes_config', files)


class IoAllocTest(fakes.ModelTestCase):

    profile = 'amd-zen5'

    def test_io_alloc_takes_the_highest_closid(self):
        self.assertEqual('disabled\n', self.read('/info/L3/io_alloc'))
        self.assertEqual('io_alloc is not enabled on L3\n', self.assertFails(
            errno.EINVAL, self.read, '/info/L3/io_alloc_cbm'))
        for i in range(15):
            self.tree.mkdir('/g%d' % i)
        # g14 holds CLOSID 15, the one io_alloc needs.
        self.assertWriteFails(
            errno.ENOSPC, 'CLOSID (ctrl_hw_id) 15 for io_alloc is used by '
            'g14 group\n', '/info/L3/io_alloc', '1\n')
        self.tree.rmdir('/g14')
        self.write('/info/L3/io_alloc', '1\n')
        self.assertEqual('enabled\n', self.read('/info/L3/io_alloc'))
        self.assertEqual('0=ffff;1=ffff\n', self.read('/info/L3/io_alloc_cbm'))
        self.assertEqual('Out of CLOSIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g14'))
        self.write('/info/L3/io_alloc', '0\n')
        self.tree.mkdir('/g14')

    def test_refused_when_the_closid_is_not_usable(self):
        # resctrl_io_alloc_closid_supported(): MB with 8 CLOSIDs makes
        # L3's CLOSID 15 unusable.
        import dataclasses

        from rdt_virt.emulator import profiles
        few = dataclasses.replace(
            profiles.AMD_ZEN5, name='zen5-mb8',
            mb=dataclasses.replace(profiles.AMD_ZEN5.mb, num_closids=8))
        tree = fakes.tree.ResctrlTree(self.make_model(few))
        e = self.assertRaises(fakes.kparse.KernelError, tree.write,
                              '/info/L3/io_alloc', b'1\n')
        self.assertEqual(errno.EINVAL, e.errno)
        self.assertEqual('io_alloc CLOSID (ctrl_hw_id) 15 is not available\n',
                         tree.read('/info/last_cmd_status'))
        self.assertEqual('disabled\n', tree.read('/info/L3/io_alloc'))
        # kstrtobool(): "yes" enables, "2" is EINVAL before any check.
        tree = fakes.tree.ResctrlTree(self.make_model('amd-zen5'))
        tree.write('/info/L3/io_alloc', b'yes\n')
        self.assertEqual('enabled\n', tree.read('/info/L3/io_alloc'))
        e = self.assertRaises(fakes.kparse.KernelError, tree.write,
                              '/info/L3/io_alloc', b'2\n')
        self.assertEqual(errno.EINVAL, e.errno)

    def test_not_supported_and_older_kernels(self):
        # io_alloc_init(): the files exist only where L3 supports it.
        tree = fakes.tree.ResctrlTree(self.make_model('amd'))
        self.assertNotIn('io_alloc', tree.readdir('/info/L3'))
        self.assertNotIn('io_alloc_cbm', tree.readdir('/info/L3'))
        e = self.assertRaises(fakes.kparse.KernelError, tree.write,
                              '/info/L3/io_alloc', b'1\n')
        self.assertEqual(errno.ENOENT, e.errno)
        tree = fakes.tree.ResctrlTree(self.make_model('amd-zen5',
                                                      kernel='6.18'))
        self.assertNotIn('io_alloc', tree.readdir('/info/L3'))
