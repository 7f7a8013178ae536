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

"""rdt_noisy_neighbor's audit parameters across an upgrade.

What Watcher does with them (python-watcher 14 to 17):

* watcher-api checks the parameters of a new audit against the strategy's
  schema as the decision engine last synced it, with
  ``StrictDefaultValidatingDraft4Validator``: a parameter the schema does
  not name is refused (``AuditParameterNotAllowed``), and the defaults of
  the others are filled in and stored with the audit;
* watcher-decision-engine hands the stored parameters to the strategy at
  every run of the audit (a continuous one runs for months) without
  checking them again.

So an audit created before an upgrade runs with the new strategy, and one
created against a newer schema may run with an older strategy (a
decision engine not upgraded yet, or rolled back). The first must be read
as it was meant; the second must be read in what the strategy knows.
"""

import json
import os

import testtools

from tests import base
from tests.watcher import test_strategy

try:
    from watcher.common import exception as watcher_exc
    from watcher.common import utils as watcher_utils
    from watcher.decision_engine.solution import default as solution_mod

    from watcher_plugin import datasources
    from watcher_plugin import meters
    from watcher_plugin import strategy
except ImportError:
    strategy = None

UPGRADE = os.path.join(base.FIXTURES_DIR, 'upgrade')
GB = test_strategy.GB
FIXTURES = ('watcher-audit-parameters-v1-defaults.json',
            'watcher-audit-parameters-v1-prometheus.json')


def load(name):
    with open(os.path.join(UPGRADE, name)) as f:
        return json.load(f)


@testtools.skipIf(strategy is None, 'python-watcher is not installed')
class TestAuditParameters(base.TestCase):

    def validate(self, params):
        """What watcher-api does to the parameters of a new audit."""
        params = dict(params)
        watcher_utils.StrictDefaultValidatingDraft4Validator(
            strategy.RDTNoisyNeighbor.get_schema()).validate(params)
        return params

    def run_strategy(self, params, **bandwidth):
        """A run of a stored audit, as the decision engine starts it."""
        s = strategy.RDTNoisyNeighbor(config=watcher_utils.Struct(
            datasources=None))
        s._compute_model = test_strategy.build_model()
        s._datasource_backend = meters.Meters(test_strategy.Datasource({
            ('memory.bandwidth.total', name): [
                ['2026-01-01T00:00:00', 300.0, value]]
            for name, value in bandwidth.items()}))
        s._nova = lambda: None
        s.solution = solution_mod.DefaultSolution(goal=s.goal, strategy=s)
        # DefaultStrategyContext.do_execute_strategy: as stored.
        s.input_parameters.update(params)
        s.do_execute()
        return s, [a['input_parameters']['resource_id']
                   for a in s.solution.actions]

    def test_old_audits_are_accepted_unchanged(self):
        for name in FIXTURES:
            old = load(name)
            # Nothing removed or retyped: a template or script that passes
            # them creates its audit, and nothing stored changes.
            self.assertEqual(old, self.validate(old), name)

    def test_old_audits_run_as_they_were_meant(self):
        noisy = {'protected': GB, 'low-1': 0.7 * GB, 'low-2': 1.5 * GB}
        for name in FIXTURES:
            old = load(name)
            s, moves = self.run_strategy(old, **noisy)
            self.assertEqual(['low-2'], moves, name)
            self.assertEqual(old['period'], s.get_period(None))
            self.assertEqual(old['granularity'], s.get_granularity(None))
            calls = s.datasource_backend.gnocchi.metric.calls
            self.assertEqual({old['granularity']},
                             {c[2]['granularity'] for c in calls})
            # The level meter is read only where the audit names one.
            self.assertEqual(bool(old['level_metric']), any(
                c[0] == old['level_metric'] for c in calls), name)

    def test_a_newer_parameter_is_refused_at_creation(self):
        newer = dict(load(FIXTURES[0]), future_knob=3)
        self.assertRaises(watcher_exc.AuditParameterNotAllowed,
                          self.validate, newer)

    def test_a_stored_newer_audit_runs_on_what_it_knows(self):
        old = load(FIXTURES[0])
        noisy = {'protected': GB, 'low-1': 0.7 * GB, 'low-2': 1.5 * GB}
        _s, moves = self.run_strategy(old, **noisy)
        _s, newer_moves = self.run_strategy(
            dict(old, future_knob=3, future_list=['x']), **noisy)
        self.assertEqual(['low-2'], moves)
        self.assertEqual(moves, newer_moves)

    def test_a_newer_datasource_name_is_passed_over(self):
        order = datasources.order({'datasources': ['future-ds']}, None)
        e = self.assertRaises(datasources.NoDatasource, datasources.choose,
                              order, None)
        self.assertIn('future-ds: not read by rdt_noisy_neighbor', str(e))
