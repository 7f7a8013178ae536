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

"""Reading resctrl for the planner: what is parsed again, and when."""

import os
import shutil

from rdt_virt.agent import snapshot
from rdt_virt.resctrl import fs
from tests import base
from tests.unit.resctrl import variants as v

MON_X = 'rdtvirt-m-' + v.UUID_A


class TestUnchanged(base.TestCase):

    def test_parsed_again_only_for_a_new_text(self):
        parsed = []

        def parse(text):
            parsed.append(text)
            return frozenset(text.split())
        cache = snapshot.Unchanged(parse)
        first = cache.get('a', '1 2')
        self.assertIs(first, cache.get('a', '1 2'))
        self.assertEqual(frozenset(['1', '3']), cache.get('a', '1 3'))
        self.assertEqual(frozenset(['1', '2']), cache.get('b', '1 2'))
        self.assertEqual(frozenset(['1', '2']), cache.get('a', '1 2'))
        self.assertEqual(['1 2', '1 3', '1 2', '1 2'], parsed)

    def test_errors_are_not_remembered(self):
        cache = snapshot.Unchanged(lambda text: int(text))
        self.assertRaises(ValueError, cache.get, 'a', 'x')
        self.assertRaises(ValueError, cache.get, 'a', 'x')
        self.assertEqual(3, cache.get('a', '3'))


class TestSnapshotReader(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(v.ResctrlTree('reference'))
        self.rc = fs.Resctrl(self.tree.root, prefix='rdtvirt-')
        self.caps = self.rc.capabilities()
        self.reader = snapshot.SnapshotReader(self.rc, 'rdtvirt-')
        self.live = [v.UUID_B, v.UUID_C, v.UUID_D]

    def read(self, tick=1):
        return self.reader.read(self.caps, tick, instances=self.live)

    def test_unchanged_files_give_the_same_sets(self):
        first, second = self.read(), self.read(2)
        self.assertEqual(first, second)
        for name in (None, v.SHARED, v.LIBVIRT_GROUP):
            self.assertIs(first.groups[name].mon_names,
                          second.groups[name].mon_names)
        self.assertIs(first.groups[v.SHARED].tasks,
                      second.groups[v.SHARED].tasks)
        self.assertIs(first.groups[v.SHARED].mon_groups[v.MON_B],
                      second.groups[v.SHARED].mon_groups[v.MON_B])

    def test_schemata_are_the_callers_own(self):
        first = self.read().groups[v.SHARED].schemata
        self.assertEqual({0: 10, 1: 10}, first['MB'])
        first['MB'][0] = 90
        del first['L3']
        again = self.read().groups[v.SHARED].schemata
        self.assertEqual({0: 10, 1: 10}, again['MB'])
        self.assertEqual({0: 0x7f0, 1: 0x7f0}, again['L3'])

    def test_every_change_is_read(self):
        self.read()
        # A thread moved out of its control group.
        self.tree.write('4202\n4301\n', v.SHARED, 'tasks')
        self.assertEqual({4202, 4301}, self.read().groups[v.SHARED].tasks)
        # A new thread in it.
        self.tree.write('4202\n4301\n4303\n', v.SHARED, 'tasks')
        self.assertEqual({4202, 4301, 4303},
                         self.read().groups[v.SHARED].tasks)
        # Its schemata changed.
        self.tree.write('MB:0=20;1=20\nL3:0=7f0;1=7f0\n', v.SHARED,
                        'schemata')
        self.assertEqual({0: 20, 1: 20},
                         self.read().groups[v.SHARED].schemata['MB'])
        # A monitoring group went, another came.
        shutil.rmtree(self.tree.path(v.SHARED, 'mon_groups', v.MON_C))
        os.mkdir(self.tree.path(v.SHARED, 'mon_groups', MON_X))
        self.tree.write('4303\n', v.SHARED, 'mon_groups', MON_X, 'tasks')
        group = self.read().groups[v.SHARED]
        self.assertEqual({v.MON_B, MON_X}, group.mon_names)
        self.assertEqual({4303}, group.mon_groups[MON_X])
        # A control group went.
        shutil.rmtree(self.tree.path('batch'))
        self.assertNotIn('batch', self.read().groups)

    def test_monitoring_group_verified_in_its_tick(self):
        # A thread moved from a monitoring group to its parent leaves the
        # parent's tasks as they were: the group's own tick reads it.
        tick = self.reader._slot(v.MON_B) + snapshot.MON_VERIFY_TICKS
        self.read(tick)
        before = self.read(tick + 1).groups[v.SHARED].mon_groups[v.MON_B]
        self.tree.write('4201\n', v.SHARED, 'mon_groups', v.MON_B, 'tasks')
        self.assertEqual(before, self.read(tick + 2).groups[
            v.SHARED].mon_groups[v.MON_B])
        self.assertEqual({4201}, self.read(
            tick + snapshot.MON_VERIFY_TICKS).groups[v.SHARED].mon_groups[
                v.MON_B])
