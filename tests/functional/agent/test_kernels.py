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

"""The agent on the kernels and hosts operators run.

Every test here runs once per kernel release and host of
:func:`tests.functional.matrix.scenarios` (6.1, 6.8, 6.12 and the
newest release, on the Intel reference host and an AMD host by default),
with ids such as ``test_x(6.1-amd)``. They cover what differs between
releases: monitoring-group rename (6.5), thread-id lists (6.7/6.8), MBps
rounding (the 2024 bw_validate fix), RMID limbo (6.9), the rates on AMD
hosts, and the rotation of idle groups that read ``Unavailable``. The rest
of the agent's functional tests run on the newest release only.
"""

import os
import time

import fixtures
import testscenarios

from rdt_virt.agent import model
from rdt_virt.emulator import kernels
from rdt_virt.privsep import resctrl as priv
from tests.functional.agent import base
from tests.functional import matrix

P = base.PREFIX
TOTAL = 'mbm_total_bytes'


def counter_path(counters):
    group, mon = counters
    parts = [group] if group else []
    if mon:
        parts += ['mon_groups', mon]
    return '/'.join(parts) or '/'


class KernelTestCase(base.AgentTestCase):

    def setUp(self):
        super().setUp()
        # What the privileged side learnt of another kernel does not hold.
        self.useFixture(fixtures.MockPatchObject(
            priv, '_MULTI_TID', {'supported': None}))


class TestKernelMatrix(testscenarios.WithScenarios, KernelTestCase):

    scenarios = matrix.scenarios()

    @property
    def amd(self):
        return self.profile == 'amd'

    def own_policy(self):
        # AMD throttles in absolute units of 1/8 GBps, Intel in percent.
        return base.own(64, 'amd') if self.amd else base.own(30, 'percent')

    def assertConvergedTicksWriteNothing(self):
        seq = self.mark()
        for _ in range(2):
            self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))

    def test_converges_then_writes_nothing(self):
        plain = self.boot(vcpus=6)
        own = self.boot(self.own_policy(), vcpus=6)
        off = self.boot(monitor=False)
        shared = None if self.amd else self.boot(base.shared(10), vcpus=6)
        self.agent.tick()
        self.assertEqual(0, self.agent.totals['errors'])
        self.assertPlaced(plain, None)
        self.assertPlaced(own, P + 'i-' + own, mon=None)
        self.assertPlaced(off, None, mon=None)
        if shared:
            self.assertPlaced(shared, P + 'mb10')
        self.assertConvergedTicksWriteNothing()

    def test_percentage_change_moves_the_monitoring_group(self):
        if self.amd:
            self.skipTest('shared groups throttle in percent (Intel MBA)')
        a = self.boot(base.shared(10))
        self.agent.tick()
        inst = self.source.domains[a]
        self.source.domains[a] = model.Instance(
            a, inst.name, inst.domain_id, bandwidth=base.shared(20),
            monitor=True)
        self.agent.tick()
        # Throttled at the new value and monitored; never left behind in
        # the old group or in the default group.
        self.assertPlaced(a, P + 'mb20')
        self.assertEqual([P + 'mb20'], self.groups())
        renames = kernels.get_kernel(self.kernel).has('mon_rename')
        if not renames:
            self.assertIn('re-creating them instead', self.logger.output)
        self.assertConvergedTicksWriteNothing()
        # And back: the agent now knows and does not try a rename again.
        seq = self.mark()
        self.source.domains[a] = inst
        self.agent.tick()
        self.assertPlaced(a, P + 'mb10')
        ops = [e['op'] for e in self.mutations(seq)]
        self.assertEqual(renames, 'rename' in ops, ops)

    def test_rates_within_one_percent(self):
        uuids = [self.boot(), self.boot(self.own_policy())]
        self.agent.tick()
        doms = self.agent.caps.monitor.domain_ids
        rates = {}
        for n, uuid in enumerate(uuids):
            path = counter_path(self.agent.placements[uuid].counters)
            for dom in doms:
                rate = 1.0e8 * (n + 1) * (dom + 1)
                self.client.set_rate(path, rate, domain=dom, event=TOTAL)
                rates[uuid] = rates.get(uuid, 0.0) + rate
        self.agent.sample()
        # Long enough that reading the files takes a small share of it.
        time.sleep(6.0)
        doc = self.agent.sample()
        for uuid in uuids:
            got = doc['instances'][uuid]['mbm_total_bps']
            self.assertIsNotNone(got, doc['instances'][uuid])
            self.assertLess(abs(got - rates[uuid]), 0.01 * rates[uuid])
        self.assertLessEqual(doc['host']['mbm_total_bps'],
                             doc['host']['bandwidth_ceiling_bps'])


class TestMBpsRounding(testscenarios.WithScenarios, KernelTestCase):
    """Kernels before the bw_validate fix round MBps up to the granule."""

    profile = 'mba-mbps'
    scenarios = [(spec, {'kernel': spec})
                 for spec in ('6.1', '6.1+bw_validate', kernels.NEWEST)]

    def test_converged_ticks_write_nothing(self):
        a = self.boot(base.own(505))
        self.agent.tick()
        shown = self.read(P + 'i-' + a, 'schemata')
        rounds = not kernels.get_kernel(self.kernel).has('bw_validate')
        self.assertIn('MB:0=%d' % (510 if rounds else 505),
                      shown.replace(' ', ''))
        seq = self.mark()
        for _ in range(2):
            self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))


class TestCounterAssignment(KernelTestCase):
    """AMD Zen 5 on 6.18+: 32 MBM counters per domain, one per event."""

    profile = 'amd-zen5'
    kernel = kernels.NEWEST

    def counted(self, doc):
        return [u for u, inst in doc['instances'].items()
                if inst['reason'] != 'waiting for an MBM counter (counter '
                                     'assignment)']

    def test_counters_handed_out_rotated_and_reported(self):
        self.flags(rotation_interval=1.0, group='rdt_agent')
        self.agent = self.new_agent()
        uuids = [self.boot(vcpus=1) for _ in range(20)]
        self.agent.tick()
        self.assertEqual(0, self.agent.totals['errors'])
        info_doc = self.agent.counter_info
        self.assertEqual('mbm_event', info_doc['counter_mode'])
        budget = info_doc['counter_budget']
        # The default group keeps its own; 2 events per group.
        self.assertLess(budget, 20)
        self.assertEqual(budget, info_doc['instances_with_counters'])
        with_counter = set()
        for uuid in uuids:
            place = self.agent.placements[uuid]
            path = '/'.join(['mon_groups', place.mon_group,
                             'mbm_L3_assignments'])
            if 'mbm_total_bytes:0=e' in self.read(*path.split('/')):
                with_counter.add(uuid)
                self.client.set_rate('mon_groups/' + place.mon_group,
                                     2.0e8, domain=0,
                                     event='mbm_total_bytes')
        self.assertEqual(budget, len(with_counter))
        self.agent.sample()
        time.sleep(3.0)
        doc = self.agent.sample()
        host = doc['host']
        self.assertEqual(round(budget / 20.0, 4), host['counter_coverage'])
        self.assertEqual(32, host['mbm_counters_total'])
        for uuid in uuids:
            inst = doc['instances'][uuid]
            if uuid in with_counter:
                self.assertLess(abs(inst['mbm_total_bps'] - 2.0e8), 2.0e6,
                                inst)
            else:
                self.assertIsNone(inst['mbm_total_bps'])
                self.assertIn('MBM counter', inst['reason'])
        # Counters rotate: everyone gets one in turn.
        seen = set(with_counter)
        for _ in range(12):
            time.sleep(1.05)
            self.agent.tick()
            seen |= {u for u in uuids
                     if u in self.agent.counter_rotation.window}
        self.assertEqual(set(uuids), seen)
        self.assertEqual(0, self.agent.totals['errors'])


class _Clock(object):
    """A monotonic clock that ticks move on, one rotation interval each."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TestRotationLiveness(testscenarios.WithScenarios, KernelTestCase):
    """Six idle instances share an MBA group and take turns for 2 RMIDs.

    Their groups never see traffic, so every event file reads Unavailable,
    as on real 6.1 and 6.12 kernels: a group left to drain must still go,
    and a leaver's place is taken in the same tick.
    """

    scenarios = matrix.scenarios()

    def test_every_instance_gets_a_group_and_the_budget_is_used(self):
        self.flags(rotation_interval=1.0, rmid_budget=2, group='rdt_agent')
        clock = _Clock()
        agent = self.new_agent()
        agent.clock = agent.monitoring.clock = clock
        agent.sampling.clock = clock
        self.agent = agent
        uuids = [self.boot(base.shared(10), vcpus=1, others=0)
                 for _ in range(6)]
        group = P + 'mb10'
        seen, sizes = set(), []
        for _ in range(12):
            agent.tick()
            mons = self.mon_groups(group)
            sizes.append(len(mons))
            seen |= {u for u in uuids if P + 'm-' + u in mons}
            clock.now += 1.0
        self.assertEqual(set(uuids), seen)
        # Every tick after the first keeps the whole budget in use.
        self.assertEqual([2] * 11, sizes[1:])
        self.assertEqual(2 / 6.0, agent.rotation.coverage)
        self.assertEqual(0, agent.totals['errors'])
        doc = agent.sample()
        idle = [doc['instances'][u] for u in uuids
                if u in agent.rotation.window]
        self.assertEqual(['no traffic yet'] * 2,
                         [i['reason'] for i in idle])
        self.assertEqual([None] * 2, [i['mbm_total_bps'] for i in idle])


class TestRMIDLimbo(KernelTestCase):
    """Rotation on a host short of RMIDs, with limbo that never drains."""

    def test_rotation_keeps_the_control_groups_rmids(self):
        self.flags(rotation_interval=1.0, group='rdt_agent')
        self.agent = self.new_agent()
        threshold = int(self.read('info', 'L3_MON',
                                  'max_threshold_occupancy'))
        # Other tools take RMIDs until 6 are left for monitoring groups.
        num_rmids, num_closids = 192, 8
        for n in range(num_rmids - num_closids - 6):
            os.mkdir(self.path('mon_groups', 'other-%d' % n))
        uuids = [self.boot(base.shared(10), vcpus=1) for _ in range(10)]
        # What control groups may still need: every CLOSID but the
        # default group's and mb10's.
        reserve = num_closids - 2

        def hot():
            # Cache-resident data: a removed group's RMID would stay busy.
            for uuid in uuids:
                mon = P + 'm-' + uuid
                if mon in self.mon_groups(P + 'mb10'):
                    self.client.set_counter(
                        '%smb10/mon_groups/%s' % (P, mon), threshold * 10,
                        event='llc_occupancy')

        lowest = num_rmids
        for _ in range(8):
            self.agent.tick()
            hot()
            lowest = min(lowest, self.client.limbo()['free'])
            time.sleep(1.05)
        self.assertGreaterEqual(lowest, reserve)
        self.assertEqual(0, self.agent.totals['errors'])
        # Emptied groups wait for their cache to drain.
        draining = [m for m in self.mon_groups(P + 'mb10')
                    if not self.tasks(P + 'mb10', m)]
        self.assertTrue(draining)
        # Once it drains they go and monitoring goes round again.
        for mon in self.mon_groups(P + 'mb10'):
            self.client.set_counter('%smb10/mon_groups/%s' % (P, mon), 0,
                                    event='llc_occupancy')
        seen = set()
        for _ in range(6):
            self.agent.tick()
            seen |= set(self.agent.rotation.window)
            self.assertGreaterEqual(self.client.limbo()['free'], reserve)
            time.sleep(1.05)
        self.assertTrue(seen)
        self.assertLessEqual(len(self.mon_groups(P + 'mb10')), 6)
