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

"""The last plan again only while every argument is the same."""

from unittest import mock

from rdt_virt.agent import model as m
from rdt_virt.agent import planmemo
from rdt_virt.agent import reconcile
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.policy import hosts

MB10 = f.P + 'mb10'
MB20 = f.P + 'mb20'
S = reconcile.Settings(prefix=f.P)
T1 = f.threads(100)             # vCPU tids 101, 102
T2 = f.threads(200)             # 201, 202


def converged():
    """Two instances in MB10, each monitored: nothing to do."""
    return f.snap(f.group(MB10, [101, 102, 201, 202], f.sch(10),
                          {f.M1: [101, 102], f.M2: [201, 202]}))


class TestPlanMemo(base.TestCase):

    def setUp(self):
        super().setUp()
        self.memo = planmemo.PlanMemo()
        self.instances = {f.U1: f.inst(bw=f.shared(10)),
                          f.U2: f.inst(f.U2, bw=f.shared(10), dom_id=2)}
        self.threads = {f.U1: T1, f.U2: T2}
        self.args = dict(caps=hosts.REFERENCE, settings=S, window=None,
                         blocked={}, draining=())

    def run_memo(self, snapshot, instances=None, threads=None, **kwargs):
        """The memo's result, checked against plan(); and if it planned."""
        instances = instances or self.instances
        threads = threads or self.threads
        args = dict(self.args, **kwargs)
        fresh = reconcile.plan(instances, threads, snapshot, **args)
        with mock.patch.object(reconcile, 'plan',
                               wraps=reconcile.plan) as spy:
            got = self.memo.plan(instances, threads, snapshot, **args)
        self.assertEqual(fresh, got)
        return got, spy.called

    def test_equal_arguments_plan_once(self):
        first, planned = self.run_memo(converged())
        self.assertTrue(planned)
        self.assertEqual([], first.actions)
        # A new snapshot, new dicts, the same values: no new plan.
        second, planned = self.run_memo(converged(), dict(self.instances),
                                        dict(self.threads))
        self.assertFalse(planned)
        self.assertEqual(first, second)

    def test_every_change_plans_again(self):
        self.run_memo(converged())
        changes = [
            # A thread moved out of its control group (to the default).
            dict(snapshot=f.snap(f.group(
                MB10, [101, 201, 202], f.sch(10),
                {f.M1: [101], f.M2: [201, 202]})),
                 expected=[m.AssignTasks(MB10, None, (102,)),
                           m.AssignTasks(MB10, f.M1, (102,), uuid=f.U1)]),
            # The group's schemata changed.
            dict(snapshot=f.snap(f.group(
                MB10, [101, 102, 201, 202], f.sch(30),
                {f.M1: [101, 102], f.M2: [201, 202]})),
                 expected=[m.WriteSchemata(MB10, 'MB:0=10;1=10\n')]),
            # The group was removed.
            dict(snapshot=f.snap(), first=m.CreateGroup(MB10)),
            # A new thread (a hot-plugged vCPU).
            dict(threads={f.U1: f.threads(100, vcpus=3), f.U2: T2},
                 expected=[m.AssignTasks(MB10, None, (103,)),
                           m.AssignTasks(MB10, f.M1, (103,), uuid=f.U1)]),
            # A policy changed.
            dict(instances={f.U1: f.inst(bw=f.shared(20)),
                            f.U2: self.instances[f.U2]},
                 first=m.CreateGroup(MB20)),
            # The kernel refuses that group for a while.
            dict(instances={f.U1: f.inst(bw=f.shared(20)),
                            f.U2: self.instances[f.U2]},
                 blocked={MB20: 'no CLOSID'}),
            # The monitoring window left one instance out.
            dict(window=frozenset([f.U2]),
                 first=m.RemoveMonGroup(MB10, f.M1)),
            # Its monitoring group is left to drain.
            dict(window=frozenset([f.U2]), draining={f.M1}),
        ]
        for change in changes:
            expected = change.pop('expected', None)
            first = change.pop('first', None)
            snapshot = change.pop('snapshot', converged())
            result, planned = self.run_memo(snapshot, **change)
            self.assertTrue(planned, change)
            if expected is not None:
                self.assertEqual(expected, result.actions, change)
            if first is not None:
                self.assertEqual(first, result.actions[0], change)
            # And back: the converged plan again, not the changed one.
            result, planned = self.run_memo(converged())
            self.assertTrue(planned)
            self.assertEqual([], result.actions)

    def test_callers_dicts_may_change_afterwards(self):
        # The agent keeps the dicts it planned with and updates them in
        # place (an event's instance): the memo must not take that for
        # the arguments it remembers.
        instances = dict(self.instances)
        threads = dict(self.threads)
        self.memo.plan(instances, threads, converged(), **self.args)
        threads[f.U1] = f.threads(100, vcpus=3)
        instances[f.U2] = f.inst(f.U2, bw=f.shared(20), dom_id=2)
        result = self.memo.plan(instances, threads, converged(),
                                **self.args)
        self.assertEqual(reconcile.plan(instances, threads, converged(),
                                        **self.args), result)
        self.assertNotEqual([], result.actions)

    def test_results_are_the_callers_own(self):
        first = self.memo.plan(self.instances, self.threads, converged(),
                               **self.args)
        first.placements.clear()
        first.actions.append('x')
        second = self.memo.plan(self.instances, self.threads, converged(),
                                **self.args)
        self.assertEqual(set(self.instances), set(second.placements))
        self.assertEqual([], second.actions)

    def test_mon_candidates(self):
        args = (hosts.REFERENCE, S)
        self.assertEqual([f.U1, f.U2], self.memo.mon_candidates(
            self.instances, self.threads, *args))
        # In a group of its own (MBps): no longer a candidate.
        instances = dict(self.instances)
        instances[f.U1] = f.inst(bw=f.mbps(500))
        self.assertEqual([f.U2], self.memo.mon_candidates(
            instances, self.threads, *args))
        # Its threads unknown: not a candidate either.
        self.assertEqual([f.U2], self.memo.mon_candidates(
            self.instances, {f.U2: T2}, *args))
        got = self.memo.mon_candidates(self.instances, self.threads, *args)
        got.clear()
        self.assertEqual([f.U1, f.U2], self.memo.mon_candidates(
            self.instances, self.threads, *args))
