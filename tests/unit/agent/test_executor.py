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

"""The executor: writes counted, refusals turned into outcomes."""

from rdt_virt.agent import executor
from rdt_virt.agent import model as m
from rdt_virt.privsep import resctrl as priv
from tests import base

MB10 = 'rdtvirt-mb10'
MB20 = 'rdtvirt-mb20'
U1 = '11111111-1111-4111-8111-111111111111'
MON = 'rdtvirt-m-11111111-1111-4111-8111-111111111111'


class FakeAPI(object):
    """Records calls; answers from a table of failures."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail or {}

    def _answer(self, name, *args):
        self.calls.append((name,) + args)
        code = self.fail.get((name, args[0] if args else None))
        if code:
            return {'ok': False, 'error': code, 'message': code}
        return dict(priv.OK)

    def create_group(self, name):
        return self._answer('create_group', name)

    def remove_group(self, name):
        return self._answer('remove_group', name)

    def write_schemata(self, group, text):
        return self._answer('write_schemata', group, text)

    def create_mon_group(self, group, name):
        return self._answer('create_mon_group', name, group)

    def remove_mon_group(self, group, name):
        return self._answer('remove_mon_group', name, group)

    def move_mon_group(self, name, group, new_group):
        return self._answer('move_mon_group', name, group, new_group)

    def assign_counter(self, group, mon, event, state):
        return self._answer('assign_counter', mon or group, event, state)

    def assign_tasks(self, group, mon, tids):
        result = self._answer('assign_tasks', mon or group, tids)
        result.update(moved=tids, gone=[])
        return result


PLAN = [m.CreateGroup(MB10), m.WriteSchemata(MB10, 'MB:0=10\n'),
        m.AssignTasks(MB10, None, (1, 2, 3)),
        m.CreateMonGroup(MB10, MON), m.AssignTasks(MB10, MON, (1, 2, 3))]


class TestExecutor(base.TestCase):

    def test_counts_writes(self):
        api = FakeAPI()
        out = executor.Executor(api).apply(PLAN)
        self.assertEqual(1 + 1 + 3 + 1 + 3, out.writes)
        self.assertEqual([(MB10, None), (MB10, MON)], out.created)
        self.assertEqual([], out.failures)
        self.assertEqual(5, len(api.calls))

    def test_no_closid_blocks_and_skips_dependents(self):
        api = FakeAPI({('create_group', MB10): priv.E_NOSPACE})
        out = executor.Executor(api).apply(PLAN)
        self.assertEqual({MB10: 'no free CLOSID or RMID'}, out.blocked)
        self.assertEqual(1, len(api.calls))
        self.assertEqual(1, out.writes)
        self.assertFalse(out.rmids_exhausted)

    def test_rmid_exhaustion_and_limbo(self):
        for code, reason, exhausted in (
                (priv.E_NOSPACE, 'no free RMID', True),
                (priv.E_BUSY, 'RMIDs busy in limbo', False)):
            api = FakeAPI({('create_mon_group', MON): code})
            out = executor.Executor(api).apply(PLAN)
            self.assertEqual({MON: reason}, out.blocked)
            self.assertEqual(exhausted, out.rmids_exhausted)
            # The monitoring group's threads are not written.
            self.assertEqual(4, len(api.calls))

    def test_group_made_by_someone_else_is_fine(self):
        api = FakeAPI({('create_group', MB10): priv.E_EXISTS})
        out = executor.Executor(api).apply(PLAN)
        self.assertEqual(5, len(api.calls))
        self.assertEqual([], out.failures)

    def test_refused_write_is_reported_and_the_rest_goes_on(self):
        api = FakeAPI({('write_schemata', MB10): priv.E_REFUSED})
        out = executor.Executor(api).apply(PLAN)
        self.assertEqual(1, len(out.failures))
        self.assertEqual(5, len(api.calls))

    def test_failures_counted_by_error_over_the_executors_life(self):
        ex = executor.Executor(FakeAPI())
        # Every refusal is there from the start, at 0.
        self.assertEqual({'nospace': 0, 'busy': 0, 'notfound': 0,
                          'notmounted': 0, 'refused': 0},
                         dict(ex.failures))
        ex.apply(PLAN)
        self.assertEqual(0, sum(ex.failures.values()))
        ex.api = FakeAPI({('write_schemata', MB10): priv.E_REFUSED,
                          ('create_mon_group', MON): priv.E_BUSY})
        ex.apply(PLAN)
        ex.apply(PLAN)
        self.assertEqual(2, ex.failures['refused'])
        self.assertEqual(2, ex.failures['busy'])
        # Handled, not failed: a group someone else made first.
        ex.api = FakeAPI({('create_group', MB10): priv.E_EXISTS})
        ex.apply(PLAN)
        self.assertEqual(4, sum(ex.failures.values()))

    def test_not_mounted(self):
        api = FakeAPI({('create_group', MB10): priv.E_NOTMOUNTED})
        out = executor.Executor(api).apply(PLAN[:1])
        self.assertTrue(out.not_mounted)

    def test_kernel_without_rename_recreates_the_mon_group(self):
        # Before 6.5 rename answers EPERM: the threads move to their new
        # control group, never through the default one, and the
        # monitoring group is made again there.
        api = FakeAPI({('move_mon_group', MON): priv.E_NORENAME})
        ex = executor.Executor(api)
        move = m.MoveMonGroup(MON, MB10, MB20, (1, 2), uuid=U1)
        out = ex.apply([move, m.RemoveGroup(MB10)])
        self.assertEqual([
            ('move_mon_group', MON, MB10, MB20),
            ('assign_tasks', MB20, [1, 2]),
            ('create_mon_group', MON, MB20),
            ('assign_tasks', MON, [1, 2]),
            ('remove_mon_group', MON, MB10),
            ('remove_group', MB10)], api.calls)
        self.assertEqual([(MB20, MON)], out.created)
        self.assertFalse(ex.can_rename)
        # Remembered: no rename is tried again.
        api.calls = []
        ex.apply([move])
        self.assertEqual('assign_tasks', api.calls[0][0])
        self.assertNotIn('move_mon_group', [c[0] for c in api.calls])

    def test_without_rename_a_refused_thread_move_keeps_the_old_group(self):
        api = FakeAPI({('move_mon_group', MON): priv.E_NORENAME,
                       ('assign_tasks', MB20): priv.E_NOTFOUND})
        ex = executor.Executor(api)
        ex.apply([m.MoveMonGroup(MON, MB10, MB20, (1, 2)),
                  m.RemoveGroup(MB10)])
        names = [c[0] for c in api.calls]
        self.assertNotIn('remove_group', names)
        self.assertNotIn('remove_mon_group', names)

    def test_rename_that_works_is_remembered(self):
        ex = executor.Executor(FakeAPI())
        ex.apply([m.MoveMonGroup(MON, MB10, MB20, (1,))])
        self.assertTrue(ex.can_rename)

    def test_move_and_removals(self):
        api = FakeAPI()
        out = executor.Executor(api).apply([
            m.MoveMonGroup(MON, MB10, None), m.RemoveMonGroup(None, MON),
            m.RemoveGroup(MB10)])
        self.assertEqual(3, out.writes)
        self.assertEqual(['move_mon_group', 'remove_mon_group',
                          'remove_group'], [c[0] for c in api.calls])
