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

"""RMID limbo: freed RMIDs stay busy until their occupancy drains."""

import dataclasses
import errno

from rdt_virt.emulator import profiles
from tests.unit.emulator import fakes

# Reference: 36608 KiB of L3 / 192 RMIDs, in 64 KiB units.
THRESHOLD = 131072


def _rmids(num_rmids):
    return dataclasses.replace(
        profiles.REFERENCE, name='rmids-%d' % num_rmids,
        mon=dataclasses.replace(profiles.REFERENCE.mon,
                                num_rmids=num_rmids))


class LimboTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        # Root, g1 and m1 hold the only three RMIDs.
        self.model = self.make_model(_rmids(3))
        self.tree = fakes.tree.ResctrlTree(self.model)
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        self.rmid = self.model.find('g1/mon_groups/m1').rmid
        # The default is the L3 size over num_rmids: use the reference's.
        self.write('/info/L3_MON/max_threshold_occupancy', '%d\n'
                   % THRESHOLD)

    def fill_cache(self):
        """Thread 100 in m1 fills the L3 of domain 0, then m1 goes."""
        self.write('/g1/tasks', '100\n')
        self.write('/g1/mon_groups/m1/tasks', '100\n')
        self.threads.run(100, 1.0, cpu=0)
        self.clock.advance(1.0)
        self.assertEqual(str(36608 * 1024 // 65536 * 65536) + '\n',
                         self.read('/g1/mon_groups/m1/mon_data/mon_L3_00/'
                                   'llc_occupancy'))
        self.tree.rmdir('/g1/mon_groups/m1')

    def test_threshold_default(self):
        tree = fakes.tree.ResctrlTree(self.make_model('reference'))
        self.assertEqual('%d\n' % THRESHOLD,
                         tree.read('/info/L3_MON/max_threshold_occupancy'))

    def test_cache_resident_rmid_stays_busy(self):
        self.fill_cache()
        limbo = self.model.limbo()
        self.assertEqual([self.rmid], [e['rmid'] for e in limbo['limbo']])
        self.assertEqual([0, 1], limbo['limbo'][0]['busy_domains'])
        # The first check clears the clean domain only.
        self.clock.advance(1.0)
        self.assertEqual([0], self.model.limbo()['limbo'][0]['busy_domains'])
        # 35.75 MiB halve every 2 s: above 128 KiB for 16 s.
        self.clock.advance(15.0)
        self.assertFails(errno.EBUSY, self.tree.mkdir, '/g1/mon_groups/x')
        self.clock.advance(1.0)
        self.tree.mkdir('/g1/mon_groups/x')
        self.assertEqual(self.rmid, self.model.find('g1/mon_groups/x').rmid)
        self.assertEqual([], self.model.limbo()['limbo'])

    def test_checked_once_per_interval(self):
        self.tree.rmdir('/g1/mon_groups/m1')   # nothing cached: clean
        self.clock.advance(0.99)
        self.assertFails(errno.EBUSY, self.tree.mkdir, '/g1/mon_groups/x')
        self.clock.advance(0.01)
        self.tree.mkdir('/g1/mon_groups/x')

    def test_threshold_write_releases_at_next_check(self):
        self.fill_cache()
        self.write('/info/L3_MON/max_threshold_occupancy', '%d\n' %
                   (36608 * 1024))
        self.clock.advance(1.0)
        self.tree.mkdir('/g1/mon_groups/x')

    def test_pinned_occupancy_never_drains(self):
        self.tree.rmdir('/g1/mon_groups/m1')
        self.model.set_limbo_occupancy(self.rmid, 10 * 1024 * 1024, dom=1)
        self.clock.advance(600.0)
        self.assertFails(errno.EBUSY, self.tree.mkdir, '/g1/mon_groups/x')
        self.assertEqual({0: 0, 1: 10 * 1024 * 1024},
                         self.model.limbo()['limbo'][0]['occupancy'])
        # Let go: 10 MiB decays below 128 KiB in 6.3 half-lives.
        self.model.set_limbo_occupancy(self.rmid, None, dom=1)
        self.clock.advance(12.0)
        self.assertFails(errno.EBUSY, self.tree.mkdir, '/g1/mon_groups/x')
        self.clock.advance(1.0)
        self.tree.mkdir('/g1/mon_groups/x')
        self.assertRaises(KeyError, self.model.set_limbo_occupancy,
                          self.rmid, 0)

    def test_control_groups_need_an_rmid(self):
        self.tree.rmdir('/g1/mon_groups/m1')
        self.assertEqual('Out of RMIDs\n', self.assertFails(
            errno.EBUSY, self.tree.mkdir, '/g2'))
        self.clock.advance(1.0)
        self.tree.mkdir('/g2')
        self.assertEqual('Out of RMIDs\nOut of RMIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g3'))

    def test_no_limbo_when_checks_are_off(self):
        self.fill_cache()
        self.model.limbo_delay = 0
        self.tree.mkdir('/g1/mon_groups/x')


class FreeFirstTest(fakes.ModelTestCase):

    def test_free_rmids_before_limbo(self):
        model = self.make_model(_rmids(4))
        tree = fakes.tree.ResctrlTree(model)
        tree.mkdir('/mon_groups/a')
        tree.mkdir('/mon_groups/b')
        a = model.find('mon_groups/a').rmid
        tree.rmdir('/mon_groups/a')
        # RMID 3 is free, a's RMID in limbo: the free one is taken.
        tree.mkdir('/mon_groups/c')
        self.assertNotEqual(a, model.find('mon_groups/c').rmid)
        e = self.assertRaises(fakes.kparse.KernelError, tree.mkdir,
                              '/mon_groups/d')
        self.assertEqual(errno.EBUSY, e.errno)
        # Released RMIDs join the tail of the free list (LRU).
        self.clock.advance(1.0)
        tree.mkdir('/mon_groups/d')
        self.assertEqual(a, model.find('mon_groups/d').rmid)


class KernelLimboTest(fakes.ModelTestCase):
    """__check_limbo() and add_rmid_to_limbo() as the kernel has them."""

    def one_domain(self, kernel):
        model = self.make_model(_rmids(3), kernel=kernel, online_cpus=(0,))
        tree = fakes.tree.ResctrlTree(model)
        tree.mkdir('/g1')
        tree.mkdir('/g1/mon_groups/m1')
        return model, tree

    def test_dirty_at_the_threshold(self):
        # rmid_dirty = (val >= threshold): a threshold of 0 frees nothing.
        model, tree = self.one_domain('newest')
        tree.write('/info/L3_MON/max_threshold_occupancy', b'0\n')
        rmid = model.find('g1/mon_groups/m1').rmid
        tree.rmdir('/g1/mon_groups/m1')
        model.set_limbo_occupancy(rmid, 0)
        self.clock.advance(30.0)
        self.assertFails(errno.EBUSY, tree.mkdir, '/g1/mon_groups/x')
        tree.write('/info/L3_MON/max_threshold_occupancy', b'65536\n')
        self.clock.advance(1.0)
        tree.mkdir('/g1/mon_groups/x')

    def test_unreadable_occupancy_never_drains(self):
        model, tree = self.one_domain('newest')
        rmid = model.find('g1/mon_groups/m1').rmid
        tree.rmdir('/g1/mon_groups/m1')
        model.set_limbo_occupancy(rmid, 'Unavailable')
        self.clock.advance(60.0)
        self.assertFails(errno.EBUSY, tree.mkdir, '/g1/mon_groups/x')
        self.assertEqual({0: None},
                         model.limbo()['limbo'][0]['occupancy'])

    def test_idle_rmid_free_at_once_before_6_9(self):
        # add_rmid_to_limbo() read the local domain: Unavailable (the
        # group never ran) left it clean, so the RMID was free at once.
        model, tree = self.one_domain('6.8')
        tree.rmdir('/g1/mon_groups/m1')
        self.assertEqual([], model.limbo()['limbo'])
        tree.mkdir('/g1/mon_groups/x')

    def test_idle_rmid_in_limbo_since_6_9(self):
        model, tree = self.one_domain('6.12')
        tree.rmdir('/g1/mon_groups/m1')
        self.assertEqual(1, len(model.limbo()['limbo']))
        self.assertFails(errno.EBUSY, tree.mkdir, '/g1/mon_groups/x')

    def test_busy_rmid_in_limbo_before_6_9(self):
        model, tree = self.one_domain('6.8')
        self.write_tasks(model, tree)
        tree.rmdir('/g1/mon_groups/m1')
        self.assertEqual(1, len(model.limbo()['limbo']))

    def write_tasks(self, model, tree):
        tree.write('/g1/tasks', b'100\n')
        tree.write('/g1/mon_groups/m1/tasks', b'100\n')
        self.threads.run(100, 1.0, cpu=0)
        self.clock.advance(1.0)
        model.refresh()
