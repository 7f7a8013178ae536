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

        def share(phase, name):
            # Relative to the protected guest of the same phase: other
            # tests may load the same cores, but all guests alike.
            rates = results[phase]
            return (rates[name]['mbm_total_bps'] /
                    rates[scenario.PROTECTED]['mbm_total_bps'])

        for name in scenario.NOISY:
            self.assertGreater(share('none', name), 0.5, name)
            for phase in ('per-instance', 'shared'):
                # Throttled to 10%: the emulated traffic follows.
                self.assertLess(share(phase, name),
                                0.25 * share('none', name), (phase, name))
        self.assertEqual(7, len(run.groups['per-instance']))
        self.assertEqual(['rdtvirt-mb10'], run.groups['shared'])
        report = out.getvalue()
        self.assertIn('EMULATED', report)
        self.assertIn('rdtvirt-mb10', report)
        self.assertIn('== Summary', report)
        # Nothing is left running.
        self.assertFalse(run.sandbox.running())
