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

import io
import json
import os

import fixtures

from rdt_virt.agent import state
from rdt_virt.sandbox import chart
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import report
from rdt_virt.sandbox import scenario
from tests import base

MIB = 1024 * 1024


def samples(work, cpu, mbm):
    return [{'work': w * MIB, 'cpu': dict(cpu), 'mbm': dict(mbm)}
            for w in work]


class StatsTest(base.TestCase):

    def test_stats(self):
        self.assertIsNone(report.stats([]))
        self.assertIsNone(report.stats([None]))
        self.assertEqual((2.0, 0.0), report.stats([2.0]))
        mean, sd = report.stats([1.0, 2.0, 3.0, None])
        self.assertEqual(2.0, mean)
        self.assertAlmostEqual(1.0, sd)

    def results(self):
        noisy = {n: 0.125 for n in report.NOISY}
        results = {
            'alone': report.summarize(samples(
                [19, 20, 21], {'protected': 0.9}, {'protected': 2e9})),
            'none': report.summarize(samples(
                [5, 5, 5], dict(noisy, protected=0.25),
                dict({n: 4e8 for n in report.NOISY}, protected=5e8))),
        }
        return report.add_shares(results)

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
        phase = report.summarize(
            samples([4, 6], {'protected': 0.5}, {}) +
            samples([5], {'protected': 0.5}, {'protected': 1e9}))
        self.assertEqual(1, phase['mbm_samples'])
        self.assertEqual((1e9, 0.0), phase['guests']['protected']['mbm'])
        self.assertEqual((5 * MIB, MIB), phase['work'])

    def test_tables(self):
        results = self.results()
        table = report.experiment_table(results)
        lines = table.splitlines()
        self.assertEqual(['PHASE', 'WORK', 'RATE', '[MiB/s]', 'SHARE', 'OF',
                          'ALONE'], lines[0].split())
        self.assertIn('1. protected guest alone', lines[1])
        self.assertIn('20.0 ± 1.0', lines[1])
        self.assertIn('100 ± 5%', lines[1])
        self.assertIn('5.0 ± 0.0', lines[2])
        self.assertIn('25 ± 0%', lines[2])
        self.assertEqual(3, len(lines))
        mbm = report.guest_table(results, 'mbm', 1e-6, '%.1f')
        row = [r for r in mbm.splitlines() if r.startswith('noisy-7')][0]
        self.assertEqual(['noisy-7', '10%', 'in', '3-4,', 'low', 'in', '5-7',
                          '-', '400.0', '±', '0.0'] + ['-'] * 5,
                         row.split())

    def test_chart_data(self):
        data = report.chart_data(self.results())
        self.assertEqual(report.GUESTS, data['guests'])
        self.assertIsNone(data['timeline'])
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
                report.chart_data(self.results()), path))
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
        values = {'protected': ('1000', '24'),
                  # Its vCPU has not run on domain 1 yet.
                  'noisy-1': ('1000', 'Unavailable'),
                  'noisy-2': ('1000', 'Error')}
        for name, path in dirs.items():
            for dom, value in zip(('mon_L3_00', 'mon_L3_01'), values[name]):
                os.makedirs(os.path.join(path, 'mon_data', dom))
                with open(os.path.join(path, 'mon_data', dom,
                                       'mbm_total_bytes'), 'w') as f:
                    f.write(value + '\n')
        self.assertEqual(
            {'protected': {'mon_L3_00': 1000, 'mon_L3_01': 24},
             'noisy-1': {'mon_L3_00': 1000, 'mon_L3_01': None}},
            run._mbm_bytes(dirs))

    def test_rate_over_a_window(self):
        rate = scenario.Scenario._mbm_rate
        self.assertEqual(50.0, rate({0: 100, 1: 20}, {0: 180, 1: 40}, 2.0))
        # A domain where the RMID has not counted yet moved nothing...
        self.assertEqual(40.0, rate({0: 100, 1: None}, {0: 180, 1: None},
                                    2.0))
        # ... and once it has, all it counted is in the window.
        self.assertEqual(45.0, rate({0: 100, 1: None}, {0: 180, 1: 10},
                                    2.0))
        # A counter that went back, or lost its value, was reset.
        self.assertIsNone(rate({0: 100, 1: 20}, {0: 90, 1: 40}, 2.0))
        self.assertIsNone(rate({0: 100, 1: 20}, {0: 180, 1: None}, 2.0))
        # The group's domains changed (a remount): no rate.
        self.assertIsNone(rate({0: 100}, {0: 180, 1: 10}, 2.0))


UNIT = guest.WORK_UNIT_BYTES


def timeline(rates, levels, start=0.0, phase='controller', cpus=None):
    """Timeline points a second apart.

    *rates* are the protected guest's work units per second, *levels* each
    second's level of the neighbours (one value for all seven), *cpus*
    its vCPU time per second (CPUs; 1.0 throughout by default).
    """
    points, units, cpu = [], 0, 0.0
    for i, (rate, level) in enumerate(zip(rates, levels)):
        points.append({'t': start + i, 'phase': phase,
                       'units': {'protected': units,
                                 'noisy-1': 10 * i},
                       'cpu': {'protected': cpu},
                       'levels': dict({n: level for n in report.NOISY},
                                      protected=None)})
        units += rate
        cpu += 1.0 if cpus is None else cpus[i]
    return points


class TimelineTest(base.TestCase):

    def test_window_rate(self):
        points = timeline([4, 4, 8, 8, 8], [None] * 5)
        self.assertEqual(4 * UNIT, report.window_rate(points, 'protected',
                                                      0, 2))
        self.assertEqual(8 * UNIT, report.window_rate(points, 'protected',
                                                      2, 4))
        # One point is no window; a guest without counts has no rate.
        self.assertIsNone(report.window_rate(points, 'protected', 1, 1.5))
        self.assertIsNone(report.window_rate(points, 'noisy-2', 0, 4))
        points[1]['units']['protected'] = None
        self.assertEqual(4 * UNIT, report.window_rate(points, 'protected',
                                                      0, 2))

    def test_window_cpu(self):
        points = timeline([4] * 5, [None] * 5,
                          cpus=[1.0, 1.0, 0.25, 0.25, 1.0])
        self.assertEqual(1.0, report.window_cpu(points, 'protected', 0, 2))
        self.assertEqual(0.25, report.window_cpu(points, 'protected', 2, 4))
        self.assertIsNone(report.window_cpu(points, 'protected', 1, 1.5))
        self.assertIsNone(report.window_cpu(points, 'noisy-1', 0, 4))
        # Points recorded before vCPU times were: no window.
        for p in points:
            del p['cpu']
        self.assertIsNone(report.window_cpu(points, 'protected', 0, 4))

    def test_vcpu_time_judged_apart_from_the_work_rate(self):
        # The work rate dips at t=3-4 while the vCPU time stays whole (the
        # machine's memory, not the neighbours), and the vCPU time is
        # squeezed at t=10-12 while the work rate is not.
        rates = [4, 4, 4, 1, 1] + [4] * 12
        cpus = [1.0] * 10 + [0.2, 0.2, 0.2] + [1.0] * 4
        points = timeline(rates, [None] * 17, cpus=cpus)
        self.assertEqual(0.25, report.min_share(points, 'protected', 0, 16,
                                                2, 4 * UNIT))
        self.assertAlmostEqual(0.2, report.min_share(
            points, 'protected', 0, 16, 2, 1.0, measure=report.window_cpu))
        self.assertEqual(3.0, report.time_to_rate(
            points, 'protected', 2.0, 3.6 * UNIT, hold=2.0))
        self.assertEqual(0.0, report.time_to_rate(
            points, 'protected', 0.0, 0.9, hold=2.0,
            measure=report.window_cpu))
        self.assertEqual(3.0, report.time_to_rate(
            points, 'protected', 10.0, 0.9, hold=2.0,
            measure=report.window_cpu))
        figures = report.steady(points, 0, 16, 2, 4 * UNIT, 1.0)
        self.assertEqual(0.25, figures['min_share'])
        self.assertAlmostEqual(0.2, figures['min_cpu_share'])
        self.assertIsNone(report.steady(points, 0, 16, 2, 4 * UNIT)[
            'min_cpu_share'])

    def test_time_to_rate_needs_the_rate_held(self):
        # Noisy neighbours start at t=10: the rate falls to 2, one lucky
        # second at 10, then the controller brings it back to 9 at t=16.
        rates = [10] * 10 + [2, 2, 10, 2, 2, 2] + [9] * 8
        points = timeline(rates, [None] * len(rates))
        self.assertEqual(6.0, report.time_to_rate(
            points, 'protected', 10.0, 9 * UNIT, hold=3.0))
        # A one-second hold takes the lucky second.
        self.assertEqual(2.0, report.time_to_rate(
            points, 'protected', 10.0, 9 * UNIT, hold=1.0))
        # Never reached, or no whole window left: None.
        self.assertIsNone(report.time_to_rate(
            points, 'protected', 10.0, 11 * UNIT, hold=3.0))
        self.assertIsNone(report.time_to_rate(
            points, 'protected', 10.0, 9 * UNIT, hold=30.0))

    def test_time_until_throttled_and_released(self):
        levels = [None, None, 70, 50, 30, 30, 30, 40, 60, None, None]
        points = timeline([1] * len(levels), levels)
        noisy = report.NOISY
        self.assertEqual(2.0, report.time_until(points, 0, noisy, True))
        self.assertEqual(2.0, report.time_to_first_throttle(points, 0,
                                                            noisy))
        self.assertEqual(3.0, report.time_until(points, 6, noisy, False))
        self.assertIsNone(report.time_to_first_throttle(points, 9, noisy))
        # One neighbour still throttled: not released.
        points[9]['levels']['noisy-4'] = 10
        points[10]['levels']['noisy-4'] = 20
        self.assertIsNone(report.time_until(points, 6, noisy, False))
        # Only once all seven are throttled do they count as throttled.
        points[2]['levels']['noisy-4'] = None
        self.assertEqual(3.0, report.time_until(points, 0, noisy, True))

    def test_level_changes(self):
        levels = [None, 70, 50, 50, 50, 50, 50]
        points = timeline([1] * len(levels), levels)
        # Seven neighbours changed at t=1 and again at t=2.
        self.assertEqual(14, report.level_changes(points, 0, 6))
        self.assertEqual(7, report.level_changes(points, 2, 6))
        self.assertEqual(0, report.level_changes(points, 3, 6))
        points[5]['levels']['noisy-3'] = 60
        self.assertEqual(2, report.level_changes(points, 3, 6))
        self.assertEqual(0, report.level_changes([], 0, 6))

    def test_min_share_over_the_steady_part(self):
        points = timeline([4, 4, 4, 2, 2, 4, 4, 4, 4], [None] * 9)
        # Windows of 2 s: 8, 6, 4, 6, 8 units... the lowest holds 2 a
        # second, half of the 4 it had alone.
        self.assertEqual(0.5, report.min_share(points, 'protected', 0, 8,
                                               2, 4 * UNIT))
        # Only what lies within the span counts.
        self.assertEqual(1.0, report.min_share(points, 'protected', 5, 8,
                                               2, 4 * UNIT))
        self.assertIsNone(report.min_share(points, 'protected', 7.5, 8,
                                           2, 4 * UNIT))
        self.assertIsNone(report.min_share(points, 'protected', 0, 8, 2,
                                           None))

    def test_steady_counts_every_change_after_settling(self):
        # A cycle: throttled, released step by step, throttled again; the
        # last changes are long before the end of the phase.
        levels = [10, 10, 20, 30, 10, 10, 10, 10, 10, 10, 10, 10]
        points = timeline([4] * len(levels), levels)
        figures = report.steady(points, 1, 11, 2, 4 * UNIT)
        self.assertEqual([1, 11], figures['steady'])
        self.assertEqual(21, figures['level_changes'])
        self.assertEqual(1.0, figures['min_share'])
        self.assertEqual(0, report.steady(points, 5, 11, 2,
                                          4 * UNIT)['level_changes'])

    def results(self, idle_each, time_to_target, changes, min_share=0.85):
        def phase(work, noisy):
            return report.summarize([
                {'work': work * MIB, 'cpu': {}, 'mbm': {},
                 'works': dict({n: noisy * MIB for n in report.NOISY},
                               protected=work * MIB)}] * 3)
        results = {'alone': phase(20, 0), 'per-instance': phase(18, 1),
                   'controller': phase(19, 0.5), 'idle': phase(0, idle_each),
                   'resumed': phase(18.5, 0.5)}
        results['controller'].update(time_to_target=time_to_target,
                                     level_changes=changes,
                                     min_share=min_share,
                                     min_cpu_share=0.95, time_to_cpu=1.5)
        results['idle'].update(time_to_release=12.0, level_changes=0)
        results['resumed'].update(time_to_target=None,
                                  time_to_throttle=3.0, level_changes=0,
                                  min_share=None, min_cpu_share=0.9,
                                  time_to_cpu=6.0)
        results['alone'].update(min_share=0.7, level_changes=0)
        results['host_load'] = 1
        return report.add_shares(results)

    def test_runs_table_judges_the_mean(self):
        runs = [self.results(idle_each=2.29, time_to_target=t, changes=c,
                             min_share=m)
                for t, c, m in ((2.0, 0, 0.9), (7.0, 3, 0.82),
                                (3.0, 0, 0.85))]
        text = report.runs_table(runs)
        width = text.index('RUN 1')
        rows = {line[:width].strip(): line[width:].split()
                for line in text.splitlines()[1:]}
        # The mean 4.0 s meets the target, and the worst run (2) is
        # within its own.
        self.assertEqual(['2.0', '7.0', '3.0', '4.0', 'RUN', '2', '<=', '5,',
                          'worst', '<=', '8', 'met'],
                         rows['5. time to >= 90% of alone [s]'])
        self.assertEqual(['90.0', '82.0', '85.0', '85.7', 'RUN', '2', '>=',
                          '80,', 'every', 'run', 'met'],
                         rows['5. its minimum share after settling [%]'])
        self.assertEqual(['0.0', '3.0', '0.0', '1.0', 'RUN', '2', '0', 'NOT',
                          'met'], rows['5. level changes after settling'])
        self.assertEqual(['2.3', '2.3', '2.3', '2.3', 'RUN', '1', '>=', '2',
                          'met'],
                         rows["6. neighbours' work against phase 3 [x]"])
        # A run that never got there: no mean, not met.
        self.assertEqual(['-', '-', '-', '-', '-', '<=', '5', 'NOT', 'met'],
                         rows['7. time to >= 90% of alone again [s]'])
        self.assertEqual(['1.0', '1.0', '1.0', '1.0'],
                         rows['host load outside the guests [CPU hogs]'])
        self.assertEqual(['70.0', '70.0', '70.0', '70.0'],
                         rows['1. alone, minimum share of its own mean '
                              '[%]'])
        self.assertEqual(['95.0', '95.0', '95.0', '95.0', 'RUN', '1', '>=',
                          '80,', 'every', 'run', 'met'],
                         rows['5. vCPU time, minimum share after settling '
                              '[%]'])
        self.assertEqual(['6.0', '6.0', '6.0', '6.0', 'RUN', '3', '<=', '5',
                          'NOT', 'met'],
                         rows['7. time to >= 90% of alone vCPU time again '
                              '[s]'])
        # A worst run past its own bound fails the mean that meets it.
        runs = [self.results(2.29, t, 0) for t in (1.0, 1.0, 9.0)]
        text = report.runs_table(runs)
        line, = [x for x in text.splitlines()
                 if x.startswith('5. time to >= 90% of alone [s]')]
        self.assertTrue(line.endswith('NOT met'), line)

    def test_summarize_reads_the_runs_directories(self):
        from rdt_virt.cmd import scenario as cmd
        tmp = self.useFixture(fixtures.TempDir()).path
        dirs = []
        for i, took in enumerate((4.0, 8.0)):
            dirs.append(os.path.join(tmp, str(i)))
            os.mkdir(dirs[-1])
            with open(os.path.join(dirs[-1], 'results.json'), 'w') as f:
                json.dump(self.results(2.5, took, 0), f)
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        self.assertEqual(0, cmd.main(['--summarize'] + dirs))
        line, = [x for x in out.getDetails()['stdout'].as_text().splitlines()
                 if x.startswith('5. time to >= 90% of alone [s]')]
        self.assertEqual(['4.0', '8.0', '6.0', 'RUN', '2', '<=', '5,',
                          'worst', '<=', '8', 'NOT', 'met'],
                         line.split()[-12:])
        # A directory without results: a clear error, status 2.
        err = self.useFixture(fixtures.StringStream('stderr'))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err.stream))
        self.assertEqual(2, cmd.main(['--summarize', tmp]))
        self.assertIn('results.json', err.getDetails()['stderr'].as_text())

    def test_noisy_work_needs_all_seven(self):
        phase = report.summarize([
            {'work': 1, 'cpu': {}, 'mbm': {},
             'works': {n: 2.0 for n in report.NOISY}},
            {'work': 1, 'cpu': {}, 'mbm': {},
             'works': {n: 2.0 for n in report.NOISY[1:]}}])
        self.assertEqual((14.0, 0.0), phase['noisy_work'])
        self.assertEqual((2.0, 0.0), phase['guests']['noisy-2']['work'])

    def test_controller_rows_against_the_targets(self):
        rows = {r[0]: r[1:] for r in report.controller_rows(
            self.results(idle_each=0.3, time_to_target=4.0, changes=0))}
        self.assertEqual(('95 ± 0%', '>= 90%', True),
                         rows['5. protected work rate, share of alone'])
        self.assertEqual(('4.0 s', '<= 5 s', True),
                         rows['5. time to >= 90% of alone'])
        self.assertEqual(('85%', '>= 80%', True),
                         rows['5. its minimum share after settling'])
        self.assertEqual(('-', '', None),
                         rows['7. its minimum share after settling'])
        # 7 x 0.3 MiB/s against 7 x 1 MiB/s capped: 0.3x, not met.
        self.assertEqual(('0.30x', '>= 2x', False),
                         rows['6. ... against phase 3 (static '
                              'hw:mem_bw=10)'])
        self.assertEqual(('12.0 s', '', None),
                         rows['6. time until released'])
        self.assertEqual(('-', '<= 5 s', None),
                         rows['7. time to >= 90% of alone again'])
        self.assertEqual(('3.0 s', '', None),
                         rows['7. time until a neighbour is throttled '
                              'again'])
        self.assertEqual(('0', '0', True),
                         rows['5. level changes after settling'])
        self.assertEqual(('95%', '>= 80%', True),
                         rows['5. its vCPU time, minimum share after '
                              'settling'])
        self.assertEqual(('1.5 s', '<= 5 s', True),
                         rows['5. time to >= 90% of alone vCPU time'])
        self.assertEqual(('90%', '', None),
                         rows['7. its vCPU time, minimum share after '
                              'settling'])
        self.assertEqual(('6.0 s', '<= 5 s', False),
                         rows['7. time to >= 90% of alone vCPU time'])
        self.assertEqual(('70%', '', None),
                         rows['1. alone, minimum share of its own mean'])
        rows = {r[0]: r[1:] for r in report.controller_rows(
            self.results(idle_each=2.29, time_to_target=14.0, changes=3))}
        self.assertEqual(('2.29x', '>= 2x', True),
                         rows['6. ... against phase 3 (static '
                              'hw:mem_bw=10)'])
        self.assertEqual(('14.0 s', '<= 5 s', False),
                         rows['5. time to >= 90% of alone'])
        self.assertEqual(('3', '0', False),
                         rows['5. level changes after settling'])
        # Phase 7's vCPU time took 6 s in every made-up run.
        table = report.controller_table(self.results(16, 4.0, 0))
        self.assertEqual(1, table.count('NOT met'))
        self.assertIn('met', table)
        table = report.controller_table(self.results(16, 14.0, 0))
        self.assertEqual(2, table.count('NOT met'))
        text = report.experiment_table(self.results(16, 4.0, 0))
        self.assertIn('5. neighbours low, protected high (controller)', text)
        self.assertIn('6. protected guest suspended', text)
        self.assertIn('7. protected guest resumed', text)

    def test_timeline_series(self):
        rates = [10] * 4 + [5] * 4
        levels = [None] * 4 + [50] * 4
        points = timeline(rates[:4], levels[:4]) + timeline(
            rates[4:], levels[4:], start=4.0, phase='idle')
        for p in points[4:]:
            p['units']['protected'] += 40
        series = report.timeline_series(points, 10 * UNIT, step=2.0)
        self.assertEqual([(0.0, 'controller'), (4.0, 'idle')],
                         series['marks'])
        self.assertEqual((3.0, 100.0), series['levels']['noisy-1'][3])
        self.assertEqual((4.0, 50.0), series['levels']['noisy-1'][4])
        self.assertEqual((7.0, 50.0), series['levels']['noisy-1'][-1])
        self.assertEqual([(1.0, 1.0), (3.0, 1.0), (5.0, 0.5)],
                         series['work'])
        self.assertTrue(series['relative'])
        # A gap in the recording (guests starting) is a gap in the line.
        series = report.timeline_series(points[:1] + points[3:], 10 * UNIT)
        self.assertEqual([(1.0, None), (3.0, 1.0), (5.0, 0.5)],
                         series['work'])
        self.assertFalse(report.timeline_series(points, None)['relative'])
        data = report.chart_data({}, points)
        self.assertEqual([(0.0, '5'), (4.0, '6')],
                         data['timeline']['marks'])

    def test_chart_with_a_timeline(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest('matplotlib (rdt-virt[plot]) is not installed')
        results = self.results(16, 4.0, 0)
        points = timeline([10] * 5 + [5] * 10, [None] * 5 + [30] * 10)
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 't.svg')
        chart.write(report.chart_data(results, points), path)
        with open(path) as f:
            svg = f.read()
        self.assertIn('controller level', svg)
        self.assertIn('noisy-7', svg)


class RecordingTest(base.TestCase):

    def test_points_carry_work_counts_and_levels(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        run = scenario.Scenario(tmp, step=0.01)
        serial = os.path.join(tmp, 'p.serial')
        with open(serial, 'w') as f:
            f.write('BIOS..' + guest.WORK_BANNER + '...')
        run.meters = {'protected': guest.WorkMeter(serial),
                      'noisy-1': guest.WorkMeter(os.path.join(tmp, 'no'))}
        with open(os.path.join(tmp, 'state.json'), 'w') as f:
            json.dump({'version': state.VERSION, 'time': 1.0, 'instances': {
                'a': {'name': 'protected', 'priority': 'high',
                      'level': None, 'mbm_total_bps': None,
                      'reason': 'first reading'},
                'b': {'name': 'noisy-1', 'priority': 'low', 'level': 40},
                'c': {'name': 'other', 'priority': 'low', 'level': 10}},
                'host': {'controller': {'demand': {'a': 0.62}, 'domains': {
                    '0': {'pressure': 0.96, 'active_high': 0,
                          'decision': 'hold',
                          'reason': 'between the watermarks'}}}}}, f)
        run.wait(0.03)
        self.assertEqual([], run.points)     # not a recorded phase
        run.recording = 'controller'
        run.wait(0.05)
        self.assertGreaterEqual(len(run.points), 3)
        point = run.points[-1]
        self.assertEqual('controller', point['phase'])
        self.assertEqual({'protected': 3, 'noisy-1': None}, point['units'])
        self.assertEqual({'protected': None, 'noisy-1': 40},
                         point['levels'])
        # What the sample saw: why the protected guest had no rate.
        self.assertEqual({'time': 1.0, 'bps': None, 'why': 'first reading',
                          'demand': 0.62, 'pools': {'0': [
                              0.96, 0, 'hold', 'between the watermarks']}},
                         point['agent'])
        self.assertTrue(run.watch(lambda points: len(points) > 5, 5))
        self.assertFalse(run.watch(lambda points: False, 0.03))


class SteadyPartTest(base.TestCase):

    def test_a_controller_phase_is_measured_over_its_steady_part(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'rdt_virt.cmd.cli.top_table', lambda doc: ''))
        run = scenario.Scenario(tmp, out=io.StringIO(), settle=0.02,
                                samples=2, step=0.01, steady=0.2)
        run.cli = lambda *args: ''
        run.wait_for_work = lambda name: None
        run.wait_for_rates = lambda names: {}
        run.sample = lambda: {'work': 1.0, 'works': {}, 'cpu': {},
                              'mbm': {}}
        run.recording = 'controller'
        begun = run.now()
        run.measure('controller', 'title', settle=0.05)
        phase = run.results['controller']
        start, end = phase['steady']
        # It starts once the phase settled and lasts the steady time,
        # beyond the samples.
        self.assertGreaterEqual(start - begun, 0.05)
        self.assertGreaterEqual(end - start, 0.2)
        self.assertEqual(0, phase['level_changes'])
        self.assertIsNone(phase['min_share'])      # no alone phase
        self.assertIsNone(phase['min_cpu_share'])
        self.assertGreater(len(run.points), 10)
        # The alone phase has one too, judged against its own mean; the
        # static phases have none.
        run.measure('alone', 'title')
        self.assertEqual(1.0, run.results['alone']['work'][0])
        self.assertIn('min_share', run.results['alone'])
        run.recording = None
        run.measure('none', 'title')
        self.assertNotIn('steady', run.results['none'])


class HostLoadTest(base.TestCase):

    def test_hogs_run_while_inside_and_are_gone_after(self):
        from rdt_virt.sandbox import hostload
        with hostload.HostLoad(2) as load:
            self.assertEqual(2, len(load.procs))
            procs = list(load.procs)
            self.assertTrue(all(p.poll() is None for p in procs))
        self.assertTrue(all(p.poll() is not None for p in procs))
        with hostload.HostLoad(0) as load:
            self.assertEqual([], load.procs)


class BesideHostLoadTest(base.TestCase):
    """Beside host load, 5-7 are judged against alone beside that load."""

    def phase(self, work, cpu):
        return report.summarize(samples([work] * 3, {'protected': cpu}, {}))

    def test_controller_phases_against_alone_beside_the_load(self):
        results = {'alone': self.phase(20, 1.0), 'none': self.phase(5, 0.3),
                   'controller': self.phase(9, 0.45)}
        # Without host load: alone is every phase's reference.
        self.assertEqual(((20 * MIB, 0.0), (1.0, 0.0)),
                         report.reference(results, 'controller'))
        self.assertEqual(0.45, report.add_shares(
            dict(results))['controller']['share'][0])
        results['reference'] = {'work': (10 * MIB, 0.0), 'cpu': (0.5, 0.0),
                                'host_load': 1}
        results['host_load'] = 1
        self.assertEqual(((10 * MIB, 0.0), (0.5, 0.0)),
                         report.reference(results, 'controller'))
        # A phase before the load is still judged against alone.
        self.assertEqual(((20 * MIB, 0.0), (1.0, 0.0)),
                         report.reference(results, 'none'))
        report.add_shares(results)
        self.assertEqual(0.9, results['controller']['share'][0])
        self.assertEqual(0.25, results['none']['share'][0])
        rows = {r[0]: r[1] for r in report.controller_rows(results)}
        self.assertEqual('50%', rows['5-7. reference: alone beside the host '
                                     'load, share of 1.'])
        self.assertEqual('90 ± 0%',
                         rows['5. protected work rate, share of alone'])
        figures = {r[0]: r[1] for r in report._figures(results)}
        self.assertEqual(50.0, figures['5-7. reference: alone beside the '
                                       'host load, % of 1.'])
        del results['reference']
        figures = {r[0]: r[1] for r in report._figures(results)}
        self.assertIsNone(figures['5-7. reference: alone beside the host '
                                  'load, % of 1.'])

    def test_the_scenario_measures_the_reference_beside_the_load(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        out = io.StringIO()
        run = scenario.Scenario(tmp, out=out, samples=3, host_load=1)
        run.results['alone'] = self.phase(20, 1.0)
        rates = iter([12, 14, 16])
        run.sample = lambda: {'work': next(rates) * MIB, 'works': {},
                              'cpu': {'protected': 0.7}, 'mbm': {}}
        run._alone_beside_load()
        ref = run.results['reference']
        self.assertEqual(14 * MIB, ref['work'][0])
        self.assertAlmostEqual(0.7, ref['cpu'][0])
        self.assertEqual(1, ref['host_load'])
        self.assertIn('14.0 ± 2.0 MiB/s, 70% of alone on the idle host',
                      out.getvalue())


class AtTheFloorBesideLoadTest(base.TestCase):
    """Beside host load, the floored neighbours bound what protection gives.

    Where the host's own work leaves the guests less than the protected
    guest and seven neighbours at the floor want, no throttle gives the
    protected guest its alone rate: 5-7 are judged against the lower of
    the two references, and phase 6 against the cap beside the same load.
    """

    def phase(self, work, cpu, noisy=None):
        found = samples([work] * 3, {'protected': cpu}, {})
        for sample in found:
            sample['works'] = {n: noisy * MIB for n in report.NOISY} \
                if noisy else {}
        return report.summarize(found)

    def results(self):
        results = {'alone': self.phase(20, 1.0),
                   'per-instance': self.phase(19, 0.95, noisy=1),
                   'controller': self.phase(11, 0.55),
                   'idle': self.phase(0, 0.0, noisy=2),
                   'reference': {'work': (20 * MIB, 0.0),
                                 'cpu': (1.0, 0.0)},
                   'host_load': 1}
        return results

    def test_the_lower_reference_counts(self):
        results = self.results()
        rows = {r[0]: r[1] for r in report._figures(results)}
        # Without the floor's reference: against alone beside the load,
        # and phase 6 against phase 3 (7 neighbours x 1 MiB/s).
        self.assertEqual(((20 * MIB, 0.0), (1.0, 0.0)),
                         report.reference(results, 'controller'))
        self.assertEqual(2.0, rows["6. neighbours' work against phase 3 "
                                   "[x]"])
        self.assertIsNone(rows['5-7. reference: at the floor beside the '
                               'load, % of 1.'])
        results['floor'] = {'work': (12 * MIB, 0.0), 'cpu': (0.6, 0.0),
                            'noisy_work': (3.5 * MIB, 0.0)}
        self.assertEqual(((12 * MIB, 0.0), (0.6, 0.0)),
                         report.reference(results, 'controller'))
        self.assertEqual(((20 * MIB, 0.0), (1.0, 0.0)),
                         report.reference(results, 'none'))
        report.add_shares(results)
        self.assertAlmostEqual(11 / 12.0,
                               results['controller']['share'][0])
        rows = {r[0]: r[1] for r in report._figures(results)}
        self.assertEqual(4.0, rows["6. neighbours' work against phase 3 "
                                   "[x]"])
        self.assertEqual(60.0, rows['5-7. reference: at the floor beside '
                                    'the load, % of 1.'])
        text = {r[0]: r[1] for r in report.controller_rows(results)}
        self.assertEqual('60%', text['5-7. reference: neighbours at the '
                                     'floor beside the host load, share '
                                     'of 1.'])
        # A floor above alone beside the load (noise): the lower counts.
        results['floor']['work'] = (21 * MIB, 0.0)
        self.assertEqual(((20 * MIB, 0.0), (1.0, 0.0)),
                         report.reference(results, 'controller'))

    def test_the_scenario_measures_the_floor_beside_the_load(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        out = io.StringIO()
        run = scenario.Scenario(tmp, out=out, samples=3, settle=0.0,
                                host_load=1)
        run.results['alone'] = self.phase(20, 1.0)
        rates = iter([11, 12, 13])
        run.sample = lambda: {'work': next(rates) * MIB,
                              'works': {n: 0.5 * MIB for n in report.NOISY},
                              'cpu': {'protected': 0.6}, 'mbm': {}}
        run._floor_beside_load()
        floor = run.results['floor']
        self.assertEqual(12 * MIB, floor['work'][0])
        self.assertAlmostEqual(0.6, floor['cpu'][0])
        self.assertEqual(3.5 * MIB, floor['noisy_work'][0])
        self.assertIn('the protected guest 12.0 ± 1.0 MiB/s, 60% of alone',
                      out.getvalue())


class InForceTest(base.TestCase):
    """Throttled and released count from resctrl, not the state file."""

    def test_times_count_from_the_groups_in_force(self):
        # The state file shows the level in force at the next sample,
        # three seconds after the tick that wrote it.
        levels = [None] * 7 + [10] * 5
        points = timeline([1] * len(levels), levels)
        for i, point in enumerate(points):
            point['in_force'] = ({n: 10 for n in report.NOISY}
                                 if i >= 4 else {})
        self.assertEqual(4.0, report.time_to_first_throttle(
            points, 0, report.NOISY))
        self.assertEqual(4.0, report.time_until(points, 0, report.NOISY,
                                                True))
        # A timeline recorded without it: from the levels.
        for point in points:
            del point['in_force']
        self.assertEqual(7.0, report.time_to_first_throttle(
            points, 0, report.NOISY))

    def test_in_force_reads_the_groups_of_the_monitoring_groups(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        run = scenario.Scenario(tmp)
        root = run.sandbox.resctrl_root
        run.uuids = {'noisy-1': 'a', 'noisy-2': 'b', 'noisy-3': 'c',
                     'protected': 'p'}
        run.meters = dict.fromkeys(run.uuids)
        for group, mb, mons in (('rdtvirt-mb10', 10, ['a']),
                                ('rdtvirt-mb100', 100, ['b'])):
            for mon in mons:
                os.makedirs(os.path.join(root, group, 'mon_groups',
                                         'rdtvirt-m-' + mon))
            with open(os.path.join(root, group, 'schemata'), 'w') as f:
                f.write('    L3:0=7ff;1=7ff\n    MB:0=%3d;1=%3d\n'
                        % (mb, mb))
        # In the default group: not throttled.
        os.makedirs(os.path.join(root, 'mon_groups', 'rdtvirt-m-c'))
        with open(os.path.join(root, 'schemata'), 'w') as f:
            f.write('    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n')
        self.assertEqual({'noisy-1': 10}, run._in_force())
        # AMD's unit (1/8 GBps, 2048 unthrottled): 100 is a throttle.
        with open(os.path.join(root, 'schemata'), 'w') as f:
            f.write('    L3:0=ffff;1=ffff\n    MB:0=2048;1=2048\n')
        self.assertEqual({'noisy-1': 10, 'noisy-2': 100}, run._in_force())
        # A group being rewritten (unparsable) is left out, not fatal.
        with open(os.path.join(root, 'rdtvirt-mb10', 'schemata'), 'w') as f:
            f.write('    MB:0=\n')
        self.assertEqual({'noisy-2': 100}, run._in_force())
