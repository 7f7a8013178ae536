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

"""Per-instance core power and energy on the emulated AET host.

The emulator's ``aet`` profile (Intel AET, Linux 7.0+) gets a known core
power injected per package into the RMID that counts each instance; the
agent's ``power_watts`` must match it within 1%, its ``energy_joules``
must match the exact energy of the files it read, a new RMID must start
from a baseline (the hardware counters keep the previous owner's joules),
and Ceilometer's own polling manager must turn them into ``cpu.core.*``
samples.
"""

import os
import time
from unittest import mock

from tests.functional.agent import base
from tests.functional.agent import test_telemetry

P = base.PREFIX
# Per instance: (package 0 watts, package 1 watts).
WATTS = ((12.5, 2.5), (3.0, 0.0), (0.75, 0.25))


class EnergyMixin(object):

    profile = 'aet'

    def inject_power(self, only=None):
        for uuid, (w0, w1) in zip(self.uuids, WATTS):
            if only and uuid != only:
                continue
            path = test_telemetry.counter_path(
                self.agent.placements[uuid].counters)
            for package, watts in ((0, w0), (1, w1)):
                # The emulator's client (Gnocchi tests take self.client).
                self.emulator.client.set_energy_rate(path, watts,
                                                     package=package)

    def assertPower(self, doc, skip=()):
        for uuid, (w0, w1) in zip(self.uuids, WATTS):
            if uuid in skip:
                continue
            got = doc['instances'][uuid]['power_watts']
            self.assertIsNotNone(got, doc['instances'][uuid])
            self.assertLess(abs(got - (w0 + w1)), 0.01 * (w0 + w1),
                            (uuid, got))


class TestEnergy(EnergyMixin, test_telemetry.RatesTestCase):
    """The agent's power and energy against the injected truth.

    Readings are 4 s apart so that the timing jitter of a loaded machine
    stays well inside the 1%.
    """

    def setUp(self):
        super().setUp()
        self.inject_power()

    def paths(self):
        return {uuid: test_telemetry.counter_path(
            self.agent.placements[uuid].counters) for uuid in self.uuids}

    def test_power_within_one_percent_and_energy_exact(self):
        first = self.agent.sample()
        for uuid in self.uuids:
            inst = first['instances'][uuid]
            self.assertIsNone(inst['power_watts'])
            self.assertIsNone(inst['energy_joules'])
        # The exact energy each file stood for at the baseline reading.
        base_truth = self.client.energy_truth()
        for _ in range(3):
            doc = self.sample_after(4.0)
            self.assertPower(doc)
        exact = self.client.energy_truth()
        for uuid, path in self.paths().items():
            want = exact[path] - base_truth[path]
            got = doc['instances'][uuid]['energy_joules']
            # Two readings of two packages. Each reading is the
            # hardware's fixed point, floor(joules * 2**18), printed to
            # 1e-6 J: per package the difference of two readings is off
            # by less than one 2**-18 step plus two half digits.
            self.assertLess(abs(got - want), 2 * (2 ** -18 + 1e-6),
                            (uuid, got, want))
        host = doc['host']
        self.assertLess(abs(host['power_watts'] - sum(map(sum, WATTS))),
                        0.01 * sum(map(sum, WATTS)))

    def test_new_rmid_starts_from_a_baseline(self):
        self.agent.sample()
        self.assertPower(self.sample_after(4.0))
        a = self.uuids[0]
        before = self.agent.placements[a].counters
        os.rmdir(self.path(P + 'mb10', 'mon_groups', P + 'm-' + a))
        self.agent.tick()
        self.assertEqual(before, self.agent.placements[a].counters)
        # The new group's RMID carries whatever its last owner counted.
        self.inject_power(only=a)
        doc = self.sample_after(4.0)
        self.assertIsNone(doc['instances'][a]['power_watts'])
        # The new group's MBM counters have either a first value or, when
        # the instance's threads have not run since, none at all.
        self.assertIn(doc['instances'][a]['reason'],
                      ('first sample', 'no traffic yet'))
        self.assertPower(doc, skip=(a,))
        self.assertPower(self.sample_after(4.0))

    def test_read_error_keeps_the_baseline(self):
        self.agent.sample()
        b = self.uuids[1]
        path = self.paths()[b]
        self.client.fail('read', '/%s/mon_data/mon_PERF_PKG_00/core_energy'
                         % path, 'EIO', count=1)
        doc = self.sample_after(4.0)
        self.assertIsNone(doc['instances'][b]['power_watts'])
        self.assertPower(doc, skip=(b,))
        self.assertPower(self.sample_after(4.0))


class TestCeilometerEnergy(EnergyMixin, test_telemetry.CeilometerTestCase):

    METERS = {'cpu.core.power': ('gauge', 'W'),
              'cpu.core.energy': ('cumulative', 'J'),
              'cpu.core.activity': ('gauge', 'F/s')}

    def test_agent_manager_emits_core_energy_samples(self):
        self.inject_power()
        self.agent.sample()
        # 4 s, as in TestEnergy: 2 s apart, the timing jitter of a loaded
        # machine reached the 1% (1.0000000000000009% in one CI run).
        time.sleep(4.0)
        self.agent.sample()
        mgr = self.manager.AgentManager(0, self.conf, namespaces=['compute'])
        names = {e.name for e in mgr.extensions}
        self.assertTrue(set(self.METERS) <= names, names)
        mgr.polling_manager = self.manager.PollingManager(self.conf)
        sent = []
        with mock.patch.object(self.manager.PollingTask,
                               '_send_notification',
                               lambda task, samples: sent.extend(samples)):
            for task in mgr.setup_polling_tasks().values():
                mgr.interval_task(task)
        by_meter = {}
        for s in sent:
            by_meter.setdefault(s['counter_name'], {})[s['resource_id']] = s
        for meter, (kind, unit) in self.METERS.items():
            for uuid in self.uuids:
                one = by_meter[meter][uuid]
                self.assertEqual((kind, unit), (one['counter_type'],
                                                one['counter_unit']))
        for uuid, (w0, w1) in zip(self.uuids, WATTS):
            power = by_meter['cpu.core.power'][uuid]['counter_volume']
            self.assertLess(abs(power - (w0 + w1)), 0.01 * (w0 + w1))
