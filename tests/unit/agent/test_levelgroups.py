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

"""A controller level that no free CLOSID can open, in the planner."""

import dataclasses

from rdt_virt.agent import model as m
from rdt_virt.agent import reconcile
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.policy import hosts

U3 = '33333333-3333-4333-8333-333333333333'
MB10, MB20, MB40 = f.P + 'mb10', f.P + 'mb20', f.P + 'mb40'
S = reconcile.Settings(prefix=f.P)


def closids(count):
    return dataclasses.replace(hosts.REFERENCE,
                               membw={'MB': hosts._mb(closids=count)})


class TestInPlace(base.TestCase):

    def setUp(self):
        super().setUp()
        # Two low guests that the controller moves from 20% to 10%.
        self.instances = {u: f.inst(uuid=u, bw=f.shared(10), monitor=False)
                          for u in (f.U1, f.U2)}
        self.threads = {f.U1: f.threads(100), f.U2: f.threads(200)}
        self.mb20 = f.group(MB20, (101, 102, 201, 202), f.sch(20))

    def plan(self, caps, *groups, instances=None):
        return reconcile.plan(instances or self.instances, self.threads,
                              f.snap(*groups), caps, S)

    def test_the_old_group_takes_the_new_value(self):
        # The default group and rdtvirt-mb20 take both CLOSIDs.
        result = self.plan(closids(2), self.mb20)
        self.assertEqual([m.WriteSchemata(MB20, 'MB:0=10;1=10\n')],
                         result.actions)
        self.assertEqual({MB20}, {p.group for p in
                                  result.placements.values()})

    def test_a_free_closid_gives_the_right_group(self):
        result = self.plan(closids(3), self.mb20)
        self.assertIn(m.CreateGroup(MB10), result.actions)
        self.assertIn(m.RemoveGroup(MB20), result.actions)
        self.assertNotIn(m.WriteSchemata(MB20, 'MB:0=10;1=10\n'),
                         result.actions)

    def test_not_while_the_old_group_holds_other_threads(self):
        # A third guest stays at 20%: the group keeps its value, and the
        # kernel is asked for a group it may refuse (the old behaviour).
        self.threads[U3] = f.threads(300, vcpus=1)
        instances = dict(self.instances)
        instances[U3] = f.inst(uuid=U3, bw=f.shared(20), monitor=False)
        mb20 = f.group(MB20, (101, 102, 201, 202, 301), f.sch(20))
        result = self.plan(closids(2), mb20, instances=instances)
        self.assertIn(m.CreateGroup(MB10), result.actions)
        self.assertNotIn(m.WriteSchemata(MB20, 'MB:0=10;1=10\n'),
                         result.actions)

    def test_one_stand_in_per_group(self):
        # Two levels, each going down as a whole, and no CLOSID free.
        instances = dict(self.instances)
        instances[U3] = f.inst(uuid=U3, bw=f.shared(30), monitor=False)
        self.threads[U3] = f.threads(300, vcpus=1)
        mb40 = f.group(MB40, (301,), f.sch(40))
        result = self.plan(closids(3), self.mb20, mb40, instances=instances)
        self.assertEqual(
            [m.WriteSchemata(MB20, 'MB:0=10;1=10\n'),
             m.WriteSchemata(MB40, 'MB:0=30;1=30\n')],
            sorted(result.actions, key=str))
