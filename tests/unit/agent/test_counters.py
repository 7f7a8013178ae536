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

"""MBM counter assignment (mbm_event mode, Linux 6.18+)."""

from rdt_virt.agent import counters
from rdt_virt.agent import model as m
from rdt_virt.agent import rotation
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info
from tests import base
from tests.unit.resctrl import test_fs
from tests.unit.resctrl import variants

T, L = info.MBM_TOTAL_BYTES, info.MBM_LOCAL_BYTES
DOMS = variants.AMD_DOMS


def abmc_info(tree, counters_per_domain=32, available=None, on_mkdir=1):
    """Turn the AMD fixture into a 6.18 host in mbm_event mode."""
    base_dir = ('info', 'L3_MON')
    tree.write('[mbm_event]\ndefault\n', *base_dir + ('mbm_assign_mode',))
    tree.write(';'.join('%d=%d' % (d, counters_per_domain) for d in DOMS)
               + '\n', *base_dir + ('num_mbm_cntrs',))
    avail = available if available is not None else counters_per_domain
    tree.write(';'.join('%d=%d' % (d, avail) for d in DOMS) + '\n',
               *base_dir + ('available_mbm_cntrs',))
    tree.write('%d\n' % on_mkdir, *base_dir + ('mbm_assign_on_mkdir',))


def monitor(num=4, doms=(0, 1)):
    return info.MonitorCapability(
        num_rmids=256, features=frozenset((T, L, info.LLC_OCCUPANCY)),
        max_threshold_occupancy=1 << 20, domain_ids=doms,
        assign_mode=info.ASSIGN_MBM_EVENT,
        num_mbm_cntrs=tuple((d, num) for d in doms), assign_on_mkdir=True)


def state(t='e', loc='e', doms=(0, 1)):
    return {T: {d: t for d in doms}, L: {d: loc for d in doms}}


class TestFiles(test_fs.ResctrlTestCase):

    def test_capabilities_in_mbm_event_mode(self):
        rc = self.make('amd')
        abmc_info(self.tree, 32, 30)
        mon = rc.capabilities().monitor
        self.assertTrue(mon.assigns_counters)
        self.assertEqual(tuple((d, 32) for d in DOMS), mon.num_mbm_cntrs)
        self.assertTrue(mon.assign_on_mkdir)
        self.assertEqual((L, T), mon.mbm_events)
        self.assertEqual({d: 30 for d in DOMS}, rc.read_available_counters())

    def test_default_mode_and_older_kernels(self):
        rc = self.make('amd')
        self.assertIsNone(rc.capabilities().monitor.assign_mode)
        abmc_info(self.tree)
        self.tree.write('mbm_event\n[default]\n', 'info', 'L3_MON',
                        'mbm_assign_mode')
        mon = rc.capabilities().monitor
        self.assertEqual('default', mon.assign_mode)
        self.assertFalse(mon.assigns_counters)

    def test_assignments_read_and_written(self):
        rc = self.make('amd')
        mon_dir = ('mon_groups', variants.MON_D)
        self.tree.write('mbm_total_bytes:0=e;2=e;4=_;6=e\n'
                        'mbm_local_bytes:0=_;2=_;4=_;6=_\n',
                        *mon_dir + (fs.ASSIGNMENTS,))
        self.assertEqual({T: {0: 'e', 2: 'e', 4: '_', 6: 'e'},
                          L: {0: '_', 2: '_', 4: '_', 6: '_'}},
                         rc.read_assignments(None, variants.MON_D))
        rc.write_assignment(None, variants.MON_D, L, fs.ASSIGNED)
        # The kernel's format: <event>:<domain or *>=<state>, newline.
        self.assertEqual('mbm_local_bytes:*=e\n',
                         self.tree.read(*mon_dir + (fs.ASSIGNMENTS,)))


class TestPlan(base.TestCase):

    def test_budget_counts_free_and_held(self):
        mon = monitor(num=8)
        actual = {('g', 'a'): state(), ('g', 'b'): state('_', '_')}
        # 2 free + 2 held per domain, two events per group.
        self.assertEqual(2, counters.budget(mon, {0: 2, 1: 2}, actual))
        # The scarcest domain decides.
        self.assertEqual(1, counters.budget(mon, {0: 2, 1: 0}, actual))
        self.assertEqual(0, counters.budget(mon, {0: 0, 1: 0}, {}))

    def test_actions_release_before_assigning(self):
        wanted = {('g', 'a'): ('ua', False), ('g', 'b'): ('ub', True),
                  ('mb10', None): (None, False)}
        actual = {('g', 'a'): state(), ('g', 'b'): state('_', '_'),
                  ('mb10', None): state('e', '_')}
        self.assertEqual([
            m.AssignCounter('g', 'a', T, '_', 'ua'),
            m.AssignCounter('g', 'a', L, '_', 'ua'),
            m.AssignCounter('mb10', None, T, '_', None),
            m.AssignCounter('g', 'b', T, 'e', 'ub'),
            m.AssignCounter('g', 'b', L, 'e', 'ub')],
            counters.actions(wanted, actual, (T, L)))

    def test_converged_gives_nothing(self):
        wanted = {('g', 'a'): ('ua', True), ('g', 'b'): ('ub', False)}
        actual = {('g', 'a'): state(), ('g', 'b'): state('_', '_')}
        self.assertEqual([], counters.actions(wanted, actual, (T, L)))
        # A counter missing on one domain only is assigned again.
        actual[('g', 'a')][T][1] = '_'
        self.assertEqual([m.AssignCounter('g', 'a', T, 'e', 'ua')],
                         counters.actions(wanted, actual, (T, L)))

    def test_counters_rotate_with_full_coverage_over_time(self):
        # 32 counters per domain, 2 events: 16 groups; 40 instances.
        mon = monitor(num=32)
        names = ['u%02d' % i for i in range(40)]
        rot = rotation.Rotation(60)
        actual = {}
        seen = set()
        for now in range(0, 1200, 10):
            held = counters.held(actual, mon.mbm_events)
            available = {d: 32 - held.get(d, 0) for d in (0, 1)}
            budget = counters.budget(mon, available, actual)
            self.assertEqual(16, budget)
            window = rot.update(names, budget, now)
            wanted = {('g', u): (u, u in window) for u in names}
            for act in counters.actions(wanted, actual, mon.mbm_events):
                actual.setdefault((act.group, act.mon_group), {})[
                    act.event] = {0: act.state, 1: act.state}
            used = counters.held(actual, mon.mbm_events)
            self.assertLessEqual(max(used.values(), default=0), 32)
            seen |= window
        self.assertEqual(set(names), seen)
        self.assertLess(rot.coverage, 1.0)
        self.assertEqual(0.4, round(rot.coverage, 2))


class TestAgent(test_fs.ResctrlTestCase):
    """The agent's tick step that hands out counters, on a fixture tree."""

    def setUp(self):
        super().setUp()
        from rdt_virt.cmd import agent as agent_cmd
        from tests.unit.agent import test_executor
        self.rc = self.make('amd')
        self.flags(resctrl_root=self.rc.root, group='rdt')
        self.api = test_executor.FakeAPI()
        self.agent = agent_cmd.build_agent(source=object(), proc=object(),
                                           api=self.api)
        self.mon = ('mon_groups', variants.MON_D)
        self.own = (variants.INSTANCE,)
        for parts, text in ((self.mon, '_'), (self.own, 'e')):
            self.tree.write('mbm_total_bytes:%s\nmbm_local_bytes:%s\n' % (
                ';'.join('%d=%s' % (d, text) for d in DOMS),
                ';'.join('%d=%s' % (d, text) for d in DOMS)),
                *parts + (fs.ASSIGNMENTS,))
        self.placements = {
            variants.UUID_D: m.Placement(variants.UUID_D, None,
                                         variants.MON_D,
                                         (None, variants.MON_D)),
            variants.UUID_E: m.Placement(variants.UUID_E, variants.INSTANCE,
                                         None, (variants.INSTANCE, None))}
        self.snap = m.Snapshot({None: m.GroupState(None),
                                variants.INSTANCE: m.GroupState(
                                    variants.INSTANCE)})

    def assign(self, available):
        abmc_info(self.tree, 4, available)
        self.agent.caps = self.rc.capabilities()
        return self.agent.monitoring.assign_counters(
            self.agent.caps, self.placements, self.snap, 0)

    def test_counters_given_when_free_and_coverage_reported(self):
        self.assertEqual(2, self.assign(available=2))
        self.assertEqual([
            ('assign_counter',), ('assign_counter',)],
            [c[:1] for c in self.api.calls])
        info_doc = self.agent.counter_info
        self.assertEqual(1.0, info_doc['counter_coverage'])
        self.assertEqual(2, info_doc['instances_with_counters'])

    def test_no_free_counter_is_reported_not_hidden(self):
        self.assertEqual(0, self.assign(available=0))
        self.assertEqual([], self.api.calls)
        self.assertEqual(0.5, self.agent.counter_info['counter_coverage'])
        self.assertEqual(1, self.agent.counter_info['instances_with_counters'])
