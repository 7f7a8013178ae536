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

"""The host state document the agent publishes."""

import os

import fixtures

from rdt_virt.agent import energy
from rdt_virt.agent import model
from rdt_virt.agent import publish
from rdt_virt.agent import rotation
from rdt_virt.agent import sampler
from rdt_virt.agent import state
from tests import base
from tests.unit.agent import fakes as f


class TestBuild(base.TestCase):

    def doc(self):
        instances = {f.U1: f.inst(bw=f.shared(10)),
                     f.U2: f.inst(f.U2),
                     f.U3: f.inst(f.U3, monitor=False)}
        placements = {
            f.U1: model.Placement(f.U1, 'rdtvirt-mb10', f.M1,
                                  ('rdtvirt-mb10', f.M1)),
            f.U2: model.Placement(f.U2, None, reason='rotated out'),
            f.U3: model.Placement(f.U3, None, reason='monitoring disabled')}
        rates = {f.U1: sampler.Rates(1e8, 9e7, 3e6),
                 f.U2: sampler.Rates(reason='rotated out'),
                 f.U3: sampler.Rates(reason='monitoring disabled')}
        rot = rotation.Rotation(60)
        rot.update([f.U1, f.U2], 1, 0)
        return publish.build(1000.0, 10.0, instances, placements, rates,
                             rot, rmids_total=176, rmids_used=3,
                             closids_total=8, closids_used=2, mon_budget=1)

    def test_document(self):
        doc = self.doc()
        one = doc['instances'][f.U1]
        self.assertEqual(('rdtvirt-mb10', f.M1, 1e8, 9e7, 3e6, None),
                         (one['group'], one['mon_group'],
                          one['mbm_total_bps'], one['mbm_local_bps'],
                          one['llc_occupancy_bytes'], one['reason']))
        self.assertEqual('rdtvirt-mb10/' + f.M1, one['counters'])
        two = doc['instances'][f.U2]
        self.assertIsNone(two['mbm_total_bps'])
        self.assertEqual('rotated out', two['reason'])
        host = doc['host']
        self.assertEqual(1e8, host['mbm_total_bps'])
        self.assertEqual((2, 3, 0.5), (host['monitored'], host['instances'],
                                       host['coverage']))
        self.assertTrue(host['rotating'])
        self.assertEqual(0.5, host['mon_coverage'])
        self.assertEqual((176, 3, 8, 2), (
            host['rmids_total'], host['rmids_used'], host['closids_total'],
            host['closids_used']))

    def test_round_trips_through_the_state_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'state.json')
        state.write(path, self.doc())
        doc = state.read(path)
        self.assertEqual(state.VERSION, doc['version'])
        self.assertEqual(1e8, doc['instances'][f.U1]['mbm_total_bps'])

    def test_empty_host(self):
        doc = publish.build(1.0, 10.0, {}, {}, {})
        self.assertEqual(1.0, doc['host']['coverage'])
        self.assertEqual({}, doc['instances'])

    def test_energy_only_on_telemetry_hosts(self):
        self.assertNotIn('power_watts', self.doc()['instances'][f.U1])
        self.assertNotIn('power_watts', self.doc()['host'])
        instances = {f.U1: f.inst(), f.U2: f.inst(f.U2)}
        placements = {u: model.Placement(u, None) for u in instances}
        figures = {f.U1: energy.Energy(3.5, 120.25, 5.46875),
                   f.U2: energy.Energy(reason='first sample')}
        doc = publish.build(1.0, 10.0, instances, placements, {},
                            energy=figures)
        one, two = doc['instances'][f.U1], doc['instances'][f.U2]
        self.assertEqual((3.5, 120.25, 5.469), (
            one['power_watts'], one['energy_joules'], one['activity_fps']))
        self.assertEqual((None, None), (two['power_watts'],
                                        two['energy_joules']))
        self.assertEqual(3.5, doc['host']['power_watts'])
        # The state file keeps them; a bad number becomes null.
        doc['instances'][f.U2]['power_watts'] = -1
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        state.write(path, doc)
        back = state.read(path)
        self.assertEqual(120.25, back['instances'][f.U1]['energy_joules'])
        self.assertIsNone(back['instances'][f.U2]['power_watts'])

    def test_project_of_each_instance(self):
        instances = {
            f.U1: model.Instance(f.U1, 'instance-1', 1, monitor=True,
                                 project_id='5e0d2f4a6b8c4d1e8f0a2b4c'),
            f.U2: f.inst(f.U2)}
        doc = publish.build(1.0, 10.0, instances, {}, {})
        self.assertEqual('5e0d2f4a6b8c4d1e8f0a2b4c',
                         doc['instances'][f.U1]['project_id'])
        self.assertIsNone(doc['instances'][f.U2]['project_id'])
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        state.write(path, doc)
        back = state.read(path)['instances']
        self.assertEqual('5e0d2f4a6b8c4d1e8f0a2b4c',
                         back[f.U1]['project_id'])
        self.assertIsNone(back[f.U2]['project_id'])
