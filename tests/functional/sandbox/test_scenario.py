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

"""The README's main job, end to end, with shorter waits."""

import io
import shutil
import tempfile

from rdt_virt.sandbox import launcher
from rdt_virt.sandbox import scenario
from tests import base


class TestReferenceScenario(base.TestCase):

    def test_noisy_guests_are_throttled_with_either_strategy(self):
        reasons = launcher.missing_prerequisites()
        self.require(not reasons, '; '.join(reasons))
        directory = tempfile.mkdtemp(prefix='rdt-scn-', dir='/tmp')
        self.addCleanup(shutil.rmtree, directory, True)
        out = io.StringIO()
        run = scenario.Scenario(directory, out=out, settle=4.0)
        results = run.run()

        for phase in ('per-instance', 'shared'):
            for name in scenario.NOISY:
                before = results['none'][name]['mbm_total_bps']
                after = results[phase][name]['mbm_total_bps']
                # Throttled to 10%: the emulated traffic follows; CPU
                # shares move a little between phases.
                self.assertLess(after, 0.2 * before, (phase, name))
            self.assertGreater(
                results[phase][scenario.PROTECTED]['mbm_total_bps'],
                0.5 * results['none'][scenario.PROTECTED]['mbm_total_bps'])
        self.assertEqual(7, len(run.groups['per-instance']))
        self.assertEqual(['rdtvirt-mb10'], run.groups['shared'])
        report = out.getvalue()
        self.assertIn('EMULATED', report)
        self.assertIn('rdtvirt-mb10', report)
        self.assertIn('== Summary', report)
        # Nothing is left running.
        self.assertFalse(run.sandbox.running())
