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

"""A sample's host part: what the host's resctrl offers, and the totals
the Prometheus endpoint serves."""

import os

from tests import base
from tests.unit.agent import test_executor
from tests.unit.resctrl import test_fs


class TestSample(test_fs.ResctrlTestCase):

    def agent(self, variant):
        from rdt_virt.cmd import agent as agent_cmd
        rc = self.make(variant)
        state = os.path.join(self.useFixture(base.fixtures.TempDir()).path,
                             'state.json')
        self.flags(resctrl_root=rc.root, state_file=state, group='rdt')
        agent = agent_cmd.build_agent(source=object(), proc=object(),
                                      api=test_executor.FakeAPI())
        agent.caps = rc.capabilities()
        return agent

    def test_whether_the_host_offers_mba(self):
        self.assertIs(True, self.agent('reference').sample()['host']['mba'])
        self.assertIs(False,
                      self.agent('monitoring').sample()['host']['mba'])

    def test_not_known_while_resctrl_is_not_mounted(self):
        agent = self.agent('reference')
        agent.caps = None
        self.assertNotIn('mba', agent.sample()['host'])

    def test_totals_carry_the_refused_writes(self):
        from rdt_virt.cmd import agent as agent_cmd
        agent = self.agent('reference')
        agent.executor.failures['refused'] += 2
        totals = agent_cmd.agent_totals(agent)
        self.assertEqual(2, totals['write_failures']['refused'])
        self.assertEqual(0, totals['write_failures']['busy'])
        self.assertEqual(0, totals['ticks'])
        self.assertIn('tick_cpu', totals)
