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

"""Monitoring resources: the RMID account, and which monitoring groups
outside the window may go (a bounded wait)."""

import dataclasses
import types

from rdt_virt.agent import monitoring
from rdt_virt import exception
from rdt_virt.resctrl import fs
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.policy import hosts

THRESHOLD = 131072
MB10 = f.P + 'mb10'
V = fs.MonValue


class FakeResctrl(object):
    """``read_mon_data`` of monitoring groups: {name: {dom: MonValue}}."""

    def __init__(self, occupancy):
        self.occupancy = occupancy
        self.reads = 0

    def read_mon_data(self, group=None, mon_group=None, events=None):
        self.reads += 1
        value = self.occupancy[mon_group]
        if isinstance(value, Exception):
            raise value
        return {dom: {'llc_occupancy': v} for dom, v in value.items()}


class TestDrainCheck(base.TestCase):

    def setUp(self):
        super().setUp()
        self.caps = dataclasses.replace(
            hosts.REFERENCE, monitor=dataclasses.replace(
                hosts.REFERENCE.monitor, max_threshold_occupancy=THRESHOLD))
        self.held_since = {}

    def check(self, occupancy, now=100.0, limit=4.0, spare=0):
        self.rc = FakeResctrl(occupancy)
        mons = {'u%d' % i: ('g', name)
                for i, name in enumerate(sorted(occupancy))}
        return monitoring.DrainCheck(self.rc, self.caps, mons, now,
                                     self.held_since, limit, spare), mons

    def test_unavailable_never_blocks(self):
        # An empty group that never ran reads Unavailable on real 6.1
        # and 6.12: holding it waited forever and stopped the rotation.
        check, _mons = self.check({
            'm0': {0: V(None, 'Unavailable'), 1: V(None, 'Unavailable')},
            'm1': {0: V(None, 'Error'), 1: V(None, 'Error')},
            'm2': exception.ResctrlError(path='x', reason='gone'),
        })
        self.assertTrue(check('u0'))
        self.assertTrue(check('u1'))
        self.assertTrue(check('u2'))
        self.assertEqual({'m0', 'm1', 'm2'}, check.unreadable)
        self.assertEqual(set(), check.draining(['u0', 'u1', 'u2']))

    def test_dirty_domain_holds_the_group(self):
        check, _mons = self.check({
            'm0': {0: V(None, 'Unavailable'), 1: V(THRESHOLD, None)},
            'm1': {0: V(THRESHOLD - 1, None), 1: V(0, None)},
        })
        # __check_limbo(): dirty at the threshold, clean below it.
        self.assertFalse(check('u0'))
        self.assertTrue(check('u1'))
        self.assertEqual({'m0'}, check.draining(['u0', 'u1']))
        self.assertEqual(2, self.rc.reads)   # one read per group a tick

    def test_bounded_wait_into_spare_rmids(self):
        hot = {'m0': {0: V(10 * THRESHOLD, None)},
               'm1': {0: V(10 * THRESHOLD, None)}}
        for now in (100.0, 102.0, 103.9):
            check, _mons = self.check(hot, now=now, spare=1)
            self.assertFalse(check('u0'))
            self.assertFalse(check('u1'))
        # One spare RMID: one of them goes.
        check, _mons = self.check(hot, now=104.0, spare=1)
        self.assertEqual([True, False], [check('u0'), check('u1')])
        self.assertEqual({'m0'}, check.forced)

    def test_no_spare_holds_while_dirty(self):
        # The automatic budget: what control groups need is never given
        # to a limbo that may not drain.
        hot = {'m0': {0: V(10 * THRESHOLD, None)}}
        self.check(hot, now=100.0)
        check, _mons = self.check(hot, now=10000.0)
        self.assertFalse(check('u0'))

    def test_no_group_holds_nothing(self):
        check, _mons = self.check({})
        self.assertTrue(check('elsewhere'))

    def test_without_cmt_nothing_is_read(self):
        self.caps = dataclasses.replace(
            self.caps, monitor=dataclasses.replace(
                self.caps.monitor, features=frozenset(['mbm_total_bytes'])))
        check, _mons = self.check({'m0': {0: V(10 * THRESHOLD, None)}})
        self.assertTrue(check('u0'))
        self.assertEqual(0, self.rc.reads)


class TestAccount(base.TestCase):
    """The RMID account and the agent's groups, as the names change."""

    def setUp(self):
        super().setUp()
        opts = types.SimpleNamespace(rotation_interval=10.0, rmid_budget=-1)
        self.now = 100.0
        self.mon = monitoring.Monitoring(fs.Resctrl('/nonexistent'), None,
                                         f.P, opts, lambda: self.now)
        self.caps = hosts.REFERENCE
        self.assertIn('llc_occupancy', self.caps.monitor.features)

    def snap(self, mb10_mons, root_mons=('collectd-1',)):
        return f.snap(f.group(MB10, [], f.sch(10),
                              {m: [] for m in mb10_mons}),
                      root_mons={m: [] for m in root_mons})

    def test_counts_follow_the_groups(self):
        self.assertEqual((1, 2), self.mon.account(
            self.snap([f.M1, f.M2]), self.caps))
        self.assertEqual(5, self.mon.rmids_used)
        self.assertEqual((1, 2), self.mon.account(
            self.snap([f.M1, f.M2]), self.caps))
        self.assertEqual((1, 1), self.mon.account(
            self.snap([f.M1]), self.caps))
        self.assertEqual((0, 1), self.mon.account(
            self.snap([f.M1], root_mons=()), self.caps))
        self.assertEqual(3, self.mon.rmids_used)
        self.assertEqual(2, self.mon.closids_used)

    def test_groups_removed_by_others_go_to_limbo_once(self):
        self.mon.account(self.snap([f.M1, f.M2]), self.caps)
        self.mon.account(self.snap([f.M1]), self.caps)
        self.assertEqual(1, self.mon.rotation.in_limbo(self.now))
        # The same groups again: nothing more was removed.
        self.mon.account(self.snap([f.M1]), self.caps)
        self.assertEqual(1, self.mon.rotation.in_limbo(self.now))
        # The agent's own removal is accounted for already.
        self.mon.accounted = {(MB10, f.M1)}
        self.mon.account(self.snap([]), self.caps)
        self.assertEqual(1, self.mon.rotation.in_limbo(self.now))

    def test_own_mon_groups(self):
        found = self.mon.own_mon_groups(self.snap([f.M1]))
        self.assertEqual({f.U1: (MB10, f.M1)}, found)
        found.clear()
        self.assertEqual({f.U1: (MB10, f.M1)},
                         self.mon.own_mon_groups(self.snap([f.M1])))
        self.assertEqual({f.U1: (MB10, f.M1), f.U2: (None, f.M2)},
                         self.mon.own_mon_groups(self.snap(
                             [f.M1], root_mons=[f.M2, 'collectd-1'])))
        # account() in between, with other groups, changes nothing here.
        self.mon.account(self.snap([]), self.caps)
        self.assertEqual({}, self.mon.own_mon_groups(self.snap([])))
