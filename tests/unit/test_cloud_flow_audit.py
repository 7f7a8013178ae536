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

"""The flow's audits, against Watcher's answers recorded without a cloud.

Watcher (14 to 17) creates an action plan for every audit; one without
actions is created SUCCEEDED. The flow must count that as "recommends
nothing" and run the audit again, not take it for an answer.
"""

import fixtures

from rdt_virt.cloud import flow as flow_mod
from rdt_virt.cloud import flow_watcher
from tests import base

MIGRATE = {'Action': 'migrate',
           'Parameters': {'migration_type': 'live', 'resource_name': 'low-1'}}


class Watcher(object):
    """The parts of a Flow that _audit() uses; Watcher's answers in turn."""

    def __init__(self, plans):
        self.plans = list(plans)
        self.audits = 0
        self.said = []

    def os(self, *args, **kwargs):
        if args[:3] == ('optimize', 'audit', 'create'):
            self.audits += 1
            return 0, 'audit-%d\n' % self.audits
        if args[:3] == ('optimize', 'actionplan', 'list'):
            return self.plans.pop(0)
        if args[:3] == ('optimize', 'action', 'list'):
            return [MIGRATE]
        return 0, ''

    def table(self, *args):
        pass

    def out(self, text):
        self.said.append(text)

    def expect(self, ok, message):
        if not ok:
            raise flow_mod.FlowError(message)


def plan(state, uuid='plan'):
    return {'UUID': uuid, 'State': state}


class TestAudit(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            flow_watcher, '_wait_status'))
        self.useFixture(fixtures.MockPatchObject(
            flow_watcher, '_decision_log'))
        self.sleep = self.useFixture(fixtures.MockPatchObject(
            flow_watcher.time, 'sleep')).mock

    def audit(self, watcher, tries):
        return flow_watcher._audit(watcher, {'datasources': 'aetos'},
                                   tries=tries, pause=30)

    def test_an_empty_plan_is_audited_again(self):
        watcher = Watcher([[plan('SUCCEEDED', 'empty')],
                           [plan('RECOMMENDED', 'moves')]])
        found, migrations = self.audit(watcher, tries=3)
        self.assertEqual('moves', found)
        self.assertEqual([MIGRATE], migrations)
        self.assertEqual(2, watcher.audits)
        self.sleep.assert_called_once_with(30)
        self.assertIn('audit 1 of 3 recommends nothing (action plans: '
                      'SUCCEEDED); again in 30 s', watcher.said[0])

    def test_nothing_after_every_try_fails_and_says_so(self):
        watcher = Watcher([[plan('SUCCEEDED')], [], [plan('SUCCEEDED')]])
        err = self.assertRaises(flow_mod.FlowError, self.audit, watcher, 3)
        self.assertIn('recommends an action plan', str(err))
        self.assertEqual(3, watcher.audits)
        self.assertEqual(2, self.sleep.call_count)
        self.assertIn('audit 2 of 3 recommends nothing (action plans: '
                      'none)', watcher.said[1])
        self.assertTrue(watcher.said[2].endswith('(action plans: '
                                                 'SUCCEEDED)'))

    def test_one_try_takes_the_first_answer(self):
        watcher = Watcher([[plan('SUCCEEDED')]])
        self.assertRaises(flow_mod.FlowError, self.audit, watcher, 1)
        self.assertEqual(1, watcher.audits)
        self.sleep.assert_not_called()


class Gnocchi(object):
    """The part of a Flow that _noisiest_in_gnocchi() uses."""

    def __init__(self, measures):
        self.measures = measures

    def _gnocchi_measures(self, uuid, meter, granularity=None):
        # As Gnocchi's --granularity: only the means of that granularity.
        return [m for m in self.measures.get(uuid, [])
                if granularity is None or m['granularity'] == granularity]


def measure(value, granularity=flow_watcher.GRANULARITY):
    return {'timestamp': '2026-01-01T00:00:00+00:00',
            'granularity': float(granularity), 'value': value}


class TestNoisiestInGnocchi(base.TestCase):

    UUIDS = {'low-1': 'u1', 'low-2': 'u2'}

    def noisiest(self, measures):
        return flow_watcher._noisiest_in_gnocchi(Gnocchi(measures),
                                                 self.UUIDS)

    def test_none_while_a_server_has_no_measure_at_the_granularity(self):
        self.assertIsNone(self.noisiest({'u1': [measure(9.0)]}))
        self.assertIsNone(self.noisiest({
            'u1': [measure(9.0)], 'u2': [measure(1.0, granularity=60)]}))

    def test_the_highest_mean_at_the_granularity(self):
        self.assertEqual('low-2', self.noisiest({
            'u1': [measure(4.0), measure(4.0), measure(100.0, 60)],
            'u2': [measure(1.0), measure(9.0)]}))
        self.assertEqual('low-1', self.noisiest({
            'u1': [measure(6.0)], 'u2': [measure(1.0), measure(9.0)]}))


class TestPressureThresholds(base.TestCase):
    """Where the audits on the Prometheus path gate on the pressure."""

    def test_a_host_read_as_pressed_gates_at_the_low_watermark(self):
        # A fresh cloud's compute1 in the class step: above its capacity.
        acts, refused = flow_watcher.pressure_thresholds(1.09)
        self.assertEqual(flow_watcher.HELD_PRESSURE, acts)
        self.assertEqual(1.635, refused)

    def test_a_host_that_reads_lower_gates_on_either_side_of_it(self):
        # The upgraded cloud's compute1: a capacity learned in a busier
        # phase makes the same servers read 0.47.
        acts, refused = flow_watcher.pressure_thresholds(0.472)
        self.assertLess(acts, 0.472)
        self.assertLess(0.472, refused)
        self.assertEqual((0.378, 0.708), (acts, refused))

    def test_too_little_or_no_pressure_gates_nothing(self):
        self.assertIsNone(flow_watcher.pressure_thresholds(None))
        self.assertIsNone(flow_watcher.pressure_thresholds(
            flow_watcher.MIN_PRESSURE / 2))
        self.assertIsNotNone(flow_watcher.pressure_thresholds(
            flow_watcher.MIN_PRESSURE))


class Daemons(object):

    def __init__(self, path):
        self.path = path

    def log_file(self, name):
        return self.path


class TestDecisionLog(base.TestCase):

    def test_only_the_strategys_lines_from_where_the_audit_began(self):
        path = self.useFixture(fixtures.TempDir()).path + '/de.log'
        with open(path, 'w') as f:
            f.write('1 INFO watcher_plugin.strategy compute1: memory '
                    'bandwidth pressure 0.47 is under the threshold 0.60\n')
        watcher = Watcher([])
        watcher.cloud = type('Cloud', (), {'daemons': Daemons(path)})()
        start = flow_watcher._log_size(watcher)
        with open(path, 'a') as f:
            f.write('2 INFO watcher.decision_engine audit started\n'
                    '3 INFO watcher_plugin.strategy compute1: relieved\n')
        self.assertEqual(['3 INFO watcher_plugin.strategy compute1: '
                          'relieved'],
                         flow_watcher._decision_log(watcher, start))
        self.assertEqual(2, len(flow_watcher._decision_log(watcher)))
        self.assertEqual(['  decision engine: 3 INFO watcher_plugin.strategy '
                          'compute1: relieved'], watcher.said[:1])
