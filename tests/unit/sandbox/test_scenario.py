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

"""The scenario's statistics, tables and chart, from made-up samples."""

import os

import fixtures

from rdt_virt.sandbox import chart
from rdt_virt.sandbox import scenario
from tests import base

MIB = 1024 * 1024


def samples(work, cpu, mbm):
    return [{'work': w * MIB, 'cpu': dict(cpu), 'mbm': dict(mbm)}
            for w in work]


class StatsTest(base.TestCase):

    def test_stats(self):
        self.assertIsNone(scenario.stats([]))
        self.assertIsNone(scenario.stats([None]))
        self.assertEqual((2.0, 0.0), scenario.stats([2.0]))
        mean, sd = scenario.stats([1.0, 2.0, 3.0, None])
        self.assertEqual(2.0, mean)
        self.assertAlmostEqual(1.0, sd)

    def results(self):
        noisy = {n: 0.125 for n in scenario.NOISY}
        results = {
            'alone': scenario.summarize(samples(
                [19, 20, 21], {'protected': 0.9}, {'protected': 2e9})),
            'none': scenario.summarize(samples(
                [5, 5, 5], dict(noisy, protected=0.25),
                dict({n: 4e8 for n in scenario.NOISY}, protected=5e8))),
        }
        return scenario.add_shares(results)

    def test_shares_of_the_alone_phase(self):
        results = self.results()
        mean, sd = results['alone']['share']
        self.assertEqual(1.0, mean)
        self.assertAlmostEqual(0.05, sd)
        self.assertEqual((0.25, 0.0), results['none']['share'])
        self.assertEqual((0.125, 0.0),
                         results['none']['guests']['noisy-3']['cpu'])
        self.assertNotIn('noisy-3', results['alone']['guests'])
        self.assertEqual(3, results['alone']['mbm_samples'])
        # A sample without fresh agent rates counts for the rest only.
        phase = scenario.summarize(samples([4, 6], {'protected': 0.5},
                                           {}) +
                                   samples([5], {'protected': 0.5},
                                           {'protected': 1e9}))
        self.assertEqual(1, phase['mbm_samples'])
        self.assertEqual((1e9, 0.0), phase['guests']['protected']['mbm'])
        self.assertEqual((5 * MIB, MIB), phase['work'])

    def test_tables(self):
        results = self.results()
        table = scenario.experiment_table(results)
        lines = table.splitlines()
        self.assertEqual(['PHASE', 'WORK', 'RATE', '[MiB/s]', 'SHARE', 'OF',
                          'ALONE'], lines[0].split())
        self.assertIn('1. protected guest alone', lines[1])
        self.assertIn('20.0 ± 1.0', lines[1])
        self.assertIn('100 ± 5%', lines[1])
        self.assertIn('5.0 ± 0.0', lines[2])
        self.assertIn('25 ± 0%', lines[2])
        self.assertEqual(3, len(lines))
        mbm = scenario.guest_table(results, 'mbm', 1e-6, '%.1f')
        row = [r for r in mbm.splitlines() if r.startswith('noisy-7')][0]
        self.assertEqual(['noisy-7', '10%', 'in', '3-4', '-', '400.0', '±',
                          '0.0', '-', '-'], row.split())

    def test_chart(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest('matplotlib (rdt-virt[plot]) is not installed')
        tmp = self.useFixture(fixtures.TempDir()).path
        for name in ('s.png', 's.svg'):
            path = os.path.join(tmp, name)
            self.assertEqual(path, chart.write(self.results(), path))
            self.assertGreater(os.path.getsize(path), 1000)
        with open(os.path.join(tmp, 's.png'), 'rb') as f:
            self.assertEqual(b'\x89PNG', f.read(4))
