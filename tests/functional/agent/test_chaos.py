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

"""Faults under load: hundreds of instances, churn, faults, then checks.

A bounded run of :mod:`tests.functional.agent.chaos` for CI. The seed is
fixed so that CI is reproducible; ``RDT_VIRT_CHAOS_SEED`` picks another,
``RDT_VIRT_CHAOS_INSTANCES`` and ``RDT_VIRT_CHAOS_ROUNDS`` the size
(``tools/chaos.py`` runs many seeds, for longer). A failure names its seed and
the command that replays it.
"""

import os

from testtools import content

from tests import base
from tests.functional.agent import chaos

SEED = int(os.environ.get('RDT_VIRT_CHAOS_SEED', '20261123'))
# Six rounds give each fault kind its forced turn; tools/chaos.py runs
# 300 instances for 30 rounds.
ROUNDS = int(os.environ.get('RDT_VIRT_CHAOS_ROUNDS', '6'))
INSTANCES = int(os.environ.get('RDT_VIRT_CHAOS_INSTANCES', '100'))
CHURN = 10


class TestChaos(base.TestCase):

    def setUp(self):
        super().setUp()
        self.require_fuse()

    def test_faults_under_load(self):
        lines = []
        report = chaos.Chaos(SEED, rounds=ROUNDS, instances=INSTANCES,
                             churn=CHURN, sample_every=2,
                             log=lines.append).run()
        self.addDetail('chaos', content.text_content('\n'.join(lines + [
            report.summary()])))
        self.assertTrue(report.ok, '%s\n%s\nreplay: tools/chaos.py --seed '
                        '%d --rounds %d --instances %d --churn %d -v' % (
                            report.summary(), '\n'.join(report.violations),
                            SEED, ROUNDS, INSTANCES, CHURN))
        # The run did what it is for: faults of every kind and churn.
        self.assertEqual(ROUNDS, report.rounds)
        self.assertGreaterEqual(report.instances_max, INSTANCES)
        self.assertGreater(report.state_checks, ROUNDS)
        for kind in ('create', 'destroy', 'change'):
            self.assertGreater(report.churn[kind], 0, kind)
        for kind in chaos.FAULTS:
            self.assertGreater(report.faults[kind], 0, kind)
