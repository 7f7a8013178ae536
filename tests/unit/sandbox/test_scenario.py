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

import json
import os

import fixtures

from rdt_virt.agent import state
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

    def test_chart_data(self):
        data = scenario.chart_data(self.results())
        self.assertEqual(scenario.GUESTS, data['guests'])
        self.assertEqual('protected', data['protected'])
        self.assertEqual(['1. protected guest alone',
                          '2. with 7 noisy neighbours, no policy'],
                         [p['label'] for p in data['phases']])
        self.assertEqual((0.25, 0.0), data['phases'][1]['share'])
        self.assertEqual((4e8, 0.0), data['phases'][1]['mbm']['noisy-2'])
        self.assertIsNone(data['phases'][0]['mbm']['noisy-2'])
        # Plain data: it goes through JSON unchanged but for tuples.
        self.assertEqual(json.loads(json.dumps(data))['phases'][1]['label'],
                         data['phases'][1]['label'])

    def test_chart(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest('matplotlib (rdt-virt[plot]) is not installed')
        tmp = self.useFixture(fixtures.TempDir()).path
        for name in ('s.png', 's.svg'):
            path = os.path.join(tmp, name)
            self.assertEqual(path, chart.write(
                scenario.chart_data(self.results()), path))
            self.assertGreater(os.path.getsize(path), 1000)
        with open(os.path.join(tmp, 's.png'), 'rb') as f:
            self.assertEqual(b'\x89PNG', f.read(4))


class CountersTest(base.TestCase):

    def test_counters_of_the_groups_the_agent_names(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        run = scenario.Scenario(tmp)
        root = run.sandbox.resctrl_root
        instances = {
            'a': {'name': 'protected', 'group': None,
                  'mon_group': 'rdtvirt-m-a', 'counters': 'rdtvirt-m-a'},
            'b': {'name': 'noisy-1', 'group': 'qemu-2-noisy-1-vcpus_0',
                  'mon_group': None, 'counters': 'qemu-2-noisy-1-vcpus_0'},
            'c': {'name': 'noisy-2', 'group': 'rdtvirt-mb10',
                  'mon_group': 'rdtvirt-m-c',
                  'counters': 'rdtvirt-mb10/rdtvirt-m-c'},
            # Not placed yet: no counters of its own.
            'd': {'name': 'noisy-3', 'group': None, 'mon_group': None,
                  'counters': None},
        }
        with open(os.path.join(tmp, 'state.json'), 'w') as f:
            json.dump({'version': state.VERSION, 'time': 1.0,
                       'instances': instances}, f)
        names = ('protected', 'noisy-1', 'noisy-2', 'noisy-3')
        run.vcpus = {n: [1] for n in names}
        dirs = run._counter_dirs()
        self.assertEqual({
            'protected': os.path.join(root, 'mon_groups', 'rdtvirt-m-a'),
            'noisy-1': os.path.join(root, 'qemu-2-noisy-1-vcpus_0'),
            'noisy-2': os.path.join(root, 'rdtvirt-mb10', 'mon_groups',
                                    'rdtvirt-m-c')}, dirs)
        for name, path in dirs.items():
            for dom, value in (('mon_L3_00', '1000'), ('mon_L3_01', '24')):
                os.makedirs(os.path.join(path, 'mon_data', dom))
                with open(os.path.join(path, 'mon_data', dom,
                                       'mbm_total_bytes'), 'w') as f:
                    f.write(value if name != 'noisy-2' else 'Unavailable')
        self.assertEqual({'protected': 1024, 'noisy-1': 1024},
                         run._mbm_bytes(dirs))
